"""The conformance kit against PostgreSQL, unchanged (each test in its own schema)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator

import pytest
from runyard import ManualClock, QueuePolicy
from runyard._async.protocols import AsyncStateStore, AsyncWorkQueue
from runyard._async.testing import AsyncStateStoreConformance, AsyncWorkQueueConformance
from runyard.postgres import (
    AsyncPostgresStateStore,
    AsyncPostgresUpdates,
    StateTables,
    schema_sql,
)
from runyard.testing import TwinDriver

from tests._async.postgres_support import open_queue, open_store
from tests.support.postgres_plugin import admin_connection, fresh_schema
from tests.support.twins import AsyncTwins


class TestPostgresStateStore(AsyncStateStoreConformance):
    @pytest.fixture(autouse=True)
    def _tables(self, pg_tables: StateTables) -> Iterator[None]:
        self.tables = pg_tables
        self.extra_schemas: list[str] = []
        yield
        with admin_connection() as conn:
            for name in self.extra_schemas:
                conn.execute(f'DROP SCHEMA "{name}" CASCADE')

    async def make_store(self) -> AsyncStateStore:
        self.clock = ManualClock()
        return await open_store(self.tables, self.clock)

    async def make_live_store(self) -> AsyncStateStore:
        # A schema of its own: the live store shares no run with the polling one.
        return await open_store(self._extra_tables(), self.clock, live_updates=True)

    async def make_real_time_store(self) -> AsyncStateStore:
        # No clock: an event's time is the server's clock_timestamp().
        return await open_store(self._extra_tables())

    def make_twin(self, store: AsyncStateStore) -> TwinDriver:
        assert isinstance(store, AsyncPostgresStateStore)
        return AsyncTwins.postgres(store.tables, store.live_updates is not None)

    def listener_killer(self, store: AsyncStateStore) -> Callable[[], Awaitable[None]]:
        assert isinstance(store, AsyncPostgresStateStore)
        updates = store.live_updates
        assert isinstance(updates, AsyncPostgresUpdates)

        async def kill() -> None:
            with admin_connection() as conn:
                conn.execute("SELECT pg_terminate_backend(%s)", [updates.backend_pid])

        return kill

    def _extra_tables(self) -> StateTables:
        tables = StateTables(schema=fresh_schema())
        self.extra_schemas.append(tables.schema or "")
        with admin_connection() as conn:
            conn.execute(f'CREATE SCHEMA "{tables.schema}"')
            conn.execute(schema_sql(tables))
        return tables

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)


class TestPostgresWorkQueue(AsyncWorkQueueConformance):
    @pytest.fixture(autouse=True)
    def _tables(self, pg_tables: StateTables) -> None:
        self.tables = pg_tables

    async def make_queue(self, policy: QueuePolicy) -> AsyncWorkQueue:
        self.clock = ManualClock()
        return await open_queue(self.tables, self.clock, policy)

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
