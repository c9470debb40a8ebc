"""The conformance kit, unchanged, against PostgreSQL (each test in its own schema)."""

from __future__ import annotations

import pytest
from runyard import ManualClock, QueuePolicy
from runyard._async.protocols import AsyncStateStore, AsyncWorkQueue
from runyard._async.testing import AsyncStateStoreConformance, AsyncWorkQueueConformance
from runyard.postgres import StateTables

from tests._async.postgres_support import open_queue, open_store


class TestPostgresStateStore(AsyncStateStoreConformance):
    @pytest.fixture(autouse=True)
    def _tables(self, pg_tables: StateTables) -> None:
        self.tables = pg_tables

    async def make_store(self) -> AsyncStateStore:
        self.clock = ManualClock()
        return await open_store(self.tables, self.clock)

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
