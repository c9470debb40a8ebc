"""AsyncWakeup: what an idle worker waits on, so an enqueue starts a job before the next poll.

Hints are lossy (a hint sent while nobody listens is gone), so the worker keeps a polling
backstop. The memory queue's hint is a condition its enqueue notifies; Redis and PostgreSQL
hints are in ``runyard._async.redis.wakeup`` and ``runyard._async.postgres.wakeup``.
"""

from __future__ import annotations

import logging
from typing import Protocol, runtime_checkable

from runyard._flavours_worker import AsyncCondition

__all__ = ["AsyncConditionWakeup", "AsyncWakeup", "open_queue_wakeup", "wakeup_for"]

log = logging.getLogger("runyard.worker")


@runtime_checkable
class AsyncWakeup(Protocol):
    """A source of hints that work was enqueued.

    ``consumes_hints`` says whether a hint goes to one listener only (Redis: ``BLPOP`` pops
    it), so the worker waits only while a slot is free and gives back (``give_back``) a hint
    that came once its slots had filled; a wake-up whose every listener gets every hint
    (PostgreSQL, memory) is read all the time, busy or not.
    """

    consumes_hints: bool

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a hint; return whether one came."""
        ...

    async def give_back(self) -> None:
        """Return the hint the last ``wait`` took, for another listener (consuming only)."""
        ...

    async def aclose(self) -> None:
        """Stop listening and release the listener's resources."""
        ...


class AsyncConditionWakeup:
    """Hints from a condition notified in this process (the memory queue's ``wakeups``).

    Lossless from its construction on: an enqueue between two waits is seen by the next one.
    Every waiter sees every notify.
    """

    consumes_hints = False

    def __init__(self, condition: AsyncCondition) -> None:
        self._condition = condition
        self._seen = condition.generation

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a notify since the last wait."""
        generation = await self._condition.wait_past(self._seen, timeout)
        woke, self._seen = generation != self._seen, generation
        return woke

    async def give_back(self) -> None:
        """Nothing to give back: every waiter sees every notify."""

    async def aclose(self) -> None:
        """Nothing to release: the condition belongs to the queue."""


async def open_queue_wakeup(queue: object, worker: str) -> AsyncWakeup | None:
    """The wake-up the queue opens for a worker (``open_wakeup``: Redis, PostgreSQL), or None
    (the worker polls at its backstop): when it has none, or opening it failed (logged at
    WARNING; the queue's own calls fail or recover on their own)."""
    opener = getattr(queue, "open_wakeup", None)
    if opener is None:
        return None
    try:
        wakeup: AsyncWakeup | None = await opener()
    except Exception as exc:
        log.warning(
            "worker %s: could not open the queue's wake-up (%s): polling at its backstop",
            worker,
            exc,
            extra={"worker": worker},
        )
        return None
    return wakeup


def wakeup_for(queue: object) -> AsyncWakeup | None:
    """The wake-up a queue offers by itself (the memory queue's condition), or None."""
    condition = getattr(queue, "wakeups", None)
    if isinstance(condition, AsyncCondition):
        return AsyncConditionWakeup(condition)
    return None
