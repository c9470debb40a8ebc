"""The execution store on PostgreSQL, counted: one statement per commit, nothing sent for a
refused payload, and a commit whose reply is lost (resent, or an unknown outcome)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from runyard import (
    StatePersistenceError,
    StoreConflict,
    StoreOutcomeUnknown,
)
from runyard.executions import Execution, TraceStep
from runyard.postgres import (
    AsyncPostgresExecutionStore,
    AsyncPsycopgExecutor,
    StateTables,
)

from tests._async.postgres_support import (
    CountingExecutor,
    full_commit_kwargs,
    open_pool,
)


class LosingExecutor(CountingExecutor):
    """Loses the connection on the next commit statement, before or after running it."""

    def __init__(self, inner: AsyncPsycopgExecutor, *, after: bool) -> None:
        super().__init__(inner)
        self.after = after
        self.armed = False

    async def fetch(self, statement: str, *args: Any) -> Any:
        if self.armed and statement.startswith("WITH cas"):
            self.armed = False
            if self.after:
                await super().fetch(statement, *args)
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return await super().fetch(statement, *args)


# -- round trips ------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_every_commit_is_one_statement(pg_tables: StateTables) -> None:
    pool = await open_pool()
    executor = CountingExecutor(AsyncPsycopgExecutor(pool))
    store = AsyncPostgresExecutionStore(executor, tables=pg_tables)
    try:
        exe = Execution(id="e1", definition_id="flow")
        await store.save(exe)  # create, state only
        assert executor.sent == 1
        await store.commit(exe, processed_event_id="in-0")  # fast path with the dedupe mark
        assert executor.sent == 2
        for n in range(1, 4):  # the full path: every kind of write at once
            before = executor.sent
            await store.commit(exe, **full_commit_kwargs(n))
            assert executor.sent == before + 1
        fresh = Execution(id="e2", definition_id="flow")
        before = executor.sent
        await store.commit(fresh, **full_commit_kwargs(9))  # full path, creating
        assert executor.sent == before + 1
        before = executor.sent
        loaded, processed = await store.load_for_event("e1", "in-1")
        assert executor.sent == before + 1 and processed and loaded is not None
        stale = loaded.model_copy()
        stale.version = 2
        before = executor.sent
        with pytest.raises(StoreConflict) as caught:
            await store.commit(stale, **full_commit_kwargs(7))
        assert (caught.value.expected, caught.value.found) == (2, 5)
        assert executor.sent == before + 1  # a sequential conflict needs no second read
    finally:
        await pool.close()


@pytest.mark.asyncio
async def test_a_refused_payload_sends_nothing(pg_tables: StateTables) -> None:
    pool = await open_pool()
    executor = CountingExecutor(AsyncPsycopgExecutor(pool))
    store = AsyncPostgresExecutionStore(executor, tables=pg_tables, max_value_bytes=1_000)
    try:
        exe = Execution(id="e1", definition_id="flow", context={"x": "y" * 2_000})
        with pytest.raises(StatePersistenceError, match="max_value_bytes"):
            await store.commit(exe)
        with pytest.raises(StatePersistenceError, match="not storable"):
            await store.append_trace("e1", TraceStep(data=float("nan")))
        assert executor.sent == 0 and exe.version == 0
    finally:
        await pool.close()


# -- a lost reply -------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_a_commit_lost_before_it_applied_is_sent_again(pg_tables: StateTables) -> None:
    pool = await open_pool()
    executor = LosingExecutor(AsyncPsycopgExecutor(pool), after=False)
    store = AsyncPostgresExecutionStore(executor, tables=pg_tables)
    try:
        exe = Execution(id="e1", definition_id="flow")
        await store.save(exe)
        executor.armed = True
        seqs = await store.commit(exe, **full_commit_kwargs(1))
        assert exe.version == 2 and len(seqs) == 1
        assert [e.event.id for e in await store.pending_outbox()] == ["out-1"]
    finally:
        await pool.close()


@pytest.mark.asyncio
async def test_a_commit_lost_after_it_applied_is_an_unknown_outcome(
    pg_tables: StateTables,
) -> None:
    pool = await open_pool()
    executor = LosingExecutor(AsyncPsycopgExecutor(pool), after=True)
    store = AsyncPostgresExecutionStore(executor, tables=pg_tables)
    try:
        exe = Execution(id="e1", definition_id="flow")
        await store.save(exe)
        executor.armed = True
        with pytest.raises(StoreOutcomeUnknown):
            await store.commit(exe, **full_commit_kwargs(1))
        assert exe.version == 1
        stored, processed = await store.load_for_event("e1", "in-1")
        assert stored is not None and stored.version == 2 and processed
        assert len(await store.pending_outbox()) == 1  # applied once, never twice
    finally:
        await pool.close()


class LateFirstSendExecutor(CountingExecutor):
    """Loses the next commit statement's reply before it reaches the server; that statement
    runs later, just before the next commit statement (a send still running when the store
    read the version back)."""

    def __init__(self, inner: AsyncPsycopgExecutor) -> None:
        super().__init__(inner)
        self.armed = False
        self.held: tuple[str, tuple[Any, ...]] | None = None

    async def fetch(self, statement: str, *args: Any) -> Any:
        if self.armed and statement.startswith("WITH cas"):
            self.armed = False
            self.held = (statement, args)
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        if self.held is not None and statement.startswith("WITH cas"):
            held, self.held = self.held, None
            await super().fetch(held[0], *held[1])
        return await super().fetch(statement, *args)


@pytest.mark.asyncio
async def test_a_resend_that_loses_to_a_late_first_send_is_an_unknown_outcome(
    pg_tables: StateTables,
) -> None:
    pool = await open_pool()
    executor = LateFirstSendExecutor(AsyncPsycopgExecutor(pool))
    store = AsyncPostgresExecutionStore(executor, tables=pg_tables)
    try:
        exe = Execution(id="e1", definition_id="flow")
        await store.save(exe)
        executor.armed = True
        with pytest.raises(StoreOutcomeUnknown):
            await store.commit(exe, **full_commit_kwargs(1))
        assert executor.held is None and exe.version == 1
        stored, processed = await store.load_for_event("e1", "in-1")
        assert stored is not None and stored.version == 2 and processed
        assert len(await store.pending_outbox()) == 1  # the first send applied, once
    finally:
        await pool.close()
