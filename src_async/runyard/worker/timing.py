"""When the worker's loop turns, claims and wakes up: the timing decisions of both workers,
shared by the twins (no I/O)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from runyard.worker.settings import WorkerSettings
from runyard.worker.slot import Slot

__all__ = ["SUCCESSOR_NUDGE_SECONDS", "WorkerTiming"]

# A job going on with its successor wakes the loop at most this often (or every
# ``flush_seconds``, if longer).
SUCCESSOR_NUDGE_SECONDS = 0.01


class WorkerTiming:
    """The timing decisions of ``AsyncWorker`` and ``Worker`` (a base: the attributes are set
    by the worker)."""

    settings: WorkerSettings
    _time: Callable[[], float]
    _finished: list[Slot]
    _first_finished: float
    _next_heartbeat: float | None
    _settle_in_job: bool
    _running: dict[tuple[str, str], Slot]
    _stopping: bool
    _grace_deadline: float | None
    _store: Any  # the worker's store: give_up_in() says how long a stop may still wait
    _next_reap: float
    _last_claim: float
    _claim_due: bool
    _due: list[float]
    _wakeup: Any
    _until_idle: bool
    _nudged_at: float
    _held_after_claim: int

    def _wait_seconds(self) -> float:
        """How long the loop may sleep before something falls due (unless nudged)."""
        mono, now = time.monotonic(), self._time()
        waits = []
        if self._finished:
            waits.append(self._first_finished + self.settings.flush_seconds - mono)
        if self._next_heartbeat is not None:
            waits.append(self._next_heartbeat - now)
        if self._settle_in_job and self._running:
            waits.append(0.05)  # jobs going on with successors nudge only now and then
        running = [s for s in self._running.values() if not s.settling]
        waits.extend(s.deadline - now for s in running if s.deadline is not None)
        waits.extend(s.cap_at - now for s in running if s.cap_at is not None)
        if self._stopping:
            if self._grace_deadline is not None and running:
                waits.append(self._grace_deadline - now)
            waits.append(self._store.give_up_in())
        else:
            waits.append(self._next_reap - now)  # busy or idle: a dead worker's items return
            if len(self._running) < self.settings.concurrency:
                waits.append(self._last_claim + self.settings.backstop_seconds - mono)
                if self._claim_due:
                    waits.append(0.0)  # set after this turn's claim (a reap, a hint)
                if self._due:
                    waits.append(self._due[0] - now)  # a retried or reaped item falls due
        return max(0.0, min(waits, default=self.settings.backstop_seconds))

    def _claim_wanted(self) -> bool:
        """Whether to claim now: when working until idle; after a full claim, a reap or a
        retry, and once per ``backstop_seconds``; with wake-ups, after a hint (one that came
        while every slot was busy too), not merely because a job ended (that empty round trip
        would delay the claim the next hint asks for); without (the worker polls), also once a
        job ended since the last claim (a slot freed), never merely because the loop turned
        (with unbatched jobs running it turns every 50 ms: it claimed on each turn, 20 empty
        claims a second, each a write transaction on SQLite)."""
        return (
            (self._wakeup is None and len(self._running) < self._held_after_claim)
            or self._until_idle
            or self._claim_due
            or bool(self._due and self._due[0] <= self._time())
            or time.monotonic() >= self._last_claim + self.settings.backstop_seconds
        )

    def _nudge_due(self) -> bool:
        """A job that goes on with its successor wakes the loop (to count the outcome and
        register the successor) at most every ``flush_seconds``, not after every job; with
        a ``job_timeout`` every time, so the successor's deadline is watched at once."""
        now = time.monotonic()
        if self.settings.job_timeout is None and now < self._nudged_at + max(
            self.settings.flush_seconds, SUCCESSOR_NUDGE_SECONDS
        ):
            return False
        self._nudged_at = now
        return True
