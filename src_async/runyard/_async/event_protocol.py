"""AsyncEventLogStore: a StateStore with a run event log, atomic finalize and follow."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol, runtime_checkable

from runyard._async.protocols import AsyncStateStore
from runyard.events import RunEvent
from runyard.models import RunKey, RunRecord

__all__ = ["AsyncEventLogStore"]


@runtime_checkable
class AsyncEventLogStore(AsyncStateStore, Protocol):
    """A StateStore whose runs each have an append-only event log (see docs/events.md)."""

    terminal_statuses: frozenset[str]

    async def append_event(
        self,
        key: RunKey,
        type: str,
        data: Any,
        *,
        event_id: str | None = None,
        fence: int | None = None,
    ) -> RunEvent:
        """Append an event to the run's log (the store assigns the next seq); one round trip.

        A repeated ``event_id`` with the same type and data returns the stored event.
        Raises EventConflictError (same id, other content), StateNotFoundError, LeaseLostError.
        """
        ...

    async def read_events(self, key: RunKey, *, after: int = 0, limit: int = 100) -> list[RunEvent]:
        """Return up to ``limit`` events with seq > ``after``, in seq order."""
        ...

    async def finalize(
        self,
        key: RunKey,
        *,
        status: str,
        event_type: str,
        event_data: Any,
        expected_version: int | None = None,
        fence: int | None = None,
        event_id: str | None = None,
    ) -> RunRecord:
        """Set a terminal status and append the terminal event in one atomic write.

        Raises InvalidArgumentError, a ValueError (status not terminal or not storable),
        StateConflictError (nothing changed), LeaseLostError, StateNotFoundError,
        EventConflictError, StoreOutcomeUnknown.
        """
        ...

    def follow(
        self, key: RunKey, *, after: int = 0, poll_seconds: float | None = None
    ) -> AsyncIterator[RunEvent]:
        """Yield every event after ``after`` once, in order, until the run is terminal and
        its log drained."""
        ...
