"""Execution store interop on PostgreSQL: what one twin commits, the other reads and commits on."""

from __future__ import annotations

from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from runyard import StoreConflict
from runyard.executions import Event, Execution, SpawnIntent, TimerOp, TraceStep
from runyard.postgres import AsyncPostgresExecutionStore, PostgresExecutionStore, StateTables

from tests.support.postgres_plugin import PG_DSN

T0 = 1_700_000_000.0


async def _async_store(tables: StateTables) -> AsyncPostgresExecutionStore:
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(PG_DSN, min_size=1, open=False)
    await pool.open(wait=True)
    return await AsyncPostgresExecutionStore.open(pool, tables=tables, close_source=True)


def _sync_store(tables: StateTables) -> PostgresExecutionStore:
    pool: ConnectionPool[Any] = ConnectionPool(PG_DSN, min_size=1, open=True)
    return PostgresExecutionStore.open(pool, tables=tables, close_source=True)


def _caused(n: int) -> dict[str, Any]:
    return {
        "emits": [("billing", Event(id=f"out-{n}", name="charge", data={"n": n}))],
        "processed_event_id": f"in-{n}",
        "timers": [TimerOp.schedule("wait", T0 + n)],
        "spawns": [SpawnIntent(child_id=f"kid-{n}", root_path="sub", context={"n": n})],
        "trace": TraceStep(event_id=f"in-{n}", event_name="go", data={"n": n}),
    }


@pytest.mark.asyncio
async def test_sync_commits_are_read_and_committed_on_by_async(pg_tables: StateTables) -> None:
    with _sync_store(pg_tables) as store:
        exe = Execution(id="order-1", definition_id="checkout", context={"by": "sync"})
        [seq] = store.commit(exe, **_caused(1))

    async with await _async_store(pg_tables) as a_store:
        loaded, processed = await a_store.load_for_event("order-1", "in-1")
        assert processed and loaded is not None
        assert (loaded.version, loaded.context) == (1, {"by": "sync"})
        [entry] = await a_store.pending_outbox()
        assert (entry.seq, entry.target_id, entry.event.data) == (seq, "billing", {"n": 1})
        [spawn] = await a_store.pending_spawns()
        assert (spawn.child_id, spawn.root_path, spawn.context) == ("kid-1", "sub", {"n": 1})
        [timer] = await a_store.due_timers(T0 + 1)
        assert await a_store.delete_timer(timer.execution_id, timer.path, timer.fire_at)
        loaded.context["by"] = "async"
        await a_store.commit(loaded, **_caused(2))
        assert [t.index for t in await a_store.read_trace("order-1")] == [1, 2]

    with _sync_store(pg_tables) as store:
        again = store.load("order-1")
        assert again is not None and (again.version, again.context) == (2, {"by": "async"})
        stale = Execution(id="order-1", definition_id="checkout", version=1)
        with pytest.raises(StoreConflict) as caught:
            store.commit(stale, **_caused(3))
        assert (caught.value.expected, caught.value.found) == (1, 2)
        assert [e.event.id for e in store.pending_outbox()] == ["out-1", "out-2"]


@pytest.mark.asyncio
async def test_async_commits_are_read_and_committed_on_by_sync(pg_tables: StateTables) -> None:
    async with await _async_store(pg_tables) as a_store:
        exe = Execution(id="order-1", definition_id="checkout", context={"by": "async"})
        await a_store.commit(exe, **_caused(1))
        await a_store.append_trace("order-1", TraceStep(event_name="noted"))

    with _sync_store(pg_tables) as store:
        loaded, processed = store.load_for_event("order-1", "in-1")
        assert processed and loaded is not None and loaded.context == {"by": "async"}
        assert [(t.index, t.event_name) for t in store.read_trace("order-1")] == [
            (1, "go"),
            (2, "noted"),
        ]
        loaded.status = "done"
        store.commit(loaded, **_caused(2))
        page = store.list_executions(status="done")
        assert [s.id for s in page.items] == ["order-1"]

    async with await _async_store(pg_tables) as a_store:
        again = await a_store.load("order-1")
        assert again is not None and (again.version, again.status) == (2, "done")
        assert [(t.index, t.event_name) for t in await a_store.read_trace("order-1")] == [
            (1, "go"),
            (2, "noted"),
            (3, "go"),
        ]
        assert [t.path for t in await a_store.due_timers(T0 + 10)] == ["wait"]
        assert [s.child_id for s in await a_store.pending_spawns()] == ["kid-1", "kid-2"]
