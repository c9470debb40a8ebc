"""The few things that really differ by flavour, as hand-written pairs.

The async source names the left-hand member; the twin generator renames it to the right-hand
one (``AsyncLock`` -> ``Lock``, ``async_sleep`` -> ``sleep``, ``async_gather`` -> ``gather``),
so no ``await asyncio.sleep`` ever becomes a silent no-op in the sync twin. The worker's pairs
(``AsyncCondition``, ``AsyncJobRunner``) live in ``runyard._flavours_worker``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, TypeVar

# asyncio.timeout (Python 3.11+) bounds a wait in the waiting task; wait_for runs it in a task
# of its own (3.10, 3.11), which a busy worker's loop would pay on every turn.
_timeout: Callable[[float | None], Any] | None = getattr(asyncio, "timeout", None)

__all__ = [
    "AsyncBackground",
    "AsyncBlocking",
    "AsyncEvent",
    "AsyncLock",
    "Background",
    "Blocking",
    "Event",
    "Lock",
    "async_gather",
    "async_sleep",
    "gather",
    "sleep",
]

T = TypeVar("T")


class AsyncLock:
    """A mutual-exclusion lock for coroutines (``async with``)."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()

    async def __aenter__(self) -> None:
        await self._lock.acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._lock.release()


class Lock:
    """A mutual-exclusion lock for threads (``with``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        self._lock.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._lock.release()


class AsyncEvent:
    """A flag coroutines can wait on."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        """Set the flag and wake every waiter."""
        self._event.set()

    def is_set(self) -> bool:
        """True once set."""
        return self._event.is_set()

    def clear(self) -> None:
        """Unset the flag."""
        self._event.clear()

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait until set or ``timeout`` seconds pass; return whether it is set."""
        if self._event.is_set():
            return True  # without wait_for's task: a busy worker's loop checks this often
        try:
            if _timeout is not None:  # Python 3.11+: no task of its own, unlike wait_for
                async with _timeout(timeout):
                    await self._event.wait()
            else:
                await asyncio.wait_for(self._event.wait(), timeout)
        except asyncio.TimeoutError:
            return self._event.is_set()  # set as the time ran out
        return True


class Event:
    """A flag threads can wait on."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        """Set the flag and wake every waiter."""
        self._event.set()

    def is_set(self) -> bool:
        """True once set."""
        return self._event.is_set()

    def clear(self) -> None:
        """Unset the flag."""
        self._event.clear()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until set or ``timeout`` seconds pass; return whether it is set."""
        return self._event.wait(timeout)


class AsyncBackground:
    """One coroutine run as a task until it returns or ``stop()`` cancels it."""

    def __init__(self, run: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
        self._task: asyncio.Task[None] = asyncio.get_running_loop().create_task(run(), name=name)

    async def stop(self, timeout: float) -> None:
        """Cancel the task and wait for it to unwind (``timeout`` is the sync twin's); from the
        task itself, return at once."""
        if asyncio.current_task() is self._task:
            return
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


class Background:
    """One callable run on a daemon thread until it returns (a thread cannot be cancelled:
    the callable must notice that it should stop, and return)."""

    def __init__(self, run: Callable[[], None], name: str) -> None:
        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the thread to end (at once when called from it)."""
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)


class AsyncBlocking:
    """Runs a blocking call without blocking the event loop (in a thread)."""

    @staticmethod
    async def call(call: Callable[[], T]) -> T:
        """Return ``call()``, run in a thread."""
        return await asyncio.to_thread(call)


class Blocking:
    """Runs a blocking call (the sync member of the pair: in the calling thread)."""

    @staticmethod
    def call(call: Callable[[], T]) -> T:
        """Return ``call()``."""
        return call()


async def async_sleep(seconds: float) -> None:
    """Suspend the coroutine for ``seconds``."""
    await asyncio.sleep(seconds)


def sleep(seconds: float) -> None:
    """Block the thread for ``seconds``."""
    time.sleep(seconds)


async def async_gather(calls: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    """Run every call concurrently on the event loop; results in order, first error raised."""
    return list(await asyncio.gather(*(call() for call in calls)))


def gather(calls: Sequence[Callable[[], T]]) -> list[T]:
    """Run every call concurrently, one thread each; results in order, first error raised."""
    if not calls:
        return []
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = [pool.submit(call) for call in calls]
        return [f.result() for f in futures]
