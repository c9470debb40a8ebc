"""AsyncHintHub: the followers of one updates instance, woken by that instance's reader.

The Redis and PostgreSQL updates each keep one listening connection (one per cluster node on
Redis Cluster) for every follower they serve; a reader of its own (``AsyncBackground``: a task,
or a daemon thread in the blocking twin) reads it and sets the flag of each subscription a
hint concerns. A follower waits only on its own flag, for its own ``poll_seconds``: it never waits
for another follower's read, and subscribing never waits for a read either. The in-process hub
(AsyncLocalUpdates, memory and SQLite) keeps its followers here too: its writers set the flags.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from runyard._flavours import AsyncEvent
from runyard.models import RunKey

__all__ = ["READ_SLICE", "AsyncHintHub", "AsyncHubSubscription"]

# How long one read of a listening connection waits before the reader looks at whether it
# should stop (the sync twin's reader is a thread: it cannot be cancelled, it notices).
READ_SLICE = 0.25


class AsyncHubSubscription:
    """One follower's interest in one run, set by its hub's reader."""

    def __init__(self, hub: AsyncHintHub, key: RunKey) -> None:
        self._hub, self.key = hub, key
        self.event = AsyncEvent()
        self.lost: str | None = None

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a hint; return whether one came (False at once
        once the listening connection is lost)."""
        if self.lost is None and not self.event.is_set():
            await self.event.wait(timeout)
        woke = self.event.is_set()
        # Cleared before the follower reads the log: a hint sent after this is not lost.
        self.event.clear()
        return woke and self.lost is None

    async def aclose(self) -> None:
        """Stop listening."""
        await self._hub.unsubscribe(self)


class AsyncHintHub:
    """The subscriptions of one updates instance, by run; the base of the backends' updates.

    A backend registers a subscription (``_register``) before it asks its server for the
    run's hints, so a hint that arrives at once is not missed; its reader calls ``_wake``
    for each hint and ``_lose`` when its connection breaks.
    """

    subscription_class: type[AsyncHubSubscription] = AsyncHubSubscription

    def __init__(self) -> None:
        self._subscribers: dict[tuple[str, str], set[AsyncHubSubscription]] = {}
        # Held only around dictionary updates (never across a suspension point): in the sync
        # twin, followers and the reader are threads.
        self._guard = threading.Lock()

    @property
    def followed(self) -> int:
        """How many runs have a subscription now."""
        with self._guard:
            return len(self._subscribers)

    def _register(self, key: RunKey) -> AsyncHubSubscription:
        subscription = self.subscription_class(self, key)
        with self._guard:
            self._subscribers.setdefault((key.tenant, key.run_id), set()).add(subscription)
        return subscription

    def _forget(self, subscription: AsyncHubSubscription) -> bool:
        """Forget ``subscription``; True when it was its run's last one."""
        name = (subscription.key.tenant, subscription.key.run_id)
        with self._guard:
            subscribers = self._subscribers.get(name)
            if subscribers is None:
                return False
            subscribers.discard(subscription)
            if subscribers:
                return False
            del self._subscribers[name]
            return True

    async def unsubscribe(self, subscription: AsyncHubSubscription) -> None:
        """Forget ``subscription`` (a backend may also stop listening for its run)."""
        self._forget(subscription)

    def _wake(self, name: tuple[str, str]) -> None:
        """Set the flag of every subscription to the run ``name`` (tenant, run_id)."""
        with self._guard:
            woken = list(self._subscribers.get(name, ()))
        for subscription in woken:
            subscription.event.set()

    def _lose(
        self,
        reason: str,
        names: set[tuple[str, str]] | None = None,
        detach: Callable[[], None] | None = None,
    ) -> None:
        """Mark the subscriptions of ``names`` (None: every one) lost and wake them; ``detach``
        (forgetting the broken connection) runs under the same guard, so a subscription
        registered after it is never marked, and one registered before it always is."""
        with self._guard:
            if detach is not None:
                detach()
            lost = [
                subscription
                for name, subscribers in self._subscribers.items()
                if names is None or name in names
                for subscription in subscribers
            ]
        for subscription in lost:
            subscription.lost = reason
            subscription.event.set()
