"""AsyncWorker: claims in batches up to its free slots, runs handlers concurrently, renews
every held lease in one round trip, settles in batches and shuts down gracefully.

One loop does all the store I/O; jobs run beside it (tasks here, threads in the sync twin)
and only record their outcome and nudge the loop. A settle waits at most ``flush_seconds``
to share a round trip: a crash before the flush means the item is delivered again once its
lease lapses (at least once), never lost.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import fields, replace
from functools import partial

from runyard._async.protocols import AsyncWorkQueue
from runyard._async.worker.store import AsyncWorkerStore, WorkerAborted
from runyard._async.worker.wakeup import AsyncWakeup, wakeup_for
from runyard._flavours import AsyncEvent
from runyard._flavours_worker import AsyncJobHandle, AsyncJobRunner
from runyard.clock import Clock, SystemClock
from runyard.errors import ConfigurationError
from runyard.keys import validate_identifier
from runyard.models import Lease, WorkItem
from runyard.policy import QueuePolicy
from runyard.worker.job import DONE, Done, Job, default_worker_name
from runyard.worker.outcomes import (
    JobTimeoutError,
    PermanentFailure,
    WorkerHooks,
    WorkerStats,
    describe_failure,
)
from runyard.worker.settings import WorkerSettings

__all__ = ["AsyncWorker"]

log = logging.getLogger("runyard.worker")


class _Slot:
    """One job the worker holds: running, or finished and waiting for its settle."""

    __slots__ = ("deadline", "handle", "job", "lease", "outcome", "result")

    def __init__(self, lease: Lease, deadline: float | None) -> None:
        self.lease = lease
        self.job = Job(lease)
        self.deadline = deadline
        self.handle: AsyncJobHandle | None = None
        self.outcome: Done | BaseException | None = None  # written by the job
        self.result: Done | BaseException | None = None  # decided by the loop


class AsyncWorker:
    """Runs ``handler(job)`` on the items of ``queue``.

    A handler that returns completes the item; ``PermanentFailure`` dead-letters it at once;
    any other exception (and a job past ``job_timeout``) fails it for a retry per the queue's
    policy, storing the exception's type, message and the end of its traceback. Settings are
    ``WorkerSettings`` fields, given as ``settings=`` or as keywords. Raises
    ConfigurationError for a bad setting.
    """

    def __init__(
        self,
        queue: AsyncWorkQueue,
        handler: Callable[[Job], Awaitable[None]],
        *,
        name: str | None = None,
        settings: WorkerSettings | None = None,
        wakeup: AsyncWakeup | None = None,
        hooks: WorkerHooks | None = None,
        clock: Clock | None = None,
        **options: object,
    ) -> None:
        base = settings or WorkerSettings()
        try:
            self.settings = replace(base, **options) if options else base  # type: ignore[arg-type]
        except TypeError:
            known = ", ".join(f.name for f in fields(WorkerSettings))
            raise ConfigurationError(
                f"unknown worker setting(s) {', '.join(sorted(options))}: known are {known}"
            ) from None
        self.queue = queue
        self.handler = handler
        self.name = validate_identifier(default_worker_name() if name is None else name, "worker")
        self.hooks = hooks or WorkerHooks()
        self._clock = clock or SystemClock()
        policy = getattr(queue, "policy", None)
        lease_seconds = policy.lease_seconds if isinstance(policy, QueuePolicy) else None
        self._heartbeat_every = self.settings.heartbeat_every(lease_seconds)
        self._stats = WorkerStats()
        self._nudge = AsyncEvent()
        self._aborted = AsyncEvent()
        self._store = AsyncWorkerStore(
            queue, self.name, self.settings, self._stats, self._aborted, log
        )
        self._wakeup = wakeup if wakeup is not None else wakeup_for(queue)
        self._jobs = AsyncJobRunner()
        self._listener = AsyncJobRunner()
        self._running: dict[tuple[str, str], _Slot] = {}
        self._finished: list[_Slot] = []
        self._first_finished = 0.0
        self._stopping = False
        self._serving = False
        self._grace_deadline: float | None = None
        self._next_heartbeat: float | None = None
        self._next_reap = 0.0

    # -- control ---------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop claiming; in-flight jobs get ``shutdown_grace`` seconds, then are handed back."""
        self._stopping = True
        self._nudge.set()

    def abort(self) -> None:
        """Exit at once: nothing more is settled; held leases lapse and are recovered."""
        self._aborted.set()
        self._nudge.set()

    def wake(self) -> None:
        """Make the loop look at its work now (as a wake-up hint does)."""
        self._nudge.set()

    def stats(self) -> WorkerStats:
        """A copy of the worker's counters."""
        return replace(self._stats, in_flight=len(self._running))

    async def run(self) -> WorkerStats:
        """Work until ``stop()`` (a signal, in the CLI), then shut down gracefully."""
        return await self._serve(until_idle=False)

    async def run_until_idle(self) -> WorkerStats:
        """Work until nothing is due, in flight or waiting to settle (tests, batch jobs)."""
        return await self._serve(until_idle=True)

    # -- the loop --------------------------------------------------------------------------
    async def _serve(self, *, until_idle: bool) -> WorkerStats:
        self._serving = True
        if self._wakeup is not None:
            self._listener.start(self._listen)
        try:
            while not self._aborted.is_set():
                self._nudge.clear()
                self._collect()
                if self._stopping and await self._shutting_down():
                    break
                claimed = 0 if self._stopping else await self._fill()
                await self._heartbeat_if_due()
                flushed = self._flush_due()
                if flushed:
                    await self._flush()
                idle = not (claimed or flushed or self._running or self._finished)
                if until_idle and idle:
                    reaped = await self._store.reap()
                    self._stats.reaped += reaped
                    if reaped:
                        continue
                    break
                await self._reap_if_due()
                if flushed or (claimed and len(self._running) < self.settings.concurrency):
                    continue  # a settle may have made work due; a full claim may leave more
                await self._nudge.wait(self._wait_seconds())
        except WorkerAborted:
            pass
        finally:
            self._serving = False
            await self._jobs.aclose()
            await self._listener.aclose()
            if self._wakeup is not None:
                await self._wakeup.aclose()
        return self.stats()

    async def _listen(self) -> None:
        """Turn wake-up hints into nudges while the worker serves (a job of its own)."""
        assert self._wakeup is not None
        failures = 0
        while self._serving:
            try:
                woke = await self._wakeup.wait(min(self.settings.backstop_seconds, 5.0))
            except Exception as exc:  # a lost listener: the backstop polls meanwhile
                failures += 1
                log.debug("wake-up listener failed (%s)", exc, extra={"worker": self.name})
                await self._aborted.wait(self.settings.store_backoff(failures))
                continue
            failures = 0
            if woke:
                self._nudge.set()

    def _wait_seconds(self) -> float:
        """How long the loop may sleep before something falls due (unless nudged)."""
        mono, now = time.monotonic(), self._clock.now()
        waits = []
        if self._finished:
            waits.append(self._first_finished + self.settings.flush_seconds - mono)
        if self._next_heartbeat is not None:
            waits.append(self._next_heartbeat - now)
        waits.extend(s.deadline - now for s in self._running.values() if s.deadline is not None)
        if self._stopping:
            if self._grace_deadline is not None:
                waits.append(self._grace_deadline - now)
        else:
            waits.append(self._next_reap - now)  # busy or idle: a dead worker's items return
            if len(self._running) < self.settings.concurrency:
                waits.append(self.settings.backstop_seconds)
        return max(0.0, min(waits, default=self.settings.backstop_seconds))

    # -- jobs ------------------------------------------------------------------------------
    async def _fill(self) -> int:
        """Claim up to the free slots and start a job on each new lease."""
        free = self.settings.concurrency - len(self._running)
        if free <= 0:
            return 0
        started = 0
        settling = {(s.lease.tenant, s.lease.item_id) for s in self._finished}
        for lease in await self._store.claim(free):
            key = (lease.tenant, lease.item_id)
            if key in self._running or key in settling:
                continue  # adopted after a lost claim reply: already held
            self._start(lease)
            started += 1
        return started

    def _start(self, lease: Lease) -> None:
        now = self._clock.now()
        timeout = self.settings.job_timeout
        slot = _Slot(lease, now + timeout if timeout is not None else None)
        self._running[(lease.tenant, lease.item_id)] = slot
        if self._next_heartbeat is None:
            self._next_heartbeat = now + self._heartbeat_every
        self._stats.in_flight = len(self._running)
        self._hook(self.hooks.on_job_start, slot.job)
        slot.handle = self._jobs.start(partial(self._execute, slot))

    async def _execute(self, slot: _Slot) -> None:
        """Run the handler; record its outcome for the loop (which alone talks to the store).

        Any BaseException the handler raises (SystemExit, KeyboardInterrupt, a cancellation
        of its own) fails the job like an Exception: re-raised, it would end the thread, or
        the event loop, and keep the job's slot forever. Only the worker's own cancellation
        (the job given up) ends the job without an outcome."""
        try:
            await self.handler(slot.job)
        except BaseException as exc:
            if slot.job.cancelled:
                return  # given up (timeout, lost lease, shutdown): the loop settled it
            slot.outcome = exc
        else:
            slot.outcome = DONE
        self._nudge.set()

    def _collect(self) -> None:
        """Move finished jobs (and jobs past their timeout) to the settle buffer."""
        now = self._clock.now()
        for key, slot in list(self._running.items()):
            if slot.outcome is None and (slot.deadline is None or now < slot.deadline):
                continue
            del self._running[key]
            if slot.outcome is None:
                self._give_up(slot)
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
            self._finished.append(slot)
        if not self._running and not self._finished:
            self._next_heartbeat = None

    def _give_up(self, slot: _Slot) -> None:
        slot.job.cancelled = True
        if slot.handle is not None:
            slot.handle.cancel()

    # -- store rounds ----------------------------------------------------------------------
    async def _heartbeat_if_due(self) -> None:
        """Renew every held lease in one round when the schedule says so."""
        now = self._clock.now()
        if self._next_heartbeat is None or now < self._next_heartbeat:
            return
        self._next_heartbeat = now + self._heartbeat_every
        held = [*self._running.values(), *self._finished]
        results = await self._store.heartbeat([s.lease for s in held])
        for slot, result in zip(held, results, strict=True):
            if isinstance(result, Lease):
                slot.lease = result
                continue
            self._give_up(slot)
            self._running.pop((slot.lease.tenant, slot.lease.item_id), None)
            if slot in self._finished:
                self._finished.remove(slot)
            self._lost(slot, result)

    async def _reap_if_due(self) -> None:
        """Every ``reap_seconds``, idle or busy, return lapsed leases (of crashed workers)."""
        now = self._clock.now()
        if self._stopping or now < self._next_reap:
            return
        self._next_reap = now + self.settings.reap_seconds
        self._stats.reaped += await self._store.reap()

    def _lost(self, slot: _Slot, why: BaseException) -> None:
        self._stats.lost += 1
        log.warning(
            "lost the lease on item %s (%s); not settling it",
            slot.lease.item_id,
            why,
            extra=self._extra(slot, "lost"),
        )
        self._hook(self.hooks.on_job_end, slot.job, "lost")

    def _flush_due(self) -> bool:
        if not self._finished:
            return False
        if self._stopping or not self._store.batched or not self._running:
            return True
        full = len(self._finished) >= self.settings.concurrency
        return full or time.monotonic() >= self._first_finished + self.settings.flush_seconds

    async def _flush(self) -> None:
        """Settle every finished job: completes in one batch, failures one by one."""
        batch, self._finished = self._finished, []
        done = [s for s in batch if s.result is DONE]
        for slot, error in zip(
            done, await self._store.complete([s.lease for s in done]), strict=True
        ):
            if error is None:
                self._stats.completed += 1
                self._hook(self.hooks.on_job_end, slot.job, "completed")
            else:
                self._lost(slot, error)
        for slot in batch:
            if isinstance(slot.result, BaseException):
                await self._settle_failure(slot, slot.result)

    async def _settle_failure(self, slot: _Slot, exc: BaseException) -> None:
        retryable = not isinstance(exc, PermanentFailure)
        result = await self._store.fail(slot.lease, describe_failure(exc), retryable=retryable)
        if not isinstance(result, WorkItem):
            self._lost(slot, result)
        elif result.state == "dead":
            self._stats.dead += 1
            log.error(
                "dead-lettered item %s after attempt %d: %r",
                slot.lease.item_id,
                slot.job.attempt,
                exc,
                extra=self._extra(slot, "dead"),
            )
            self._hook(self.hooks.on_dead, slot.job, exc)
            self._hook(self.hooks.on_job_end, slot.job, "dead")
        else:
            self._stats.retried += 1
            log.warning(
                "item %s failed on attempt %d, will retry: %r",
                slot.lease.item_id,
                slot.job.attempt,
                exc,
                extra=self._extra(slot, "retried"),
            )
            self._hook(self.hooks.on_job_end, slot.job, "retried")

    async def _shutting_down(self) -> bool:
        """One shutdown step; True once the worker may exit."""
        now = self._clock.now()
        if self._grace_deadline is None:
            self._grace_deadline = now + self.settings.shutdown_grace
            log.info("stopping: no more claims", extra={"worker": self.name})
        await self._heartbeat_if_due()
        if self._finished:
            await self._flush()
        if not self._running:
            return True
        if now < self._grace_deadline:
            return False
        held = list(self._running.values())
        self._running.clear()
        for slot in held:
            self._give_up(slot)
        for slot, error in zip(
            held, await self._store.release([s.lease for s in held]), strict=True
        ):
            if error is None:
                self._stats.handed_back += 1
                self._hook(self.hooks.on_job_end, slot.job, "handed_back")
            else:
                self._lost(slot, error)
        return True

    # -- hooks and logs --------------------------------------------------------------------
    def _extra(self, slot: _Slot, outcome: str) -> dict[str, object]:
        return {
            "worker": self.name,
            "tenant": slot.lease.tenant,
            "item_id": slot.lease.item_id,
            "attempt": slot.job.attempt,
            "outcome": outcome,
        }

    def _hook(self, hook: Callable[..., None] | None, *args: object) -> None:
        if hook is None:
            return
        try:
            hook(*args)
        except Exception:
            log.exception("worker hook %r failed", hook, extra={"worker": self.name})
