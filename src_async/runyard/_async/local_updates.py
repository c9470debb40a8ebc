"""AsyncLocalUpdates: live updates between the writers and followers of one process.

Shared by the backends whose stores have no notification channel of their own: the memory
state store, and the SQLite state store for followers in the writing process.
"""

from __future__ import annotations

import threading

from runyard._flavours import AsyncEvent
from runyard.models import RunKey

__all__ = ["AsyncLocalSubscription", "AsyncLocalUpdates"]


class AsyncLocalSubscription:
    """A follower's flag, set by every write to its run's log."""

    lost: str | None = None

    def __init__(self, hub: AsyncLocalUpdates, key: RunKey) -> None:
        self._hub, self._key = hub, key
        self.event = AsyncEvent()

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a hint; return whether one came."""
        woke = await self.event.wait(timeout)
        # Cleared before the follower reads the log: a hint sent after this is not lost.
        self.event.clear()
        return woke

    async def aclose(self) -> None:
        """Stop listening."""
        self._hub.unsubscribe(self._key, self)


class AsyncLocalUpdates:
    """Hints between the writers and followers of one process (never lost, but still hints)."""

    def __init__(self) -> None:
        self._subscribers: dict[tuple[str, str], set[AsyncLocalSubscription]] = {}
        # Held only around dictionary updates (never across a suspension point): in the sync
        # twin, writers and followers are threads.
        self._guard = threading.Lock()

    async def subscribe(self, key: RunKey) -> AsyncLocalSubscription:
        """Start listening for hints about ``key``'s log."""
        subscription = AsyncLocalSubscription(self, key)
        with self._guard:
            self._subscribers.setdefault((key.tenant, key.run_id), set()).add(subscription)
        return subscription

    def unsubscribe(self, key: RunKey, subscription: AsyncLocalSubscription) -> None:
        """Forget ``subscription``."""
        with self._guard:
            subscribers = self._subscribers.get((key.tenant, key.run_id))
            if subscribers is not None:
                subscribers.discard(subscription)
                if not subscribers:
                    del self._subscribers[(key.tenant, key.run_id)]

    def publish(self, key: RunKey) -> None:
        """Wake every follower of ``key``."""
        with self._guard:
            woken = list(self._subscribers.get((key.tenant, key.run_id), ()))
        for subscription in woken:
            subscription.event.set()

    async def aclose(self) -> None:
        """Nothing to release."""
