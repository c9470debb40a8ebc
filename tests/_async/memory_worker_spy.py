"""The memory queue the worker tests spy on: it reports heartbeat rounds and claims that found
nothing, and can fail or lose claims."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from runyard import AsyncMemoryWorkQueue, ManualClock, QueuePolicy
from runyard._flavours import AsyncEvent
from runyard.errors import QueueUnavailableError, RunyardError, StoreOutcomeUnknown
from runyard.models import Lease

__all__ = ["SAFETY", "SpyQueue", "make_queue"]

SAFETY = 30.0  # seconds an event may take before the test fails; never reached when it passes


class SpyQueue(AsyncMemoryWorkQueue):
    """A memory queue that reports heartbeat rounds and can fail or lose claims (single or
    batched: the worker claims one way or the other)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.beats = AsyncEvent()
        self.claimed_nothing = AsyncEvent()
        self.empty_claims = 0
        self.outages = 0
        self.lose_next_claim_reply = False
        self.adopted = AsyncEvent()  # set by each adopt, once applied

    async def heartbeat_many(self, leases: Collection[Lease]) -> list[Lease | RunyardError]:
        out = await super().heartbeat_many(leases)
        self.beats.set()
        return out

    async def heartbeat(self, *args: Any, **kwargs: Any) -> Lease:
        out = await super().heartbeat(*args, **kwargs)
        self.beats.set()
        return out

    async def adopt(self, worker: str, *, limit: int = 100) -> list[Lease]:
        leases = await super().adopt(worker, limit=limit)
        self.adopted.set()
        return leases

    async def claim(self, worker: str) -> Lease | None:
        self._before_claim()
        lease = await super().claim(worker)
        self._after_claim([lease] if lease else [])
        return lease

    async def claim_many(self, worker: str, *, limit: int) -> list[Lease]:
        self._before_claim()
        leases = await super().claim_many(worker, limit=limit)
        self._after_claim(leases)
        return leases

    def _before_claim(self) -> None:
        if self.outages:
            self.outages -= 1
            raise QueueUnavailableError("the test's outage")

    def _after_claim(self, leases: list[Lease]) -> None:
        if not leases:
            self.empty_claims += 1
            self.claimed_nothing.set()
        if leases and self.lose_next_claim_reply:
            self.lose_next_claim_reply = False
            raise StoreOutcomeUnknown("the test lost this reply")


def make_queue(clock: ManualClock, **policy: Any) -> SpyQueue:
    settings: dict[str, Any] = {"lease_seconds": 30, "backoff_base": 0, "random": lambda: 0.5}
    return SpyQueue(policy=QueuePolicy(**{**settings, **policy}), clock=clock)
