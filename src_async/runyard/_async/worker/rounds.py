"""The worker's store rounds (heartbeats, reaps, settles, the shutdown step) and its hooks and
logs: the half of ``AsyncWorker`` that runs on its loop between waits."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from runyard._async.worker.store import AsyncWorkerStore
from runyard.errors import RunyardError
from runyard.models import Lease, WorkItem
from runyard.worker.bookkeeping import WorkerBookkeeping
from runyard.worker.job import DONE
from runyard.worker.outcomes import describe_failure, is_permanent, logged_failure
from runyard.worker.slot import Slot

__all__ = ["AsyncWorkerRounds"]

log = logging.getLogger("runyard.worker")


class AsyncWorkerRounds(WorkerBookkeeping):
    """The store rounds of ``AsyncWorker`` (its base: the attributes are set there)."""

    # The rest of the attributes are declared by WorkerBookkeeping.
    _store: AsyncWorkerStore
    _flushing: list[Slot]
    _grace_deadline: float | None
    _stop_logged: bool
    _settled: Callable[[list[Slot]], None]  # WorkerHoldings's
    _next_reap: float
    _claim_due: bool

    # -- store rounds ----------------------------------------------------------------------
    async def _heartbeat_if_due(self) -> None:
        """Renew every held lease in one round when the schedule says so."""
        now = self._time()
        if self._next_heartbeat is None or now < self._next_heartbeat:
            return
        self._next_heartbeat = now + self._heartbeat_every
        held = [*(s for s in self._running.values() if not s.settling), *self._finished]
        if not held:
            return
        sent = [s.lease for s in held]
        mark = self._store.adopt_mark()
        results = await self._store.heartbeat(sent)
        if not all(isinstance(result, Lease) for result in results):
            await self._store.adopt_overlapped(mark)  # refused by an adopt still in flight?
        for slot, lease, result in zip(held, sent, results, strict=True):
            if isinstance(result, Lease):
                self._replace(slot, lease, result)
                continue
            if slot.lease is not lease:
                continue  # adopted meanwhile (a job's claim lost its reply): that lease decides
            if not self._give_up(slot):
                continue  # its complete, sent meanwhile, took the item: that decides
            if self._running.get(slot.key) is slot:  # not a later claim of the item
                del self._running[slot.key]
            if slot in self._finished:
                self._finished.remove(slot)
            self._lost(slot, result)

    async def _reap_if_due(self) -> None:
        """Every ``reap_seconds``, idle or busy, return lapsed leases (of crashed workers)."""
        now = self._time()
        if self._stopping or now < self._next_reap:
            return
        self._next_reap = now + self.settings.reap_seconds
        reaped = await self._store.reap()
        self._stats.reaped += len(reaped)
        for item in reaped:
            if item.state != "dead":
                self._due_at(item)

    def _flush_due(self) -> bool:
        if not self._finished:
            return False
        if self._stopping or not self._store.batched or not self._running:
            return True
        full = len(self._finished) >= self.settings.concurrency
        return full or time.monotonic() >= self._first_finished + self.settings.flush_seconds

    async def _flush(self) -> None:
        """Settle every finished job: completes in one batch, failures one by one."""
        # Held while they settle: a job's claim that adopts meanwhile renews their leases.
        batch = self._flushing = self._finished
        self._finished = []
        done = [s for s in batch if s.result is DONE]
        if done:
            results = await self._settle_current(done, self._store.complete)
            self._settled(done)
            for slot, error in zip(done, results, strict=True):
                self._completed(slot, error)
        for slot in batch:
            if isinstance(slot.result, BaseException):
                await self._settle_failure(slot, slot.result)
                self._settled([slot])
        self._flushing = []

    async def _settle_failure(self, slot: Slot, exc: BaseException) -> None:
        retryable = not is_permanent(exc)
        while True:
            sent, mark = slot.lease, self._store.adopt_mark()
            result = await self._store.fail(sent, describe_failure(exc), retryable=retryable)
            if not await self._refused_for_adopt(result, mark, slot, sent):
                break  # else adopted while the fail was in flight: send it with that lease
        if not isinstance(result, WorkItem):
            self._lost(slot, result)
        elif result.state == "dead":
            self._stats.dead += 1
            log.error(
                "dead-lettered item %s after attempt %d: %s",
                slot.lease.item_id,
                slot.job.attempt,
                logged_failure(exc),
                extra=self._extra(slot, "dead"),
            )
            self._hook(self.hooks.on_dead, slot.job, exc)
            self._hook(self.hooks.on_job_end, slot.job, "dead")
        else:
            self._stats.retried += 1
            self._due_at(result)  # due again once its backoff passes
            log.warning(
                "item %s failed on attempt %d, will retry: %s",
                slot.lease.item_id,
                slot.job.attempt,
                logged_failure(exc),
                extra=self._extra(slot, "retried"),
            )
            self._hook(self.hooks.on_job_end, slot.job, "retried")

    async def _shutting_down(self) -> bool:
        """One shutdown step; True once the worker may exit. Past the stop's
        ``handback_seconds`` (after this step's settles and hand-backs, which a store error
        no longer holds up), what is still in flight is given up, as ``abort()`` does."""
        now = self._time()
        if not self._stop_logged:
            self._stop_logged = True
            log.info("stopping: no more claims", extra={"worker": self.name})
        await self._heartbeat_if_due()
        if self._finished:
            await self._flush()
        if self._handing_back:  # claimed by jobs as the worker stopped: never started
            await self._hand_back(self._handing_back, started=False)
        if self._grace_deadline is not None and now >= self._grace_deadline:
            held = [s for s in list(self._running.values()) if self._give_up(s)]
            if held:
                await self._hand_back(held, started=True)
        if not self._running and not self._closing:
            return True
        if self._store.give_up_in() <= 0:  # jobs sending their complete are waited for: so long
            self._store.give_up("jobs sending their settles")
            return True
        return False

    async def _hand_back(self, slots: list[Slot], *, started: bool) -> None:
        """Release the slots' items; they stay held (running, or in ``_handing_back``) until
        the release returns: an adopt meanwhile gives them their new leases."""
        results = await self._settle_current(slots, self._store.release)
        self._settled(slots)
        for slot, error in zip(slots, results, strict=True):
            if self._running.get(slot.key) is slot:  # not a job of the item's that still runs
                del self._running[slot.key]
            if error is None:
                self._stats.handed_back += 1
                if started:
                    self._hook(self.hooks.on_job_end, slot.job, "handed_back")
            elif started:
                self._lost(slot, error)
        if not started:
            self._handing_back = []

    async def _settle_current(
        self,
        slots: list[Slot],
        send: Callable[[Sequence[Lease]], Awaitable[list[RunyardError | None]]],
    ) -> list[RunyardError | None]:
        """Send each slot's lease; send again for a slot whose lease was refused after an
        ``adopt`` (a job's claim lost its reply) gave it a new one while the send was in
        flight. None, or why the lease was lost, per slot."""
        results: list[RunyardError | None] = [None] * len(slots)
        pending = list(range(len(slots)))
        while pending:
            sent, mark = [slots[i].lease for i in pending], self._store.adopt_mark()
            again = []
            for i, lease, result in zip(pending, sent, await send(sent), strict=True):
                results[i] = result
                if result is not None and await self._refused_for_adopt(
                    result, mark, slots[i], lease
                ):
                    again.append(i)
            pending = again
        return results

    async def _refused_for_adopt(self, result: object, mark: int, slot: Slot, sent: Lease) -> bool:
        """Whether a send of ``sent`` (``mark`` taken before it) was refused because an
        ``adopt`` replaced the slot's lease: one in flight meanwhile is waited for first (the
        job whose claim adopted may not have applied the new leases yet)."""
        if not isinstance(result, RunyardError):
            return False
        if slot.lease is sent:
            await self._store.adopt_overlapped(mark)
        return slot.lease is not sent

    # -- hooks and logs --------------------------------------------------------------------
