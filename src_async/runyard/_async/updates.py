"""Live updates: lossy hints that a run's log grew, so followers wake before their next poll.

A store's writes publish a hint per event; a follower subscribes to its run. Hints may be lost
(a dropped connection, a full buffer): followers always keep polling as a backstop.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from runyard.models import RunKey

__all__ = ["AsyncSubscription", "AsyncUpdates"]


@runtime_checkable
class AsyncSubscription(Protocol):
    """One follower's interest in one run."""

    lost: str | None
    """Why the listener was lost (then ``wait`` returns False at once), or None."""

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a hint; return whether one came."""
        ...

    async def aclose(self) -> None:
        """Stop listening."""
        ...


@runtime_checkable
class AsyncUpdates(Protocol):
    """A source of hints for a backend's runs."""

    async def subscribe(self, key: RunKey) -> AsyncSubscription:
        """Start listening for hints about ``key``'s log."""
        ...

    async def aclose(self) -> None:
        """Release the listener's resources."""
        ...
