"""The execution store behind the asyncpg shim of docs/postgres.md: the kit passes on it too."""

from __future__ import annotations

import pytest
from runyard._async.execution_protocol import AsyncExecutionStore
from runyard._async.testing import AsyncExecutionStoreConformance
from runyard.postgres import AsyncPostgresExecutionStore, StateTables

from tests.test_postgres_asyncpg import _executor


class TestAsyncpgExecutionStore(AsyncExecutionStoreConformance):
    @pytest.fixture(autouse=True)
    def _tables(self, pg_tables: StateTables) -> None:
        self.tables = pg_tables

    async def make_store(self) -> AsyncExecutionStore:
        return await AsyncPostgresExecutionStore.open(
            await _executor(), tables=self.tables, close_source=True
        )
