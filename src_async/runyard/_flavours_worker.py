"""The worker's flavour pairs: a broadcast condition, and jobs run as tasks or as threads.

The async source names the left-hand member (``AsyncCondition``, ``AsyncJobRunner``,
``AsyncJobHandle``); the twin generator renames it to the right-hand one.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable

__all__ = [
    "AsyncCondition",
    "AsyncJobHandle",
    "AsyncJobRunner",
    "Condition",
    "JobHandle",
    "JobRunner",
]


class AsyncCondition:
    """A broadcast: ``notify()`` wakes every coroutine waiting at that moment."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        """Wake every current waiter; a later waiter waits for the next notify."""
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a notify; return whether one came."""
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True


class Condition:
    """A broadcast: ``notify()`` wakes every thread waiting at that moment."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._generation = 0

    def notify(self) -> None:
        """Wake every current waiter; a later waiter waits for the next notify."""
        with self._cond:
            self._generation += 1
            self._cond.notify_all()

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a notify; return whether one came."""
        with self._cond:
            start = self._generation
            return self._cond.wait_for(lambda: self._generation != start, timeout)


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
    """One job running on its own thread; a thread cannot be interrupted, so ``cancel()``
    abandons it: the thread runs on (it is a daemon) and its outcome is ignored."""

    def __init__(self, thread: threading.Thread) -> None:
        self._thread = thread
        self.abandoned = False

    def cancel(self) -> None:
        """Abandon the job; the handler should check ``Job.cancelled`` and return early."""
        self.abandoned = True


class AsyncJobRunner:
    """Runs each job as an asyncio task and keeps them until they end."""

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
        """Cancel the jobs still running and wait for them to unwind."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class JobRunner:
    """Runs each job on a daemon thread of its own."""

    def start(self, run: Callable[[], None]) -> JobHandle:
        """Start ``run()`` on a new daemon thread."""
        thread = threading.Thread(target=run, name="runyard-job", daemon=True)
        thread.start()
        return JobHandle(thread)

    def close(self) -> None:
        """Nothing to wait for: abandoned threads are daemons and end with the process."""
