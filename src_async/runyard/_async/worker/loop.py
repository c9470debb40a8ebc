"""AsyncWorker: the claim -> handle -> complete/fail loop, with reaping while idle."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from runyard._async.protocols import AsyncWorkQueue
from runyard._flavours import async_sleep
from runyard.errors import LeaseLostError
from runyard.models import Lease
from runyard.validation import storable_error_text
from runyard.worker.outcomes import PermanentFailure, WorkerReport

__all__ = ["AsyncWorker"]


class AsyncWorker:
    """Claims items from ``queue`` as ``name`` and runs ``handler`` on each.

    A handler that returns completes the item; one that raises fails it (retryable, unless it
    raised PermanentFailure); a lease lost meanwhile is counted, never settled.
    """

    def __init__(
        self,
        queue: AsyncWorkQueue,
        name: str,
        handler: Callable[[Lease], Awaitable[None]],
        *,
        poll_seconds: float = 0.05,
    ) -> None:
        self.queue = queue
        self.name = name
        self.handler = handler
        self.poll_seconds = poll_seconds
        self.report = WorkerReport()

    async def run_once(self) -> bool:
        """Claim and handle one item; return False when nothing was due."""
        lease = await self.queue.claim(self.name)
        if lease is None:
            return False
        try:
            await self.handler(lease)
        except PermanentFailure as exc:
            await self._settle_failure(lease, repr(exc), retryable=False)
        except Exception as exc:
            await self._settle_failure(lease, repr(exc), retryable=True)
        else:
            try:
                await self.queue.complete(lease)
                self.report.completed += 1
            except LeaseLostError:
                self.report.lost += 1
        return True

    async def _settle_failure(self, lease: Lease, error: str, *, retryable: bool) -> None:
        try:
            await self.queue.fail(lease, error=storable_error_text(error), retryable=retryable)
            self.report.failed += 1
        except LeaseLostError:
            self.report.lost += 1

    async def run_until_idle(self, *, idle_polls: int = 2) -> WorkerReport:
        """Work until ``idle_polls`` polls in a row find nothing due (reaping lapsed leases)."""
        idle = 0
        while idle < idle_polls:
            if await self.run_once():
                idle = 0
                continue
            self.report.reaped += len(await self.queue.reap(limit=100))
            idle += 1
            await async_sleep(self.poll_seconds)
        return self.report
