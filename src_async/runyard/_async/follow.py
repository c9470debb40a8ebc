"""follow(): every event of a run once, in order, until the run is terminal and drained.

The log is the truth; live updates only wake the follower early. Without them (or when the
listener is lost) the follower polls every ``poll_seconds``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from runyard._async.updates import AsyncSubscription, AsyncUpdates
from runyard._flavours import async_sleep
from runyard.errors import InvalidArgumentError, StateNotFoundError
from runyard.events import RunEvent, check_after
from runyard.models import RunKey

if TYPE_CHECKING:
    from runyard._async.event_protocol import AsyncEventLogStore

__all__ = ["DEFAULT_POLL_SECONDS", "MAX_POLL_SECONDS", "follow_events"]

DEFAULT_POLL_SECONDS = 0.5
# The longest poll_seconds follow() takes (a NaN or an infinity never polled again).
MAX_POLL_SECONDS = 3600.0
_PAGE = 100
logger = logging.getLogger("runyard.follow")


def follow_events(
    store: AsyncEventLogStore,
    key: RunKey,
    *,
    after: int = 0,
    poll_seconds: float | None = None,
    updates: AsyncUpdates | None = None,
) -> AsyncIterator[RunEvent]:
    """Yield the run's events after ``after`` once each, in seq order, and end once the run
    is terminal and its log has been read to the end.

    The arguments are checked here, when ``follow()`` is called, not at the first iteration:
    InvalidArgumentError (a ValueError) for an ``after`` that is no seq or a ``poll_seconds``
    that is not a number above 0 and at most MAX_POLL_SECONDS (None is
    ``DEFAULT_POLL_SECONDS``). Iterating raises StateNotFoundError, naming the run, when the
    run does not exist or is deleted while followed (before its terminal status was seen).
    """
    check_after(after)
    if poll_seconds is None:
        poll_seconds = DEFAULT_POLL_SECONDS
    elif (
        not isinstance(poll_seconds, (int, float))
        or isinstance(poll_seconds, bool)
        or not 0 < poll_seconds <= MAX_POLL_SECONDS
    ):
        raise InvalidArgumentError(
            f"poll_seconds must be a number of seconds above 0 and at most {MAX_POLL_SECONDS}, "
            f"not {poll_seconds!r}",
            argument="poll_seconds",
            limit=f"a number of seconds above 0 and at most {MAX_POLL_SECONDS}",
        )
    return _follow(store, key, after, poll_seconds, updates)


async def _follow(
    store: AsyncEventLogStore,
    key: RunKey,
    after: int,
    poll_seconds: float,
    updates: AsyncUpdates | None,
) -> AsyncIterator[RunEvent]:
    """follow_events' loop, its arguments checked."""
    # Subscribe before the first read, so a hint sent between a read and the wait is kept.
    subscription = await _subscribe(updates, key, poll_seconds)
    try:
        seen, ending = after, False
        while True:
            batch = await store.read_events(key, after=seen, limit=_PAGE)
            for event in batch:
                seen = event.seq
                ending = ending or event.terminal
                yield event
            if len(batch) == _PAGE:
                continue
            if ending:
                return  # terminal seen, and this read found the end of the log
            # The status is read before the next read of the log: a terminal status seen here
            # was written after every event that read will return, so one more read drains it.
            run = await store.get_run(key)
            if run is None:
                # Nothing will ever end this follow: the run (and its log) is gone, or was
                # never there.
                raise StateNotFoundError(
                    f"run {key.run_id!r} of tenant {key.tenant!r} does not exist (never "
                    "created, or deleted while followed): nothing to follow"
                )
            if run.status in store.terminal_statuses:
                ending = True
                continue
            subscription = await _wait(subscription, poll_seconds, key)
    finally:
        if subscription is not None:
            await subscription.aclose()


async def _subscribe(
    updates: AsyncUpdates | None, key: RunKey, poll_seconds: float
) -> AsyncSubscription | None:
    """A subscription to ``key``'s hints; None (polling, with a warning) when it fails."""
    if updates is None:
        return None
    try:
        return await updates.subscribe(key)
    except Exception as exc:  # the listener could not start: poll, as a lost one does
        logger.warning(
            "live updates for run %r of tenant %r lost their listener (subscribing failed: "
            "%s); following by polling every %s s",
            key.run_id,
            key.tenant,
            _reason(exc),
            poll_seconds,
        )
        return None


def _reason(exc: Exception) -> str:
    """The first line of ``exc``, or its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


async def _wait(
    subscription: AsyncSubscription | None, poll_seconds: float, key: RunKey
) -> AsyncSubscription | None:
    """Wait for a hint or ``poll_seconds``; return the subscription still worth waiting on."""
    if subscription is None:
        await async_sleep(poll_seconds)
        return None
    if await subscription.wait(poll_seconds):
        return subscription
    if subscription.lost:
        logger.warning(
            "live updates for run %r of tenant %r lost their listener (%s); following by "
            "polling every %s s",
            key.run_id,
            key.tenant,
            subscription.lost,
            poll_seconds,
        )
        await subscription.aclose()
        return None
    return subscription
