"""The conformance kit, unchanged, against SQLite: a private in-memory database and a file."""

from __future__ import annotations

from pathlib import Path

import pytest
from runyard import ManualClock, QueuePolicy
from runyard._async.execution_protocol import AsyncExecutionStore
from runyard._async.protocols import AsyncStateStore, AsyncWorkQueue
from runyard._async.testing import (
    AsyncExecutionStoreConformance,
    AsyncStateStoreConformance,
    AsyncWorkQueueConformance,
)
from runyard.sqlite import AsyncSqliteStateStore, AsyncSqliteStore, AsyncSqliteWorkQueue
from runyard.testing import TwinDriver

from tests.support.twins import AsyncTwins


class _OnAFile:
    """Each test gets a new file in its own temporary directory."""

    @pytest.fixture(autouse=True)
    def _path(self, tmp_path: Path) -> None:
        self.path = str(tmp_path / "runyard.db")


class TestSqliteMemoryStateStore(AsyncStateStoreConformance):
    async def make_store(self) -> AsyncStateStore:
        self.clock = ManualClock()
        return await AsyncSqliteStateStore.open(":memory:", create_schema=True, clock=self.clock)

    async def make_live_store(self) -> AsyncStateStore:
        # A private in-memory database of its own, with the in-process hub.
        return await AsyncSqliteStateStore.open(
            ":memory:", create_schema=True, clock=self.clock, live_updates=True
        )

    async def make_real_time_store(self) -> AsyncStateStore:
        return await AsyncSqliteStateStore.open(":memory:", create_schema=True)

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)


class TestSqliteFileStateStore(_OnAFile, AsyncStateStoreConformance):
    async def make_store(self) -> AsyncStateStore:
        self.clock = ManualClock()
        return await AsyncSqliteStateStore.open(self.path, create_schema=True, clock=self.clock)

    async def make_live_store(self) -> AsyncStateStore:
        # A file of its own, so the live store shares no run with the polling one.
        return await AsyncSqliteStateStore.open(
            self.path + ".live", create_schema=True, clock=self.clock, live_updates=True
        )

    async def make_real_time_store(self) -> AsyncStateStore:
        return await AsyncSqliteStateStore.open(self.path + ".time", create_schema=True)

    def make_twin(self, store: AsyncStateStore) -> TwinDriver:
        live = getattr(store, "live_updates", None) is not None
        return AsyncTwins.sqlite(self.path + ".live" if live else self.path, live)

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)


class TestSqliteMemoryWorkQueue(AsyncWorkQueueConformance):
    async def make_queue(self, policy: QueuePolicy) -> AsyncWorkQueue:
        self.clock = ManualClock()
        return await AsyncSqliteWorkQueue.open(
            ":memory:", create_schema=True, clock=self.clock, policy=policy
        )

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)


class TestSqliteFileWorkQueue(_OnAFile, AsyncWorkQueueConformance):
    async def make_queue(self, policy: QueuePolicy) -> AsyncWorkQueue:
        self.clock = ManualClock()
        return await AsyncSqliteWorkQueue.open(
            self.path, create_schema=True, clock=self.clock, policy=policy
        )

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)


class TestSqliteMemoryExecutionStore(AsyncExecutionStoreConformance):
    async def make_store(self) -> AsyncExecutionStore:
        return await AsyncSqliteStore.open(":memory:", create_schema=True)


class TestSqliteFileExecutionStore(_OnAFile, AsyncExecutionStoreConformance):
    async def make_store(self) -> AsyncExecutionStore:
        return await AsyncSqliteStore.open(self.path, create_schema=True)


class TestSqliteExecutionStoreWithASmallRing(_OnAFile, AsyncExecutionStoreConformance):
    async def make_store(self) -> AsyncExecutionStore:
        return await AsyncSqliteStore.open(self.path, create_schema=True, trace_max=3)
