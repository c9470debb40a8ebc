"""The worker's jobs: the half of ``AsyncWorker`` that runs beside its loop, a task per job
(a thread in the sync twin), and, unbatched, sends the job's own complete and claims its
successor."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from runyard._async.worker.rounds import AsyncWorkerRounds
from runyard._async.worker.store import WorkerAborted
from runyard._flavours import AsyncEvent
from runyard._flavours_worker import async_run_handler
from runyard.models import Lease
from runyard.worker.job import DONE, Job
from runyard.worker.slot import SETTLED, Settled, Slot

__all__ = ["AsyncWorkerJobs"]

log = logging.getLogger("runyard.worker")


class AsyncWorkerJobs(AsyncWorkerRounds):
    """The jobs of ``AsyncWorker`` (its base: the attributes are set there)."""

    handler: Callable[[Job], Awaitable[None]]
    _settle_in_job: bool
    _nudge: AsyncEvent
    _nudged_at: float
    _renew_held: Callable[[list[Lease]], int]  # WorkerHoldings's
    _nudge_due: Callable[[], bool]  # WorkerTiming's

    async def _execute(self, first: Slot) -> None:
        """Run jobs one after another: the first, then (unbatched) each successor the job
        claimed itself, in the same task or thread."""
        slot: Slot | None = first
        while slot is not None:
            slot = await self._run(slot)

    async def _run(self, slot: Slot) -> Slot | None:
        """Run the handler; record its outcome for the loop; return the successor, if any.

        Any BaseException the handler raises (SystemExit, KeyboardInterrupt, a cancellation
        of its own) fails the job like an Exception: re-raised, it would end the thread, or
        the event loop, and keep the job's slot forever. Only the worker's own cancellation
        (the job given up) ends the job without an outcome."""
        successor = None
        try:
            await async_run_handler(self.handler, slot.job)
        except BaseException as exc:
            if slot.job.cancelled:
                return None  # given up (timeout, lost lease, shutdown): the loop settled it
            slot.outcome = exc
        else:
            if self._settle_in_job:
                with self._guard:  # the loop gives a job up under it, unless it is settling
                    if slot.job.cancelled:
                        return None  # given up (timeout, lost lease, shutdown) as it returned
                    slot.settling = True  # from here on the loop neither heartbeats nor gives it up
                try:
                    settled, successor = await self._complete(slot)
                except WorkerAborted:
                    return None
                except Exception as exc:  # its complete raised what the store does not wait out
                    log.exception(
                        "a job's complete failed; failing item %s for a retry",
                        slot.lease.item_id,
                        extra={"worker": self.name},
                    )
                    slot.outcome = exc  # failed (retryable), as a handler's exception is
                    self._nudge.set()
                    return None
                slot.outcome = settled
            else:
                slot.outcome = DONE
        if successor is None or self._nudge_due():
            self._nudge.set()
        return successor

    async def _complete(self, slot: Slot) -> tuple[Settled, Slot | None]:
        """Unbatched, a job sends its own complete and claims its successor, beside the other
        jobs' round trips (the loop would send them one at a time), and runs it next; the
        loop registers it. Batched, the loop's one round trip serves every job."""
        store = self._store
        while True:  # _settle_current for one slot, in fewer calls (once per job)
            sent, mark = slot.lease, store.adopts_ended
            error = await store.complete_one(sent)
            if error is None or not await self._refused_for_adopt(error, mark, slot, sent):
                break
        slot.settled = True  # _settled
        settled = SETTLED if error is None else Settled(error)
        if self._stopping:
            return settled, None
        mark = store.adopts_ended  # _claim_sent
        try:
            leases = await store.claim(1, self._renew_held)
        except WorkerAborted:
            raise
        except Exception:  # not one the store waits out (a configuration error, a bug)
            log.exception("a job's claim of its successor failed", extra={"worker": self.name})
            return settled, None
        successor = None
        with self._guard:
            if store.adopts_begun != mark:  # else _claimed would keep them all
                leases = self._claimed(leases, mark)
            if len(leases) == 1 and not self._stopping:
                successor = self._slot(leases[0])
                successor.handle = slot.handle
            self._handoff.extend(leases if successor is None else [successor])
        return settled, successor  # handed off before the outcome is set
