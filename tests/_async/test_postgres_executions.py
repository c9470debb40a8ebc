"""The execution store on PostgreSQL: the kit unchanged, bound(), concurrency, verify(). Round
trips and lost replies: test_postgres_execution_replies.py."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from psycopg import AsyncConnection
from runyard import (
    ConfigurationError,
    ManualClock,
    RunKey,
    StoreConflict,
)
from runyard._async.execution_protocol import AsyncExecutionStore
from runyard._async.testing import AsyncExecutionStoreConformance
from runyard._flavours import async_gather, async_sleep
from runyard.capabilities import StoreCapabilities, certify
from runyard.errors import InvalidArgumentError
from runyard.executions import Execution, TraceStep
from runyard.postgres import (
    AsyncPostgresExecutionStore,
    AsyncPostgresStateStore,
    StateTables,
)

from tests._async.postgres_support import (
    T0,
    CountingExecutor,
    full_commit_kwargs,
    open_executions,
    open_pool,
    open_queue,
    open_store,
)
from tests.support.postgres_plugin import PG_DSN, admin_connection

# How often the concurrency test looks for the blocked commit before giving up (not a timing
# assertion: the test only needs the commit to be waiting on the row lock, however long it takes
# to get there).
MAX_POLLS = 2_000


class TestPostgresExecutionStore(AsyncExecutionStoreConformance):
    @pytest.fixture(autouse=True)
    def _tables(self, pg_tables: StateTables) -> None:
        self.tables = pg_tables

    async def make_store(self) -> AsyncExecutionStore:
        return await open_executions(self.tables, ManualClock())


class TestPostgresExecutionStoreWithASmallRing(AsyncExecutionStoreConformance):
    @pytest.fixture(autouse=True)
    def _tables(self, pg_tables: StateTables) -> None:
        self.tables = pg_tables

    async def make_store(self) -> AsyncExecutionStore:
        return await open_executions(self.tables, trace_max=3)


async def _connect(**kwargs: Any) -> AsyncConnection[Any]:
    return await AsyncConnection.connect(PG_DSN, **kwargs)


# -- capabilities ------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_the_store_satisfies_the_protocol_and_certifies(pg_tables: StateTables) -> None:
    store = await open_executions(pg_tables)
    async with store:
        assert isinstance(store, AsyncExecutionStore)
        assert certify(store) == StoreCapabilities(
            retry_ids=True, transactional=True, deployment="multi_server"
        )
        assert store.trace_max == 200


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, 10**6 + 1, 10**17])
def test_trace_max_must_be_a_positive_int(bad: object) -> None:
    # Unbounded, 10**17 failed every Redis commit half way (its LTRIM refused the number).
    with pytest.raises(InvalidArgumentError):
        AsyncPostgresExecutionStore(
            CountingExecutor(None),  # type: ignore[arg-type]
            trace_max=bad,  # type: ignore[arg-type]
        )


# -- bound() ----------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_a_bound_commit_lands_with_the_run_and_the_work(pg_tables: StateTables) -> None:
    executions = await open_executions(pg_tables)
    store, queue = await open_store(pg_tables), await open_queue(pg_tables)
    async with executions, store, queue, await _connect() as conn:
        exe = Execution(id="order-1", definition_id="checkout")
        async with conn.transaction():
            seqs = await executions.bound(conn).commit(exe, **full_commit_kwargs(1))
            await store.bound(conn).put_run(RunKey("acme", "r1"), {"step": 1}, expected_version=0)
            await queue.bound(conn).enqueue("acme", {"exe": "order-1"}, item_id="job-1")
            assert await executions.load("order-1") is None  # not visible before COMMIT
        assert exe.version == 1
        assert [e.seq for e in await executions.pending_outbox()] == seqs
        assert await executions.is_processed("order-1", "in-1") is True
        assert len(await executions.due_timers(T0 + 1)) == 1
        assert [s.child_id for s in await executions.pending_spawns()] == ["kid-1"]
        assert [t.index for t in await executions.read_trace("order-1")] == [1]
        assert await store.get_run(RunKey("acme", "r1")) is not None
        assert await queue.get_item("acme", "job-1") is not None


class Boom(Exception):
    pass


@pytest.mark.asyncio
async def test_a_failed_transaction_rolls_back_the_commit_the_run_and_the_work(
    pg_tables: StateTables,
) -> None:
    executions = await open_executions(pg_tables)
    store, queue = await open_store(pg_tables), await open_queue(pg_tables)
    async with executions, store, queue, await _connect() as conn:

        async def write_all_then_fail() -> None:
            async with conn.transaction():
                exe = Execution(id="order-1", definition_id="checkout")
                await executions.bound(conn).commit(exe, **full_commit_kwargs(1))
                await store.bound(conn).put_run(RunKey("acme", "r1"), {}, expected_version=0)
                await queue.bound(conn).enqueue("acme", {}, item_id="job-1")
                raise Boom

        with pytest.raises(Boom):
            await write_all_then_fail()
        assert await executions.load("order-1") is None
        assert await executions.pending_outbox() == []
        assert await executions.is_processed("order-1", "in-1") is False
        assert await executions.due_timers(T0 + 1_000) == []
        assert await executions.pending_spawns() == []
        assert await executions.read_trace("order-1") == []
        assert await store.get_run(RunKey("acme", "r1")) is None
        assert await queue.get_item("acme", "job-1") is None


@pytest.mark.asyncio
async def test_a_bound_conflict_leaves_the_transaction_usable(pg_tables: StateTables) -> None:
    executions = await open_executions(pg_tables)
    async with executions, await _connect() as conn:
        await executions.save(Execution(id="e1", definition_id="flow"))
        stale = Execution(id="e1", definition_id="flow")  # version 0: a create over it
        async with conn.transaction():
            bound = executions.bound(conn)
            with pytest.raises(StoreConflict) as caught:
                await bound.commit(stale, **full_commit_kwargs(1))
            assert (caught.value.expected, caught.value.found) == (0, 1)
            await bound.append_trace("e1", TraceStep(event_name="noted"))
        assert [t.event_name for t in await executions.read_trace("e1")] == ["noted"]
        assert await executions.pending_outbox() == []


@pytest.mark.asyncio
async def test_bound_refuses_an_autocommit_connection(pg_tables: StateTables) -> None:
    executions = await open_executions(pg_tables)
    async with executions, await _connect(autocommit=True) as conn:
        with pytest.raises(ConfigurationError, match="autocommit"):
            executions.bound(conn)
        async with conn.transaction():  # inside an explicit block it is accepted
            await executions.bound(conn).save(Execution(id="e1", definition_id="flow"))
        assert await executions.load("e1") is not None


# -- concurrency on the real server -------------------------------------------------------------
@pytest.mark.asyncio
async def test_a_commit_that_waited_for_the_winner_reports_it_and_writes_nothing(
    pg_tables: StateTables,
) -> None:
    """The loser's statement starts before the winner commits and blocks on the row lock;
    once the winner commits, the loser writes nothing and reports the winner's version."""
    executions = await open_executions(pg_tables)
    async with executions, await _connect() as conn, await _connect(autocommit=True) as watch:
        await executions.save(Execution(id="hot", definition_id="flow"))
        mine, theirs = await executions.load("hot"), await executions.load("hot")
        assert mine is not None and theirs is not None
        await executions.bound(conn).commit(theirs, **full_commit_kwargs(1))  # holds the row

        async def lose() -> StoreConflict:
            with pytest.raises(StoreConflict) as caught:
                await executions.commit(mine, **full_commit_kwargs(2))
            return caught.value

        async def win_once_the_loser_waits() -> None:
            for _ in range(MAX_POLLS):
                cursor = await watch.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND position(%s in query) > 0",
                    (pg_tables.schema or "",),
                )
                row = await cursor.fetchone()
                if row is not None and row[0]:
                    break
                await async_sleep(0.005)
            else:
                raise AssertionError("the losing commit never waited on the row lock")
            await conn.commit()

        conflict = (await async_gather([lose, win_once_the_loser_waits]))[0]
        assert isinstance(conflict, StoreConflict)
        assert (conflict.expected, conflict.found) == (1, 2) and mine.version == 1
        assert [e.event.id for e in await executions.pending_outbox()] == ["out-1"]
        assert await executions.is_processed("hot", "in-2") is False
        assert [(t.path, t.fire_at) for t in await executions.due_timers(T0 + 10)] == [
            ("wait", T0 + 1)
        ]
        assert [s.child_id for s in await executions.pending_spawns()] == ["kid-1"]
        assert [t.event_id for t in await executions.read_trace("hot")] == ["in-1"]


@pytest.mark.asyncio
async def test_concurrent_trace_steps_get_distinct_indices(pg_tables: StateTables) -> None:
    executions = await open_executions(pg_tables, trace_max=5)
    async with executions:
        exe = Execution(id="e1", definition_id="flow")

        async def step(n: int) -> int:
            entry = await executions.append_trace("e1", TraceStep(data={"n": n}))
            return entry.index

        indices = await async_gather([partial(step, n) for n in range(12)])
        await executions.commit(exe, trace=TraceStep(event_name="last"))
        assert sorted(indices) == list(range(1, 13))
        trace = await executions.read_trace("e1")
        assert [t.index for t in trace] == [9, 10, 11, 12, 13]


# -- verify() ----------------------------------------------------------------------------------
@pytest.mark.asyncio
@pytest.mark.parametrize("table", ["executions", "outbox", "processed", "trace_heads"])
async def test_a_missing_execution_table_is_refused_saying_how_to_fix_it(
    pg_tables: StateTables, table: str
) -> None:
    name = getattr(pg_tables, table)
    with admin_connection() as admin:
        admin.execute(f"DROP TABLE {pg_tables.qualified(name)}")
    pool = await open_pool()
    try:
        with pytest.raises(ConfigurationError) as caught:
            await AsyncPostgresExecutionStore.open(pool, tables=pg_tables)
        message = str(caught.value)
        assert name in message and "does not exist" in message
        assert "apply runyard.postgres.EXPECTED_SCHEMA with your migration tool" in message
        assert "docs/postgres.md" in message
        # The other components verify on their own tables only.
        state = await AsyncPostgresStateStore.open(pool, tables=pg_tables)
        assert await state.get_run(RunKey("acme", "r")) is None
    finally:
        await pool.close()


@pytest.mark.asyncio
async def test_the_executions_schema_version_is_checked(pg_tables: StateTables) -> None:
    table = pg_tables.qualified(pg_tables.schema_table)
    with admin_connection() as admin:
        admin.execute(f"UPDATE {table} SET version = 1 WHERE component = 'executions'")
    pool = await open_pool()
    try:
        with pytest.raises(ConfigurationError, match=r"version 1, but .* written for version 3"):
            await AsyncPostgresExecutionStore.open(pool, tables=pg_tables)
        with admin_connection() as admin:
            admin.execute(f"DELETE FROM {table} WHERE component = 'executions'")
        with pytest.raises(ConfigurationError, match="no row for component 'executions'"):
            await AsyncPostgresExecutionStore.open(pool, tables=pg_tables)
    finally:
        await pool.close()


@pytest.mark.asyncio
async def test_custom_table_names_work(pg_schema: str) -> None:
    from runyard.postgres import schema_sql

    tables = StateTables.with_prefix("app_", schema=pg_schema)
    with admin_connection() as admin:
        admin.execute(schema_sql(tables))
    executions = await open_executions(tables)
    async with executions:
        exe = Execution(id="e1", definition_id="flow")
        await executions.commit(exe, **full_commit_kwargs(1))
        assert len(await executions.pending_outbox()) == 1
    with admin_connection() as admin:
        cursor = admin.execute(f'SELECT count(*) FROM "{pg_schema}"."app_execution_outbox"')
        row = cursor.fetchone()
        assert row is not None and row[0] == 1
