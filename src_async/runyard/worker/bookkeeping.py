"""The worker's bookkeeping of its jobs: which slots run, start, finish, time out or are lost,
and the hooks and counters of each; shared by both twins (no I/O: the loop's and the jobs'
round trips live in the async source and its generated twin)."""

from __future__ import annotations

import heapq
import logging
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

from runyard.clock import Clock
from runyard.errors import LeaseLostError
from runyard.models import Lease, WorkItem
from runyard.worker.outcomes import (
    JobTimeoutError,
    WorkerHooks,
    WorkerStats,
    describe_failure,
    logged_failure,
)
from runyard.worker.settings import WorkerSettings
from runyard.worker.slot import SETTLED, Settled, Slot

__all__ = ["WorkerBookkeeping"]

log = logging.getLogger("runyard.worker")


class WorkerBookkeeping:
    """The job bookkeeping of ``AsyncWorker`` and ``Worker`` (a base: the attributes are set
    by the worker)."""

    name: str
    settings: WorkerSettings
    hooks: WorkerHooks
    _time: Callable[[], float]
    _wall_clock: Clock
    _stats: WorkerStats
    _lease_limits: tuple[float, float] | None  # the policy's lease_seconds, max_lease_seconds
    _heartbeat_every: float
    _next_heartbeat: float | None
    _running: dict[tuple[str, str], Slot]
    _closing: list[Slot]
    _finished: list[Slot]
    _handing_back: list[Slot]
    _handoff: deque[Slot | Lease]
    _first_finished: float
    _stopping: bool
    _hook_exit: BaseException | None  # what a hook raised that stops the worker (run() raises)
    stop: Callable[[], None]  # the worker's
    _due: list[float]
    _guard: Any  # the worker's AsyncGuard or Guard: a context manager
    _jobs: Any  # the worker's AsyncJobRunner or JobRunner: start(run) -> a handle
    _execute: Callable[[Slot], Any]  # the worker's: runs a slot's job, then its successors
    _unheld: Callable[[list[Lease]], list[Lease]]  # WorkerHoldings's
    _claimed: Callable[[list[Lease], int], list[Lease]]  # WorkerHoldings's

    def _give_up(self, slot: Slot) -> bool:
        """Give the job up unless it is sending its complete (that decides); whether it was.
        Under the guard: a job thread checks ``cancelled`` and sets ``settling`` under it."""
        with self._guard:
            if slot.settling:
                return False
            slot.job.cancelled = True
        if slot.handle is not None:
            slot.handle.cancel()
        return True

    def _due_at(self, item: WorkItem) -> None:
        """Claim when ``item`` (retried or reaped) is due: its ``available_at`` is on the
        store's clock, the worker's own wall clock estimates how far off that is."""
        delay = max(0.0, item.available_at - self._wall_clock.now())
        heapq.heappush(self._due, self._time() + delay)

    def _lost(self, slot: Slot, why: BaseException) -> None:
        self._stats.lost += 1
        log.warning(
            "lost the lease on item %s (%s); not settling it",
            slot.lease.item_id,
            why,
            extra=self._extra(slot, "lost"),
        )
        self._hook(self.hooks.on_job_end, slot.job, "lost")

    def _completed(self, slot: Slot, error: BaseException | None) -> None:
        if error is None:
            self._stats.completed += 1
            if self.hooks.on_job_end is not None:
                self._hook(self.hooks.on_job_end, slot.job, "completed")
        else:
            self._lost(slot, error)

    def _replace(self, slot: Slot, old: Lease, new: Lease) -> None:
        """Give ``slot`` the renewed lease ``new`` unless an adopt replaced ``old`` meanwhile
        (the adopted lease is the newer: a renew of ``old`` went through before the adopt)."""
        with self._guard:
            if slot.lease is old:
                slot.lease = new

    def _extra(self, slot: Slot, outcome: str) -> dict[str, object]:
        return {
            "worker": self.name,
            "tenant": slot.lease.tenant,
            "item_id": slot.lease.item_id,
            "attempt": slot.job.attempt,
            "outcome": outcome,
        }

    def _hook(self, hook: Callable[..., None] | None, *args: object) -> None:
        """Call a hook (the user's code, on the loop). An Exception is logged. Any other
        BaseException (SystemExit, KeyboardInterrupt: a Ctrl-C that landed in the hook, in
        the thread twin's main thread) is a request to stop: escaping here, it would leave
        the loop between two steps, with leases held and settles unsent. The worker stops
        as ``stop()`` does (in-flight jobs finish within the grace, then are handed back),
        and ``run()`` raises it once the shutdown is done; a later one is logged."""
        if hook is None:
            return
        try:
            hook(*args)
        except Exception as exc:  # its type, message and traceback's end, bounded
            log.error(
                "worker hook %r failed: %s",
                hook,
                describe_failure(exc),
                extra={"worker": self.name},
            )
        except BaseException as exc:
            if self._hook_exit is not None:
                log.warning(
                    "worker hook %r raised %s while the worker stops: ignored",
                    hook,
                    logged_failure(exc),
                    extra={"worker": self.name},
                )
                return
            self._hook_exit = exc
            log.warning(
                "worker hook %r raised %s: stopping the worker (in-flight jobs finish or "
                "are handed back), then run() raises it",
                hook,
                logged_failure(exc),
                extra={"worker": self.name},
            )
            self.stop()

    def _take_handoff(self) -> list[Slot]:
        """Register the successors jobs handed off and start the leases they claimed (hand
        them back when stopping), in order; the jobs started, for their ``on_job_start``
        once the guard is released. Under the guard."""
        started: list[Slot] = []
        hooks = self.hooks
        quiet = hooks.on_job_start is None and hooks.on_job_end is None
        while self._handoff:
            handed = self._handoff[0]
            if isinstance(handed, Slot):
                if quiet and handed.outcome is SETTLED and handed.key not in self._running:
                    # Ended already, its own complete applied, no hook to call: counted
                    # now, never registered (what _register, _collect_one and _completed
                    # would do for it, in one step: the loop meets most successors so).
                    self._handoff.popleft()
                    self._stats.completed += 1
                    continue
                self._register(handed)  # running already, on its predecessor's task/thread
                started.append(handed)  # one that ended already is collected in this turn
                self._handoff.popleft()  # registered first: always seen as held
                continue
            self._handoff.popleft()  # under the guard: started before anyone looks again
            if self._stopping:
                self._handing_back.append(self._slot(handed))  # claimed as the worker stopped
            else:
                started += self._start_unheld([handed])
        return started

    def _take(self, leases: list[Lease], mark: int | None = None) -> int:
        """Start a job on each lease the worker does not hold yet; how many. ``mark``: the
        claim's (``_claim_sent``), when a claim returned ``leases``; else a job handed them
        off."""
        with self._guard:
            fresh = self._start_unheld(leases, mark)
        self._started(fresh)
        return len(fresh)

    def _start_unheld(self, leases: list[Lease], mark: int | None = None) -> list[Slot]:
        """Start a job on each lease the worker does not hold yet; the slots. Under the
        guard."""
        fresh = self._unheld(leases) if mark is None else self._claimed(leases, mark)
        return [self._start(lease) for lease in fresh]

    def _started(self, slots: list[Slot]) -> None:
        """``on_job_start`` for ``slots``, outside the guard (a hook is the user's code)."""
        hook = self.hooks.on_job_start
        if hook is not None:
            for slot in slots:
                self._hook(hook, slot.job)

    def _slot(self, lease: Lease) -> Slot:
        now, timeout = self._time(), self.settings.job_timeout
        return Slot(lease, now + timeout if timeout is not None else None, self._cap_at(lease, now))

    def _cap_at(self, lease: Lease, now: float) -> float | None:
        """When ``lease`` (just taken, at ``now`` on the worker's timer) reaches the policy's
        ``max_lease_seconds``, or None without a policy. Only store times are compared, so a
        clock off between worker and store moves nothing: the store stamped the reply at
        ``expires_at - lease_seconds`` (``claimed_at`` for a claim; for an adopted lease the
        time of the adopt), unless the lease was already capped, when the estimate runs late
        by at most ``lease_seconds`` and the next heartbeat gives the job up instead."""
        if self._lease_limits is None:
            return None
        lease_seconds, max_lease_seconds = self._lease_limits
        replied = lease.expires_at - lease_seconds
        return now + (lease.claimed_at + max_lease_seconds - replied)

    def _start(self, lease: Lease) -> Slot:
        slot = self._slot(lease)
        self._register(slot)
        slot.handle = self._jobs.start(partial(self._execute, slot))
        return slot

    def _register(self, slot: Slot) -> None:
        old = self._running.get(slot.key)
        if old is not None and old is not slot and old.settling:
            # Its job sent its complete, which decides: counted when it returns. The item
            # was enqueued again and claimed anew, or its lease lapsed and was claimed back.
            self._closing.append(old)
        elif old is not None and old is not slot:
            # Its lease lapsed (this worker cut off, or its loop held up, past the lease) and a
            # claim took the item back with a new token: the new job decides, the old one is
            # given up as lost (its settle would be refused), never left running unseen.
            self._give_up(old)
            self._lost(old, LeaseLostError(old.lease.item_id, "taken"))
        self._running[slot.key] = slot
        if self._next_heartbeat is None:
            self._next_heartbeat = self._time() + self._heartbeat_every
        self._stats.in_flight = len(self._running)

    def _collect(self) -> None:
        """Move finished jobs (and jobs past their timeout) to the settle buffer."""
        now = self._time()
        for slot in list(self._closing):
            if isinstance(slot.outcome, Settled):
                self._closing.remove(slot)
                self._completed(slot, slot.outcome.error)
            elif isinstance(slot.outcome, BaseException):  # its complete raised
                self._closing.remove(slot)
                self._lost(slot, slot.outcome)
        for slot in list(self._running.values()):
            if slot.outcome is None and not slot.settling and _past(slot.cap_at, now):
                self._capped(slot)
            elif slot.outcome is not None or (not slot.settling and _past(slot.deadline, now)):
                self._collect_one(slot, now)
        if self._handoff:  # after the outcomes: a job hands its successor off first
            # One hold of the guard for the whole handoff (a job's adopt replaces a lease in
            # it under the guard): taken per entry, the thread twin's jobs queued on it.
            with self._guard:
                started = self._take_handoff()
            self._started(started)
            # A successor that ended before it was registered (unbatched jobs run on between
            # the loop's turns) is collected now, not on another turn of the loop.
            for slot in started:
                if slot.outcome is not None and self._running.get(slot.key) is slot:
                    self._collect_one(slot, now)
        if not self._running and not self._finished:
            self._next_heartbeat = None

    def _capped(self, slot: Slot) -> None:
        """Give up ``slot``, whose lease reached max_lease_seconds while its job ran: no
        settle is sent for it (the store would refuse it as capped), and the job is
        cancelled (async) or marked cancelled (a thread), so it does not run on beside the
        claim that takes the item back once the lease lapses."""
        if not self._give_up(slot):
            return  # its complete went first: that decides
        del self._running[slot.key]
        self._lost(slot, LeaseLostError(slot.lease.item_id, "capped"))

    def _collect_one(self, slot: Slot, now: float) -> None:
        """Move ``slot`` (running) to the settle buffer: its job finished or (outcome None)
        passed its timeout while not settling, as the callers checked (an outcome, once set,
        stays); count it when its job sent its complete itself."""
        if isinstance(slot.outcome, Settled):  # the job sent its complete itself
            del self._running[slot.key]
            self._completed(slot, slot.outcome.error)
            return
        if slot.outcome is None:
            if not self._give_up(slot):
                return  # its complete went first: that decides
            self._stats.timed_out += 1
            slot.result = JobTimeoutError(
                f"job ran past its {self.settings.job_timeout:g} s timeout"
            )
        else:
            slot.result = slot.outcome
        if isinstance(slot.result, BaseException):
            self._stats.failed += 1
            self._hook(self.hooks.on_failure, slot.job, slot.result)
        if not self._finished:
            self._first_finished = time.monotonic()
        self._finished.append(slot)  # before it leaves the running: always seen as held
        del self._running[slot.key]


def _past(deadline: float | None, now: float) -> bool:
    return deadline is not None and now >= deadline
