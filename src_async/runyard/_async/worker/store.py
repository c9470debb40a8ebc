"""AsyncWorkerStore: the worker's calls to its queue, batched when declared, store errors
waited out with jittered backoff."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from functools import partial
from typing import TypeVar, cast

from runyard._async.protocols import AsyncBatchedWorkQueue, AsyncWorkQueue
from runyard._flavours import AsyncEvent, AsyncLock
from runyard._flavours_worker import AsyncCondition, AsyncGuard
from runyard.errors import (
    LeaseLostError,
    RunyardError,
    StoreOutcomeUnknown,
    WorkItemNotFoundError,
)
from runyard.models import Lease, WorkItem
from runyard.worker.deadline import StopDeadline
from runyard.worker.outcomes import WorkerStats
from runyard.worker.settings import WorkerSettings

__all__ = ["AsyncWorkerStore", "WorkerAborted"]

T = TypeVar("T")
ADOPT_LIMIT = 10_000  # the largest page a queue's adopt takes (runyard.validation.check_limit)
_SETTLE_ERRORS = (LeaseLostError, WorkItemNotFoundError)


class WorkerAborted(Exception):
    """The worker was aborted while it waited out a store error."""


class AsyncWorkerStore(StopDeadline):
    """Claims, heartbeats, settles and hands back for one worker.

    A store error that may pass (``retryable``: unavailable, pool exhausted; or a connection
    error) is logged and retried after a jittered backoff until it passes or the worker is
    aborted. A claim whose outcome is unknown is never sent again: the leases the worker
    may now hold are recovered through ``adopt``. Other calls are fenced or idempotent, so
    they are sent again; an item that is then gone was settled by the first send.
    """

    def __init__(
        self,
        queue: AsyncWorkQueue,
        worker: str,
        settings: WorkerSettings,
        stats: WorkerStats,
        aborted: AsyncEvent,
        log: logging.Logger,
    ) -> None:
        StopDeadline.__init__(self, worker, log, aborted.set)
        self.queue = queue
        self.settings = settings
        self.stats = stats
        self._aborted = aborted
        caps = getattr(queue, "capabilities", None)
        declared = bool(getattr(caps, "batched_operations", False))
        self.batched = settings.batched and declared
        # A hand-back goes through release_many wherever the queue has it, batched or not:
        # fail() would count the attempt (and dead-letter an item at its last one).
        self.releases = declared
        self._batch = cast(AsyncBatchedWorkQueue, queue)
        # Adopts begun and ended (a claim's reply was lost): a send refused while one was in
        # flight waits for it to end, then sees whether its slot's lease was replaced.
        self.adopts_begun = 0
        self.adopts_ended = 0
        self._adopt_ended = AsyncCondition()
        self._guard = AsyncGuard()
        self._adopting = AsyncLock()
        # How many leases the worker holds at most (the worker sets it): an adopt asks for
        # all of them, and the lost claim's.
        self.holding: Callable[[], int] = lambda: 0

    async def _wait(
        self, what: str, event_wait: Callable[[float], Awaitable[object]], seconds: float
    ) -> None:
        """Wait ``seconds`` (through ``event_wait``, which may end early); raise WorkerAborted
        if the worker is aborted, or once a stop's deadline passes (aborting it)."""
        left = self.give_up_in()
        if left <= 0:
            self.give_up(what)
            raise WorkerAborted(what)
        await event_wait(min(seconds, left))
        if self._aborted.is_set():
            raise WorkerAborted(what)

    async def _call(
        self,
        what: str,
        call: Callable[[], Awaitable[T]],
        *,
        resend_unknown: bool = True,
        unknown: list[bool] | None = None,
        failed: Exception | None = None,
    ) -> tuple[T, bool]:
        """Run ``call`` until it succeeds; return its result and whether an earlier send's
        outcome was unknown (so it may have been applied; also noted in ``unknown``).
        ``failed``: what the caller's own first send of ``call`` raised (the unbatched job
        path sends once itself, a call fewer per job); treated as this loop's first failure."""
        failures = 0
        uncertain = False
        while True:
            reason: Exception
            if failed is None:
                try:
                    return await call(), uncertain
                except Exception as exc:
                    reason = exc
            else:
                reason, failed = failed, None
            if isinstance(reason, StoreOutcomeUnknown):
                if not resend_unknown:
                    raise reason
                uncertain = True
                if unknown is not None:
                    unknown.append(True)
            elif isinstance(reason, RunyardError):
                if not reason.retryable:
                    raise reason
            elif not isinstance(reason, OSError):
                raise reason
            failures += 1
            self.stats.store_errors += 1
            delay = self.settings.store_backoff(failures)
            self._log.warning(
                "store error during %s (%s); retrying in %.2f s",
                what,
                reason,
                delay,
                extra={"worker": self.worker, "operation": what, "failures": failures},
            )
            await self._wait(what, self._aborted.wait, delay)

    async def claim(self, free: int, renew: Callable[[list[Lease]], int]) -> list[Lease]:
        """Claim up to ``free`` items; the new leases. After a lost claim reply, ``adopt``
        finds every live lease of the worker, each with a new token: ``renew`` gives the
        slots the worker holds theirs at once (before any other round trip, so a settle or
        heartbeat sent meanwhile is refused only while the adopt is in flight, see
        ``adopt_overlapped``), hands the rest to the worker to start, and says how many: they
        count against ``free``, and are not returned."""
        leases: list[Lease] = []
        try:
            if free == 1:  # a job's successor, or one free slot: the single claim, a call fewer
                self.stats.claim_round_trips += 1
                failed: Exception | None = None
                try:
                    lease = await self.queue.claim(self.worker)
                except Exception as exc:
                    failed = exc
                if failed is not None:  # retried outside the except: no chained context
                    lease, _ = await self._call(
                        "claim",
                        partial(self.queue.claim, self.worker),
                        resend_unknown=False,
                        failed=failed,
                    )
                return [] if lease is None else [lease]
            if self.batched:
                self.stats.claim_round_trips += 1
                batch, _ = await self._call(
                    "claim",
                    lambda: self._batch.claim_many(self.worker, limit=free),
                    resend_unknown=False,
                )
                return list(batch)
            while len(leases) < free:
                self.stats.claim_round_trips += 1
                lease, _ = await self._call(
                    "claim", lambda: self.queue.claim(self.worker), resend_unknown=False
                )
                if lease is None:
                    break
                leases.append(lease)
        except StoreOutcomeUnknown:
            self._log.warning(
                "a claim's reply was lost; recovering this worker's leases through adopt",
                extra={"worker": self.worker},
            )
            # What the lost claim took is adopted (and what this call claimed before it: those
            # leases are the worker's too, re-tokened); a new claim (not a resend) fills the rest.
            handed = await self._adopt(free, renew)
            return await self.claim(free - handed, renew) if handed < free else []
        return leases

    async def _adopt(self, free: int, renew: Callable[[list[Lease]], int]) -> int:
        with self._guard:
            self.adopts_begun += 1
        try:
            # One adopt at a time, each applied before the next is sent: the later adopt's
            # tokens are the current ones, and an earlier one must not overwrite them.
            async with self._adopting:
                # Every live lease of the worker: those it holds and the lost claim's (an
                # adopt returns the oldest first, so a page too short would leave the lost
                # claim's items leased and never run).
                limit = min(ADOPT_LIMIT, max(100, 2 * (free + self.holding())))
                adopted, _ = await self._call(
                    "adopt", lambda: self.queue.adopt(self.worker, limit=limit)
                )
                return renew(list(adopted))
        finally:
            with self._guard:
                self.adopts_ended += 1
            self._adopt_ended.notify()

    def adopt_mark(self) -> int:
        """Taken before a send: with ``adopt_overlapped``, whether an adopt overlapped it
        (``adopts_ended``, which the job path reads directly)."""
        return self.adopts_ended

    def adopted_since(self, mark: int) -> bool:
        """Whether an adopt was in flight at some time since ``mark`` was taken."""
        return self.adopts_begun != mark

    async def adopt_overlapped(self, mark: int) -> bool:
        """Whether an adopt was in flight at some time since ``mark`` was taken (so it may
        have replaced the lease a refused send carried); if so, wait until no adopt is in
        flight: the held slots then carry the adopted leases."""
        if not self.adopted_since(mark):
            return False
        while True:
            seen = self._adopt_ended.generation
            if self.adopts_begun == self.adopts_ended:
                return True
            await self._wait("adopt", partial(self._adopt_ended.wait_past, seen), 1.0)

    async def heartbeat(self, leases: Collection[Lease]) -> list[Lease | RunyardError]:
        """Renew every lease: the renewed Lease, or why it is lost."""
        if self.batched:
            self.stats.heartbeat_round_trips += 1
            renewed, _ = await self._call(
                "heartbeat",
                lambda: self._batch.heartbeat_many(leases),
            )
            return list(renewed)
        out: list[Lease | RunyardError] = []
        for lease in leases:
            self.stats.heartbeat_round_trips += 1
            try:
                one, _ = await self._call("heartbeat", partial(self.queue.heartbeat, lease))
                out.append(one)
            except _SETTLE_ERRORS as exc:
                out.append(exc)
        return out

    async def complete_one(self, lease: Lease) -> RunyardError | None:
        """``complete([lease])``'s one outcome, unbatched (a job's own complete): sent here
        first, so only a failed send goes through ``_call``."""
        self.stats.settle_round_trips += 1
        try:
            await self.queue.complete(lease)
            return None
        except _SETTLE_ERRORS as exc:
            return exc
        except Exception as exc:
            failed: Exception = exc
        unknown: list[bool] = []
        try:
            await self._call(
                "complete", partial(self.queue.complete, lease), unknown=unknown, failed=failed
            )
        except _SETTLE_ERRORS as exc:
            return _applied(exc, bool(unknown))
        return None

    async def complete(self, leases: Collection[Lease]) -> list[RunyardError | None]:
        """Complete every item: None, or why its lease was lost."""
        if self.batched:
            self.stats.settle_round_trips += 1
            results, uncertain = await self._call(
                "complete",
                lambda: self._batch.complete_many(leases),
            )
            return [_applied(r, uncertain) for r in results]
        return [await self.complete_one(lease) for lease in leases]  # unbatched: jobs send theirs

    async def fail(self, lease: Lease, error: str, *, retryable: bool) -> WorkItem | RunyardError:
        """Fail the item (retried or dead per the policy): the item, or why its lease was lost."""
        self.stats.settle_round_trips += 1
        try:
            item, _ = await self._call(
                "fail", partial(self.queue.fail, lease, error=error, retryable=retryable)
            )
        except _SETTLE_ERRORS as exc:
            return exc
        return item

    async def release(self, leases: Collection[Lease]) -> list[RunyardError | None]:
        """Hand every item back to ready. Where the queue declares ``batched_operations``
        (whether or not the worker batches) the attempt is not counted; elsewhere the item is
        failed (retryable) and the attempt counts."""
        if self.releases:
            self.stats.settle_round_trips += 1
            results, uncertain = await self._call(
                "release",
                lambda: self._batch.release_many(leases),
            )
            return [_applied(r, uncertain) for r in results]
        out: list[RunyardError | None] = []
        for lease in leases:
            result = await self.fail(lease, "handed back: the worker shut down", retryable=True)
            out.append(result if isinstance(result, RunyardError) else None)
        return out

    async def reap(self) -> list[WorkItem]:
        """Return lapsed leases (of crashed workers) to ready (or the dead letter); the items."""
        reaped, _ = await self._call("reap", lambda: self.queue.reap(limit=100))
        return list(reaped)


def _applied(result: RunyardError | None, uncertain: bool) -> RunyardError | None:
    """None when ``result`` says the item is gone after a send whose outcome was unknown
    (that send settled it)."""
    if uncertain and isinstance(result, WorkItemNotFoundError):
        return None
    return result
