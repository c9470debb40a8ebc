"""The worker's wake-up listener: the half of ``AsyncWorker`` that turns hints into turns of
its loop, running beside it (a task, or in the thread twin a thread)."""

from __future__ import annotations

import logging

from runyard._async.worker.jobs import AsyncWorkerJobs
from runyard._async.worker.wakeup import AsyncWakeup
from runyard._flavours import AsyncEvent

__all__ = ["AsyncWorkerListening"]

log = logging.getLogger("runyard.worker")


class AsyncWorkerListening(AsyncWorkerJobs):
    """The wake-up listener of ``AsyncWorker`` (its base: the attributes are set there)."""

    _wakeup: AsyncWakeup | None
    _serving: bool
    _listening: AsyncEvent
    _aborted: AsyncEvent
    _nudge: AsyncEvent
    _runs: int  # run() calls so far (a listener serves the one it was started for)

    def wake(self) -> None:
        """Make the loop look at its work now (as a wake-up hint does)."""
        self._claim_due = True
        self._nudge.set()

    async def _listen(self, wakeup: AsyncWakeup, run: int) -> None:
        """Turn wake-up hints into nudges while the worker serves (a job of its own).

        A wake-up that consumes its hints (Redis: one listener pops each) is waited on only
        while a slot is free and the worker is not stopping, and after a hint not before the
        loop has claimed; a hint it returns once the slots have filled by another path (the
        backstop, a retry falling due, a full claim) is given back for an idle worker. Any
        other wake-up (PostgreSQL: every listener gets every notification, and a listener
        that stops reading holds the server's notification queue) is read busy or not; a
        hint while busy only makes the next claim due."""
        consumes = wakeup.consumes_hints
        failures = 0
        while self._serving and self._runs == run:
            if consumes and not self._listening.is_set():
                await self._listening.wait()
                continue
            try:
                woke = await wakeup.wait(min(self.settings.backstop_seconds, 5.0))
                wanted = self._wants_hints()
                if woke and consumes and not wanted:
                    await wakeup.give_back()  # not this worker's wake: an idle one's
                    continue
            except Exception as exc:  # a lost listener: the backstop polls meanwhile
                if not self._serving or self._runs != run:
                    break  # the wake-up was closed under it: the worker is stopping
                failures += 1
                level = logging.WARNING if failures == 1 else logging.DEBUG
                log.log(
                    level,
                    "wake-up listener failed (%s): polling every %g s until it recovers",
                    exc,
                    self.settings.backstop_seconds,
                    extra={"worker": self.name},
                )
                await self._aborted.wait(self.settings.store_backoff(failures))
                continue
            if failures:
                log.info("wake-up listener recovered", extra={"worker": self.name})
                self.wake()  # hints sent meanwhile were missed
            failures = 0
            if not woke:
                continue
            if consumes:
                self._listening.clear()  # the loop sets it again after its claim, if not full
            if wanted:
                self.wake()
            else:
                self._claim_due = True  # claimed once a slot frees; no turn of the loop now

    def _wants_hints(self) -> bool:
        """Whether a hint can start a job now: serving, not stopping, and a slot free as of
        the loop's last turn."""
        return self._serving and self._listening.is_set()
