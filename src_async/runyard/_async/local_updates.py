"""AsyncLocalUpdates: live updates between the writers and followers of one process.

Shared by the backends whose stores have no notification channel of their own: the memory
state store, and the SQLite state store for followers in the writing process. The followers'
registry is the one the networked backends' updates use (AsyncHintHub); here the writers set
the flags themselves, so a hint is never lost and no subscription is ever ``lost``.
"""

from __future__ import annotations

from runyard._async.hint_hub import AsyncHintHub, AsyncHubSubscription
from runyard.models import RunKey

__all__ = ["AsyncLocalSubscription", "AsyncLocalUpdates"]


class AsyncLocalSubscription(AsyncHubSubscription):
    """A follower's flag, set by every write to its run's log."""


class AsyncLocalUpdates(AsyncHintHub):
    """Hints between the writers and followers of one process (never lost, but still hints)."""

    subscription_class = AsyncLocalSubscription

    async def subscribe(self, key: RunKey) -> AsyncLocalSubscription:
        """Start listening for hints about ``key``'s log."""
        subscription = self._register(key)
        assert isinstance(subscription, AsyncLocalSubscription)
        return subscription

    def publish(self, key: RunKey) -> None:
        """Wake every follower of ``key``."""
        self._wake((key.tenant, key.run_id))

    async def aclose(self) -> None:
        """Nothing to release."""
