"""asyncpg behind the executor shim of docs/postgres.md: the conformance kit passes on it too."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from runyard import ManualClock, QueuePolicy, RunKey
from runyard._async.protocols import AsyncStateStore, AsyncWorkQueue
from runyard._async.testing import AsyncStateStoreConformance, AsyncWorkQueueConformance
from runyard.postgres import AsyncPostgresStateStore, AsyncPostgresWorkQueue, StateTables

from tests.support.postgres_plugin import PG_HOST, PG_PORT


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
