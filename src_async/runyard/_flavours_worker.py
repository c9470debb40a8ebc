"""The worker's flavour pairs: a broadcast condition, and jobs run as tasks or as threads.

The async source names the left-hand member (``AsyncCondition``, ``AsyncJobRunner``,
``AsyncJobHandle``); the twin generator renames it to the right-hand one.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import queue
import threading
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = [
    "AsyncCondition",
    "AsyncGuard",
    "AsyncJobHandle",
    "AsyncJobRunner",
    "Condition",
    "Guard",
    "JobHandle",
    "JobRunner",
    "async_run_handler",
    "run_handler",
]

log = logging.getLogger("runyard.worker")


async def async_run_handler(handler: Callable[[Any], Any], job: object) -> None:
    """Run an async worker's handler on ``job``: a handler that returned no awaitable (a plain
    function given to AsyncWorker) fails the job saying so, not with "object NoneType can't
    be used in 'await' expression"."""
    result = handler(job)
    if not inspect.isawaitable(result):
        raise TypeError(
            f"the handler returned {type(result).__name__}, not an awaitable: AsyncWorker runs "
            "async handlers; run a plain function with Worker (the CLI's --sync)"
        )
    await result


def run_handler(handler: Callable[[Any], Any], job: object) -> None:
    """Run a thread worker's handler on ``job``: one that returned an awaitable (an object
    with ``async def __call__``, a wrapper of a coroutine function) did not run its work, so
    the job fails saying so; it was completed as done before, the work lost."""
    result = handler(job)
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()  # never awaited: no "was never awaited" warning
        raise TypeError(
            f"the handler returned {type(result).__name__}, an awaitable, so its work did not "
            "run: Worker runs plain functions; serve a handler that returns a coroutine with "
            "AsyncWorker (the CLI without --sync)"
        )


class AsyncCondition:
    """A broadcast with a generation: ``notify()`` bumps it and wakes every waiter, and a
    waiter that names the generation it last saw never misses a notify in between."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.generation = 0

    def notify(self) -> None:
        """Bump the generation and wake every current waiter."""
        self.generation += 1
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait_past(self, seen: int, timeout: float) -> int:
        """Wait up to ``timeout`` seconds for the generation to move past ``seen``; return it."""
        if self.generation == seen:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._event.wait(), timeout)
        return self.generation


class Condition:
    """A broadcast with a generation: ``notify()`` bumps it and wakes every waiting thread,
    and a waiter that names the generation it last saw never misses a notify in between."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.generation = 0

    def notify(self) -> None:
        """Bump the generation and wake every current waiter."""
        with self._cond:
            self.generation += 1
            self._cond.notify_all()

    def wait_past(self, seen: int, timeout: float) -> int:
        """Wait up to ``timeout`` seconds for the generation to move past ``seen``; return it."""
        with self._cond:
            self._cond.wait_for(lambda: self.generation != seen, timeout)
            return self.generation


class AsyncGuard:
    """Guards state the loop shares with its jobs (``with``): jobs run as tasks on the loop's
    thread, between awaits, so nothing can come between a read and a write; a no-op."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


# Guards state the loop shares with its jobs (``with``): jobs run as threads, so a read and a
# write must not be split; re-entrant (a guarded step may call another). The C lock itself, so
# that ``with`` runs no Python frame: the thread twin takes it about twice per job.
Guard = threading.RLock


class AsyncJobHandle:
    """One job running as a task; ``cancel()`` interrupts it (CancelledError in the handler)."""

    def __init__(self, task: asyncio.Task[None]) -> None:
        self._task = task
        self.abandoned = False

    def cancel(self) -> None:
        """Interrupt the job; whatever it does afterwards is ignored by the worker."""
        self.abandoned = True
        self._task.cancel()


class JobHandle:
    """One job running on a thread; a thread cannot be interrupted, so ``cancel()`` abandons
    it: the thread runs on (it is a daemon) and its outcome is ignored."""

    def __init__(self) -> None:
        self.abandoned = False

    def cancel(self) -> None:
        """Abandon the job; the handler should check ``Job.cancelled`` and return early."""
        self.abandoned = True


class AsyncJobRunner:
    """Runs each job as an asyncio task and keeps them until they end."""

    ABANDON_SECONDS = 1.0

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, run: Callable[[], Awaitable[None]]) -> AsyncJobHandle:
        """Start ``run()`` as a task; a cancellation ends it quietly."""

        async def guarded() -> None:
            with contextlib.suppress(asyncio.CancelledError):
                await run()

        task = asyncio.get_running_loop().create_task(guarded())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return AsyncJobHandle(task)

    async def aclose(self) -> None:
        """Cancel the jobs still running and wait up to ``ABANDON_SECONDS`` for them to
        unwind; a job that ignores its cancellation longer is left running (logged)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if not tasks:
            return
        done, pending = await asyncio.wait(tasks, timeout=self.ABANDON_SECONDS)
        for task in done:
            if not task.cancelled():
                task.exception()  # retrieved, as gather(return_exceptions=True) did
        if pending:
            log.warning(
                "%d job task(s) ignored their cancellation for %.1f s: left running",
                len(pending),
                self.ABANDON_SECONDS,
            )


class JobRunner:
    """Runs each job on a daemon thread, reusing idle threads (an abandoned job keeps its
    thread busy, so a new one is started for the next job); idle threads end after a minute."""

    IDLE_SECONDS = 60.0

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0

    def start(self, run: Callable[[], None]) -> JobHandle:
        """Hand ``run()`` to an idle thread, or to a new daemon thread."""
        with self._lock:
            reuse = self._idle > 0
            if reuse:
                self._idle -= 1
        self._jobs.put(run)
        if not reuse:
            threading.Thread(target=self._serve, name="runyard-job", daemon=True).start()
        return JobHandle()

    def _serve(self) -> None:
        while True:
            try:
                run = self._jobs.get(timeout=self.IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0:  # no start() counts on this thread: end it
                        self._idle -= 1
                        return
                continue
            if run is None:
                return
            run()
            with self._lock:
                self._idle += 1

    def close(self) -> None:
        """End the idle threads; a thread still running an abandoned job ends with it."""
        with self._lock:
            idle, self._idle = self._idle, 0
        for _ in range(idle):
            self._jobs.put(None)
