"""The conformance kit against the memory backend."""

from __future__ import annotations

from runyard import AsyncMemoryStateStore, AsyncMemoryWorkQueue, ManualClock, QueuePolicy
from runyard._async.protocols import AsyncStateStore, AsyncWorkQueue
from runyard._async.testing import AsyncStateStoreConformance, AsyncWorkQueueConformance


class TestMemoryStateStore(AsyncStateStoreConformance):
    async def make_store(self) -> AsyncStateStore:
        self.clock = ManualClock()
        return AsyncMemoryStateStore(clock=self.clock)

    async def make_live_store(self) -> AsyncStateStore:
        return AsyncMemoryStateStore(clock=self.clock, live_updates=True)

    async def make_real_time_store(self) -> AsyncStateStore:
        return AsyncMemoryStateStore()

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)


class TestMemoryWorkQueue(AsyncWorkQueueConformance):
    async def make_queue(self, policy: QueuePolicy) -> AsyncWorkQueue:
        self.clock = ManualClock()
        return AsyncMemoryWorkQueue(policy=policy, clock=self.clock)

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
