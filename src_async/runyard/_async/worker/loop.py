"""AsyncWorker: claims in batches up to its free slots, runs handlers concurrently, renews
every held lease in one round trip, settles in batches and shuts down gracefully.

One loop does all the store I/O; jobs run beside it (tasks here, threads in the sync twin)
and only record their outcome and nudge the loop. A settle waits at most ``flush_seconds``
to share a round trip: a crash before the flush means the item is delivered again once its
lease lapses (at least once), never lost.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import fields, replace
from functools import partial

from runyard._async.protocols import AsyncWorkQueue
from runyard._async.worker.listening import AsyncWorkerListening
from runyard._async.worker.store import AsyncWorkerStore, WorkerAborted
from runyard._async.worker.wakeup import AsyncWakeup, open_queue_wakeup, wakeup_for
from runyard._flavours import AsyncEvent
from runyard._flavours_worker import AsyncGuard, AsyncJobRunner
from runyard.clock import Clock, SystemClock
from runyard.errors import ConfigurationError
from runyard.keys import validate_identifier
from runyard.models import Lease
from runyard.policy import QueuePolicy
from runyard.worker.holdings import WorkerHoldings
from runyard.worker.job import Job, default_worker_name, interval_timer
from runyard.worker.outcomes import (
    WorkerHooks,
    WorkerStats,
)
from runyard.worker.settings import WorkerSettings
from runyard.worker.slot import Slot
from runyard.worker.timing import WorkerTiming

__all__ = ["AsyncWorker"]

log = logging.getLogger("runyard.worker")


class AsyncWorker(AsyncWorkerListening, WorkerHoldings, WorkerTiming):
    """Runs ``handler(job)`` on the items of ``queue``.

    A handler that returns completes the item; ``PermanentFailure`` dead-letters it at once;
    any other exception (and a job past ``job_timeout``) fails it for a retry per the queue's
    policy, storing the exception's type, message and the end of its traceback. Settings are
    ``WorkerSettings`` fields, given as ``settings=`` or as keywords. ``name`` is the name
    claims are taken under: by default ``host-pid-random``, unique per worker; give one only
    to a process that restarts under the same name on purpose (see docs/worker.md). Raises
    ConfigurationError for a bad setting, InvalidArgumentError for a name that is not an
    identifier. The worker times its own intervals (heartbeats, reaps, timeouts, the
    shutdown grace) on ``time.monotonic()``, so a step of the wall clock changes none of
    them; an injected ``clock`` (a ``ManualClock`` in tests) times them instead.
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
        self._time = interval_timer(clock)
        self._wall_clock = clock or SystemClock()  # to compare with the store's times
        policy = getattr(queue, "policy", None)
        lease_seconds = policy.lease_seconds if isinstance(policy, QueuePolicy) else None
        self._lease_limits = (
            (policy.lease_seconds, policy.max_lease_seconds)
            if isinstance(policy, QueuePolicy)
            else None
        )
        self._heartbeat_every = self.settings.heartbeat_every(lease_seconds)
        self._stats = WorkerStats()
        self._nudge = AsyncEvent()
        # Set while a slot is free and the worker is not stopping: only then does the listener
        # wait on a wake-up that consumes hints (on Redis a blocked worker pops a hint that an
        # idle one needs), and only then does a hint nudge the loop.
        self._listening = AsyncEvent()
        self._aborted = AsyncEvent()
        self._store = AsyncWorkerStore(
            queue, self.name, self.settings, self._stats, self._aborted, log
        )
        self._store.on_give_up = self.abort
        self._store.holding = self._holding
        self._wakeup = wakeup if wakeup is not None else wakeup_for(queue)
        # None: the queue's own wake-up (Redis, PostgreSQL), opened as run() starts and
        # closed as it ends; a queue without one is polled.
        self._opens_wakeup = self._wakeup is None
        self._runs = 0  # run() calls so far: a listener left from an earlier one stops
        self._settle_in_job = not self._store.batched
        self._nudged_at = 0.0
        # Whether a claim may find work: set by a hint or a full claim, and cleared as a claim
        # is sent; and when the items a retry or a reap returned fall due (their times, a
        # heap on the worker's timer). A worker woken by hints claims only then (or once per
        # backstop_seconds): a job that ends, or a settle, does not make work due.
        self._claim_due = True
        self._held_after_claim = 0  # jobs running after the last claim (see _claim_wanted)
        self._due: list[float] = []
        self._last_claim = 0.0
        self._until_idle = False
        self._handoff: deque[Slot | Lease] = deque()  # what jobs claimed, for the loop
        self._adopted: OrderedDict[tuple[str, str, int, float], tuple[int, float]] = OrderedDict()
        self._guard = AsyncGuard()  # the slots' leases and the handoff, against job threads
        self._jobs = AsyncJobRunner()
        self._listener = AsyncJobRunner()
        self._running: dict[tuple[str, str], Slot] = {}
        # Jobs sending their complete (or waiting on their successor claim) whose item was
        # claimed anew meanwhile: their outcome is still to be counted.
        self._closing: list[Slot] = []
        self._finished: list[Slot] = []
        self._flushing: list[Slot] = []  # finished slots whose settle is in flight
        self._handing_back: list[Slot] = []  # given up at shutdown, until their release returns
        self._first_finished = 0.0
        self._stopping = False
        self._hook_exit: BaseException | None = None
        self._serving = False
        self._grace_deadline: float | None = None
        self._stop_logged = False
        self._next_heartbeat: float | None = None
        self._next_reap = 0.0

    # -- control ---------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop claiming; in-flight jobs get ``shutdown_grace`` seconds, then are handed back;
        store calls get ``handback_seconds`` more, then the worker exits anyway."""
        if not self._stopping:
            grace = self.settings.shutdown_grace
            self._grace_deadline = self._time() + grace
            self._store.give_up_at(time.monotonic() + grace + self.settings.handback_seconds)
        self._stopping = True
        self._listening.clear()
        self._nudge.set()

    def abort(self) -> None:
        """Exit at once: nothing more is settled; held leases lapse and are recovered."""
        self._aborted.set()
        self._nudge.set()

    def stats(self) -> WorkerStats:
        """A copy of the worker's counters."""
        return replace(self._stats, in_flight=len(self._running))

    async def run(self) -> WorkerStats:
        """Work until ``stop()`` (a signal, in the CLI), then shut down gracefully. A hook
        that raises SystemExit or KeyboardInterrupt (any BaseException but an Exception)
        stops the worker so; then it is raised here."""
        return await self._serve(until_idle=False)

    async def run_until_idle(self) -> WorkerStats:
        """Work until nothing is due, in flight or waiting to settle (tests, batch jobs);
        raises what a hook raised, as ``run()`` does."""
        return await self._serve(until_idle=True)

    # -- the loop --------------------------------------------------------------------------
    async def _serve(self, *, until_idle: bool) -> WorkerStats:
        self._serving, self._until_idle = True, until_idle
        if self._opens_wakeup:
            self._wakeup = await open_queue_wakeup(self.queue, self.name)
        log.info(
            "worker %s serving: concurrency %d, %s, %s",
            self.name,
            self.settings.concurrency,
            "batched" if self._store.batched else "unbatched",
            "woken by hints" if self._wakeup is not None else "polling",
            extra={"worker": self.name},
        )
        self._runs += 1
        if self._wakeup is not None:
            self._listener.start(partial(self._listen, self._wakeup, self._runs))
        try:
            while not self._aborted.is_set():
                self._nudge.clear()
                self._collect()
                if self._stopping and await self._shutting_down():
                    break
                claimed, more = (0, False) if self._stopping else await self._fill()
                if not self._stopping and len(self._running) < self.settings.concurrency:
                    self._listening.set()
                else:
                    self._listening.clear()
                await self._heartbeat_if_due()
                flushed = self._flush_due()
                if flushed:
                    await self._flush()
                idle = not (
                    claimed
                    or flushed
                    or self._running
                    or self._finished
                    or self._handoff
                    or self._closing
                )
                if until_idle and idle:
                    reaped = len(await self._store.reap())
                    self._stats.reaped += reaped
                    if reaped:
                        continue
                    break
                await self._reap_if_due()
                if flushed or (more and len(self._running) < self.settings.concurrency):
                    continue  # a settle may have made work due; a full claim may leave more
                await self._nudge.wait(self._wait_seconds())
        except WorkerAborted:
            pass
        finally:
            self._serving = False
            self._listening.set()  # a listener waiting for a free slot ends
            await self._jobs.aclose()
            # The wake-up is closed first: a wait blocked on it ends (a client or connection
            # of its own is closed under it), so the listener ends at once instead of after
            # a cancellation the driver may hold up, still blocked on the wake key.
            if self._wakeup is not None:
                await self._wakeup.aclose()
            await self._listener.aclose()
            if self._opens_wakeup:
                self._wakeup = None  # a next run() opens another
        if self._hook_exit is not None:  # a hook's SystemExit or KeyboardInterrupt
            raised, self._hook_exit = self._hook_exit, None
            raise raised
        return self.stats()

    # -- jobs ------------------------------------------------------------------------------
    async def _fill(self) -> tuple[int, bool]:
        """Claim up to the free slots (unbatched: one per turn of the loop, which turns again
        while slots are free and claims find work) and start a job on each new lease; return
        how many started and whether the claim was full (so more may be due). A claim that
        took fewer than it asked for found nothing more: claiming again at once would only
        send an empty round trip (a wake-up or the backstop starts the next one)."""
        free = self.settings.concurrency - len(self._running)
        if free > 0 and not self._store.batched:
            free = 1  # one at a time: each job starts as soon as its claim returns
        if free <= 0 or not self._claim_wanted():
            return 0, False
        self._claim_due, self._last_claim = False, time.monotonic()
        now = self._time()
        while self._due and self._due[0] <= now:
            heapq.heappop(self._due)
        handed: list[int] = []  # leases of this worker an adopt handed off (a lost reply)

        def renew(leases: list[Lease]) -> int:
            handed.append(self._renew_held(leases))
            return handed[-1]

        mark = self._claim_sent()
        leases = await self._store.claim(free, renew)
        started = self._take(leases, mark) + sum(handed)
        self._held_after_claim = len(self._running)  # polling: a job ending frees a slot
        if started == free:
            self._claim_due = True
        return started, started == free
