"""Queues that report a claim (single or batched) that found nothing: the worker is idle from
then on. Shared by the worker tests on the real servers."""

from __future__ import annotations

from typing import Any, cast

from runyard._async.postgres.wakeup import AsyncPostgresWakeup
from runyard._async.protocols import AsyncBatchedWorkQueue
from runyard._async.redis.wakeup import AsyncRedisWakeup
from runyard._flavours import AsyncEvent
from runyard.models import Lease
from runyard.postgres import AsyncPostgresWorkQueue
from runyard.redis import AsyncRedisWorkQueue

__all__ = ["SpyPostgresQueue", "SpyPostgresWakeup", "SpyRedisQueue", "SpyRedisWakeup"]


class _ReportsClaimingNothing:
    """Mixed in before a queue class: sets ``claimed_nothing`` when a claim finds nothing."""

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self.claimed_nothing = AsyncEvent()

    async def claim(self, worker: str) -> Lease | None:
        lease = await cast(AsyncBatchedWorkQueue, super()).claim(worker)
        if lease is None:
            self.claimed_nothing.set()
        return lease

    async def claim_many(self, worker: str, *, limit: int) -> list[Lease]:
        leases = await cast(AsyncBatchedWorkQueue, super()).claim_many(worker, limit=limit)
        if not leases:
            self.claimed_nothing.set()
        return leases


class SpyRedisQueue(_ReportsClaimingNothing, AsyncRedisWorkQueue):
    """A Redis queue that reports a claim that found nothing."""


class SpyPostgresQueue(_ReportsClaimingNothing, AsyncPostgresWorkQueue):
    """A PostgreSQL queue that reports a claim that found nothing."""


class SpyRedisWakeup(AsyncRedisWakeup):
    """A Redis wake-up that reports when it blocks (``waiting``) and when a block popped a
    hint (``hinted``)."""

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self.waiting = AsyncEvent()
        self.hinted = AsyncEvent()

    async def wait(self, timeout: float) -> bool:
        self.waiting.set()
        woke = await super().wait(timeout)
        if woke:
            self.hinted.set()
        return woke


class SpyPostgresWakeup(AsyncPostgresWakeup):
    """A PostgreSQL wake-up that reports when it waits (``waiting``), counts the notifications
    its waits returned (``hints``) and sets ``counted`` once ``expect(n)`` more have come."""

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self.hints = 0
        self.counted = AsyncEvent()
        self.waiting = AsyncEvent()
        self._goal: int | None = None

    def expect(self, more: int) -> None:
        """Set ``counted`` once ``more`` hints past those counted so far have come."""
        self.counted.clear()
        self._goal = self.hints + more
        if self.hints >= self._goal:
            self.counted.set()

    async def wait(self, timeout: float) -> bool:
        self.waiting.set()
        woke = await super().wait(timeout)
        if woke:
            self.hints += 1
            if self._goal is not None and self.hints >= self._goal:
                self.counted.set()
        return woke
