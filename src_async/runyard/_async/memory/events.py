"""AsyncMemoryEvents: the event log, finalize and follow of AsyncMemoryStateStore."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from runyard._async.follow import follow_events
from runyard._async.memory.updates import AsyncMemoryUpdates
from runyard._flavours import AsyncLock
from runyard.events import TERMINAL_STATUSES, RunEvent, check_finalize, event_body
from runyard.memory.events import MemoryEventsCore
from runyard.memory.state import MemoryStateCore
from runyard.models import RunKey, RunRecord
from runyard.validation import check_write_guards

__all__ = ["AsyncMemoryEvents"]


class AsyncMemoryEvents:
    """Mixin for AsyncMemoryStateStore: each run's append-only log, kept in this process.

    Followers poll every ``poll_seconds``. With ``live_updates`` (an AsyncMemoryUpdates; off,
    None, by default: ``live_updates=True`` on the store turns it on) they are also woken
    in-process on every append and finalize, and still poll as a backstop.
    """

    _core: MemoryStateCore
    _lock: AsyncLock
    terminal_statuses: frozenset[str] = TERMINAL_STATUSES
    live_updates: AsyncMemoryUpdates | None = None

    def _events(self) -> MemoryEventsCore:
        # Built on first use, under the store's lock, so the store's __init__ stays as it is.
        events: MemoryEventsCore | None = self.__dict__.get("_events_core")
        if events is None:
            events = self.__dict__["_events_core"] = MemoryEventsCore(
                self._core, self.terminal_statuses
            )
        return events

    def _hint(self, key: RunKey) -> None:
        if self.live_updates is not None:
            self.live_updates.publish(key)

    def _terminal_hint(self, key: RunKey, status: str | None) -> None:
        """Wake followers of ``key`` after put_run or patch_run wrote a terminal ``status``."""
        if status in self.terminal_statuses:
            self._hint(key)

    async def append_event(
        self,
        key: RunKey,
        type: str,
        data: Any,
        *,
        event_id: str | None = None,
        fence: int | None = None,
    ) -> RunEvent:
        """Append an event (the next seq); a repeated ``event_id`` returns the stored one.

        Raises EventConflictError, StateNotFoundError, RunFinalizedError (the run is in a
        terminal status), LeaseLostError, StatePersistenceError.
        """
        check_write_guards(None, fence)
        type_, text = event_body(type, data, event_id, max_bytes=self._core.max_value_bytes)
        async with self._lock:
            event = self._events().append(key, type_, text, event_id=event_id, fence=fence)
        self._hint(key)
        return event

    async def read_events(self, key: RunKey, *, after: int = 0, limit: int = 100) -> list[RunEvent]:
        """Return up to ``limit`` events with seq > ``after``, in order."""
        async with self._lock:
            return self._events().read(key, after=after, limit=limit)

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
        """Set a terminal status and append the terminal event atomically; a retried
        ``event_id`` returns the stored run.

        Raises ValueError, RunFinalizedError (already terminal), StateConflictError,
        LeaseLostError, StateNotFoundError, EventConflictError.
        """
        check_write_guards(expected_version, fence)
        check_finalize(status, self.terminal_statuses)
        type_, text = event_body(
            event_type, event_data, event_id, max_bytes=self._core.max_value_bytes
        )
        async with self._lock:
            record = self._events().finalize(
                key,
                status=status,
                type_=type_,
                data=text,
                expected_version=expected_version,
                fence=fence,
                event_id=event_id,
            )
        self._hint(key)
        return record

    def follow(
        self, key: RunKey, *, after: int = 0, poll_seconds: float | None = None
    ) -> AsyncIterator[RunEvent]:
        """Yield every event after ``after`` once, in order, until the run is terminal and
        drained.

        Raises ValueError (at the call) for a negative ``after`` or a ``poll_seconds`` that
        is not positive; iterating raises StateNotFoundError when the run does not exist or
        is deleted while followed.
        """
        return follow_events(
            self,  # type: ignore[arg-type]
            key,
            after=after,
            poll_seconds=poll_seconds,
            updates=self.live_updates,
        )
