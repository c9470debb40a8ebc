"""Queues that report a claim (single or batched) that found nothing: the worker is idle from
then on. Shared by the worker tests on the real servers."""

from __future__ import annotations

from typing import Any

from runyard._flavours import AsyncEvent
from runyard.models import Lease
from runyard.postgres import AsyncPostgresWorkQueue
from runyard.redis import AsyncRedisWorkQueue

__all__ = ["SpyPostgresQueue", "SpyRedisQueue"]


class SpyRedisQueue(AsyncRedisWorkQueue):
    """Reports a claim (single or batched) that found nothing: the worker is idle from then on."""

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self.claimed_nothing = AsyncEvent()

    async def claim(self, worker: str) -> Lease | None:
        lease = await super().claim(worker)
        if lease is None:
            self.claimed_nothing.set()
        return lease

    async def claim_many(self, worker: str, *, limit: int) -> list[Lease]:
        leases = await super().claim_many(worker, limit=limit)
        if not leases:
            self.claimed_nothing.set()
        return leases


class SpyPostgresQueue(AsyncPostgresWorkQueue):
    """Reports a claim (single or batched) that found nothing: the worker is idle from then on."""

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self.claimed_nothing = AsyncEvent()

    async def claim(self, worker: str) -> Lease | None:
        lease = await super().claim(worker)
        if lease is None:
            self.claimed_nothing.set()
        return lease

    async def claim_many(self, worker: str, *, limit: int) -> list[Lease]:
        leases = await super().claim_many(worker, limit=limit)
        if not leases:
            self.claimed_nothing.set()
        return leases
