"""asyncpg behind the executor shim of docs/postgres.md: the conformance kit passes on it too."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from runyard import (
    CounterDelta,
    ManualClock,
    QueuePolicy,
    QueueUnavailableError,
    RunKey,
    StatePersistenceError,
    StoreOutcomeUnknown,
)
from runyard._async.protocols import AsyncStateStore, AsyncWorkQueue
from runyard._async.testing import AsyncStateStoreConformance, AsyncWorkQueueConformance
from runyard.postgres import AsyncPostgresStateStore, AsyncPostgresWorkQueue, StateTables
from runyard.postgres.errors import map_error

from tests.support.postgres_plugin import PG_HOST, PG_PORT
from tests.support.proxy import running_proxy


class AsyncpgExecutor:
    """The shim from docs/postgres.md: an asyncpg pool as a runyard executor."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def fetch(self, statement: str, *args: Any) -> list[Any]:
        return list(await self.pool.fetch(statement, *args))

    async def aclose(self) -> None:
        await self.pool.close()


async def _executor() -> AsyncpgExecutor:
    pool = await asyncpg.create_pool(
        host=PG_HOST,
        port=PG_PORT,
        user="postgres",
        database="test",
        min_size=1,
        max_size=10,
        server_settings={"statement_timeout": "30s"},
    )
    return AsyncpgExecutor(pool)


class TestAsyncpgStateStore(AsyncStateStoreConformance):
    @pytest.fixture(autouse=True)
    def _tables(self, pg_tables: StateTables) -> None:
        self.tables = pg_tables

    async def make_store(self) -> AsyncStateStore:
        self.clock = ManualClock()
        return await AsyncPostgresStateStore.open(
            await _executor(), tables=self.tables, clock=self.clock, close_source=True
        )

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)


class TestAsyncpgWorkQueue(AsyncWorkQueueConformance):
    @pytest.fixture(autouse=True)
    def _tables(self, pg_tables: StateTables) -> None:
        self.tables = pg_tables

    async def make_queue(self, policy: QueuePolicy) -> AsyncWorkQueue:
        self.clock = ManualClock()
        return await AsyncPostgresWorkQueue.open(
            await _executor(),
            tables=self.tables,
            clock=self.clock,
            policy=policy,
            close_source=True,
        )

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)


@pytest.mark.asyncio
async def test_an_asyncpg_pool_is_an_executor_as_it_is(pg_tables: StateTables) -> None:
    executor = await _executor()
    store = await AsyncPostgresStateStore.open(executor.pool, tables=pg_tables)
    try:
        await store.put_run(RunKey("acme", "r"), {"via": "asyncpg"}, expected_version=0)
        got = await store.get_run(RunKey("acme", "r"))
        assert got is not None and got.blob == {"via": "asyncpg"}
    finally:
        await executor.aclose()


# -- a lost reply through asyncpg: asyncpg reports it as SQLSTATE 08003 ----------------------


async def _executor_via(port: int) -> AsyncpgExecutor:
    pool = await asyncpg.create_pool(
        host=PG_HOST,
        port=port,
        user="postgres",
        database="test",
        min_size=1,
        max_size=1,
        server_settings={"statement_timeout": "30s"},
    )
    return AsyncpgExecutor(pool)


@pytest.mark.asyncio
async def test_an_asyncpg_patch_whose_reply_is_lost_is_settled_by_its_write_id(
    pg_tables: StateTables,
) -> None:
    key = RunKey("acme", "r")
    with running_proxy(PG_PORT) as proxy:
        store = AsyncPostgresStateStore(
            await _executor_via(proxy.port), tables=pg_tables, close_source=True
        )
        async with store:
            await store.put_run(key, {}, expected_version=0)
            await store.patch_run(key, CounterDelta(iterations=1))  # prepares the statement
            proxy.drop_next_reply()
            patched = await store.patch_run(key, CounterDelta(iterations=1))
            assert proxy.dropped == 1 and patched.iterations == 2
            record = await store.get_run(key)
            assert record is not None and record.iterations == 2  # applied once, not re-sent


@pytest.mark.asyncio
async def test_an_asyncpg_put_whose_reply_is_lost_is_settled_by_reading_back(
    pg_tables: StateTables,
) -> None:
    key = RunKey("acme", "r")
    with running_proxy(PG_PORT) as proxy:
        store = AsyncPostgresStateStore(
            await _executor_via(proxy.port), tables=pg_tables, close_source=True
        )
        async with store:
            await store.put_run(key, {"v": 1}, expected_version=0)
            await store.put_run(key, {"v": 2}, expected_version=1)  # prepares the statement
            proxy.drop_next_reply()
            record = await store.put_run(key, {"v": 3}, expected_version=2)
            assert proxy.dropped == 1
            assert (record.version, record.blob) == (3, {"v": 3})


def test_asyncpg_connection_errors_are_mapped_by_whether_anything_was_sent() -> None:
    lost = asyncpg.exceptions.ConnectionDoesNotExistError(
        "connection was closed in the middle of operation"
    )
    assert lost.sqlstate == "08003"
    assert isinstance(map_error(lost, kind="state", idempotent=False), StoreOutcomeUnknown)
    assert isinstance(map_error(lost, kind="queue", idempotent=True), QueueUnavailableError)
    never_made = asyncpg.exceptions.ClientCannotConnectError("could not connect")
    assert never_made.sqlstate == "08001"
    error = map_error(never_made, kind="state", idempotent=False)
    assert isinstance(error, StatePersistenceError) and error.reason == "unavailable"
