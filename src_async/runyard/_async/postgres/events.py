"""AsyncPostgresEvents: the event log, finalize and follow of AsyncPostgresStateStore."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from runyard._async.follow import follow_events
from runyard._async.updates import AsyncUpdates
from runyard._json import load_json
from runyard._sql import fence_refusal, run_refusal
from runyard.errors import (
    RunFinalizedError,
    StateConflictError,
    StateNotFoundError,
    StatePersistenceError,
    StoreOutcomeUnknown,
)
from runyard.events import (
    TERMINAL_STATUSES,
    EventConflictError,
    RunEvent,
    check_after,
    check_finalize,
    event_body,
    lost_append,
    same_content,
    same_data,
)
from runyard.models import RunKey, RunRecord
from runyard.postgres.events import decode_event
from runyard.postgres.rows import decode_run
from runyard.postgres.schema import StateTables
from runyard.postgres.statements import RUN_COLUMN_COUNT
from runyard.validation import check_write_guards
from runyard.writes import mint_write_id

__all__ = ["AsyncPostgresEvents"]


class AsyncPostgresEvents:
    """Mixin for AsyncPostgresStateStore: each write is one statement; with live updates on,
    that statement also calls ``pg_notify`` (delivered at commit)."""

    tables: StateTables
    max_value_bytes: int
    terminal_statuses: frozenset[str] = TERMINAL_STATUSES
    live_updates: AsyncUpdates | None = None
    # True when time is the server's (no injected Clock): the statements then read the
    # event's time with clock_timestamp() after the run's head row is locked.
    _server_time: bool

    if TYPE_CHECKING:  # provided by the adapter base and the state store class

        def _now(self) -> float: ...

        async def _fetch(
            self, name: str, *args: Any, idempotent: bool = True
        ) -> Sequence[Sequence[Any]]: ...

        async def _probe(self, key: RunKey) -> Sequence[Any] | None: ...

        async def _run_written_by(
            self, lost: StoreOutcomeUnknown, key: RunKey, write_id: str, what: str
        ) -> RunRecord: ...

        _bound: bool

    def _channel(self) -> str | None:
        return self.tables.events if self.live_updates is not None else None

    def _terminal_channel(self, status: str | None) -> str | None:
        """put_run's and patch_run's hint channel: the events' when ``status`` is terminal
        (a follower waiting on it wakes), else None."""
        return self._channel() if status in self.terminal_statuses else None

    def _refuse_terminal(self, key: RunKey, probe: Sequence[Any]) -> None:
        """Raise RunFinalizedError when the probed run (``probe_run``'s row) is terminal."""
        if self._ended(probe):
            raise RunFinalizedError(key.run_id, str(probe[4]))

    def _ended(self, probe: Sequence[Any]) -> bool:
        """Whether the probed run (``probe_run``'s row) is in a terminal status."""
        return probe[4] is not None and probe[4] in self.terminal_statuses

    async def append_event(
        self,
        key: RunKey,
        type: str,
        data: Any,
        *,
        event_id: str | None = None,
        fence: int | None = None,
    ) -> RunEvent:
        """Append an event with the next seq in one statement; a repeated ``event_id``
        returns the stored event (so a lost reply is sent again only when it carries one).

        Raises EventConflictError, StateNotFoundError, RunFinalizedError (the run is in a
        terminal status), LeaseLostError, StatePersistenceError, StoreOutcomeUnknown.
        """
        check_write_guards(None, fence)
        type_, text = event_body(type, data, event_id, max_bytes=self.max_value_bytes)
        now = self._now()
        args = (key.tenant, key.run_id, type_, text, now, event_id, fence)
        extra = (self._channel(), sorted(self.terminal_statuses), self._server_time)
        try:
            rows = await self._fetch("append_event", *args, *extra, idempotent=event_id is not None)
        except StoreOutcomeUnknown as lost:  # only without an event_id: resent with one
            raise lost_append(key.run_id, lost) from lost
        except StatePersistenceError as error:
            if event_id is None or error.reason != "invalid":
                raise
            # A send of the same event_id racing this one committed first: this statement's
            # snapshot predates it, so its insert hit the event_id index. Sent again, the
            # statement sees the stored event (or fails the same way: then raise).
            rows = await self._fetch("append_event", *args, *extra, idempotent=True)
        if rows:
            event = decode_event(key, rows[0])
            # The terminal event's id is finalize's: an append naming it is another event.
            if event.terminal or not same_content(event, type_, text):
                raise EventConflictError(key.run_id, event_id or "", event.seq)
            return event
        probe = await self._probe(key)
        if probe is None or probe[0] is None:
            raise StateNotFoundError(f"run {key.run_id!r} of tenant {key.tenant!r} does not exist")
        self._refuse_terminal(key, probe)
        refusal = fence_refusal(key.run_id, fence, probe, now) if fence is not None else None
        raise refusal or StateConflictError(0, int(probe[0]))

    async def read_events(self, key: RunKey, *, after: int = 0, limit: int = 100) -> list[RunEvent]:
        """Return up to ``limit`` events with seq > ``after``, in order."""
        check_after(after, limit)
        rows = await self._fetch("read_events", key.tenant, key.run_id, after, limit)
        return [decode_event(key, row) for row in rows]

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
        """Set a terminal status and append the terminal event in one statement; a lost reply
        is settled by sending it again when it carries an ``event_id`` (the retry of the
        finalize that ended the run returns the stored run), else by reading back its write id.

        Raises ValueError, RunFinalizedError (already terminal), StateConflictError,
        LeaseLostError, StateNotFoundError, EventConflictError, StoreOutcomeUnknown.
        """
        check_write_guards(expected_version, fence)
        check_finalize(status, self.terminal_statuses)
        type_, text = event_body(event_type, event_data, event_id, max_bytes=self.max_value_bytes)
        now = self._now()
        args = (key.tenant, key.run_id, status, type_, text, now, event_id, fence)
        write_id = mint_write_id()
        extra = (
            expected_version,
            self._channel(),
            sorted(self.terminal_statuses),
            self._server_time,
            write_id,
        )
        try:
            rows = await self._fetch("finalize", *args, *extra, idempotent=event_id is not None)
        except StoreOutcomeUnknown as lost:
            if self._bound:
                raise
            return await self._run_written_by(lost, key, write_id, "finalize")
        probe = None if rows else await self._probe(key)
        if event_id is not None and probe is not None and self._ended(probe):
            # A send of the same event_id may have ended the run while this statement waited
            # on the run row (its snapshot predates that commit): sent again, it sees the
            # stored terminal event and returns the run, or is refused as before.
            rows = await self._fetch("finalize", *args, *extra, idempotent=True)
        if rows:
            row = rows[0]
            prior_type, prior_data, prior_seq, prior_terminal = row[
                RUN_COLUMN_COUNT : RUN_COLUMN_COUNT + 4
            ]
            # A prior event settles a retry only when it is this finalize's: terminal, and
            # with its type and data (an ordinary append's id names another event).
            if prior_type is not None and (
                not prior_terminal
                or prior_type != type_
                or not same_data(load_json(prior_data), load_json(text))
            ):
                raise EventConflictError(key.run_id, event_id or "", int(prior_seq))
            return decode_run(row[:RUN_COLUMN_COUNT])
        if probe is None or probe[0] is None:
            raise StateNotFoundError(f"run {key.run_id!r} of tenant {key.tenant!r} does not exist")
        self._refuse_terminal(key, probe)
        actual = int(probe[0])
        refusal = run_refusal(
            key, actual if expected_version is None else expected_version, fence, probe, now
        )
        raise refusal or StateConflictError(expected_version or actual, actual)

    def follow(
        self, key: RunKey, *, after: int = 0, poll_seconds: float | None = None
    ) -> AsyncIterator[RunEvent]:
        """Yield every event after ``after`` once, in order, until the run is terminal and
        drained. Live updates (when on) wake it early; polling is the backstop.

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
