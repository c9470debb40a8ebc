"""AsyncSqliteEvents: the event log, finalize and follow of AsyncSqliteStateStore."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from runyard._async.follow import follow_events
from runyard._async.local_updates import AsyncLocalUpdates
from runyard._sql import fence_refusal, run_refusal
from runyard.errors import RunFinalizedError, StateConflictError, StateNotFoundError
from runyard.events import (
    TERMINAL_STATUSES,
    EventConflictError,
    RunEvent,
    check_after,
    check_finalize,
    event_body,
    same_content,
)
from runyard.models import RunKey, RunRecord
from runyard.sqlite.rows import decode_event, decode_run
from runyard.validation import check_write_guards

if TYPE_CHECKING:
    from runyard._async.sqlite._adapter import _AsyncTransaction

__all__ = ["AsyncSqliteEvents"]


class AsyncSqliteEvents:
    """Mixin for AsyncSqliteStateStore: every event write is one ``BEGIN IMMEDIATE``
    transaction, so its checks and its write see no other writer in between.

    SQLite has no notification channel: with ``live_updates`` on, an in-process hub wakes
    the followers of this process after each committed append and finalize; followers in
    other processes poll (``follow(poll_seconds=...)``), and polling is every follower's
    backstop.
    """

    max_value_bytes: int
    terminal_statuses: frozenset[str] = TERMINAL_STATUSES
    live_updates: AsyncLocalUpdates | None = None

    if TYPE_CHECKING:  # provided by the adapter base

        def _write(self) -> _AsyncTransaction: ...

        def _read(self) -> _AsyncTransaction: ...

    def _terminal_hint(self, key: RunKey, status: str | None) -> None:
        """Wake followers of ``key`` after put_run or patch_run wrote a terminal ``status``."""
        if status in self.terminal_statuses:
            self._hint(key)

    def _hint(self, key: RunKey) -> None:
        """Wake this process's followers of ``key`` (after the commit: they read what it wrote)."""
        if self.live_updates is not None:
            self.live_updates.publish(key)

    async def _prior(
        self,
        tx: _AsyncTransaction,
        key: RunKey,
        event_id: str | None,
        type_: str,
        text: str,
        terminal: bool,
    ) -> RunEvent | None:
        """The event a retried ``event_id`` stored (None: a new event); EventConflictError
        when it was stored with other content, or as the terminal event by an append (or as
        an ordinary event by a finalize)."""
        if event_id is None:
            return None
        rows = await tx.fetch(
            "prior_event", tenant=key.tenant, run_id=key.run_id, event_id=event_id
        )
        if not rows:
            return None
        event = decode_event(key, rows[0])
        if event.terminal != terminal or not same_content(event, type_, text):
            raise EventConflictError(key.run_id, event_id, event.seq)
        return event

    async def _live_probe(self, tx: _AsyncTransaction, key: RunKey) -> Sequence[Any]:
        """The run's ``(version, epoch, holder, expires_at, status)``; StateNotFoundError when
        it does not exist, RunFinalizedError when its status is terminal."""
        probe = (await tx.fetch("probe_event_run", tenant=key.tenant, run_id=key.run_id))[0]
        if probe[0] is None:
            raise StateNotFoundError(f"run {key.run_id!r} of tenant {key.tenant!r} does not exist")
        if probe[4] in self.terminal_statuses:
            raise RunFinalizedError(key.run_id, str(probe[4]))
        return probe

    async def append_event(
        self,
        key: RunKey,
        type: str,
        data: Any,
        *,
        event_id: str | None = None,
        fence: int | None = None,
    ) -> RunEvent:
        """Append an event with the next seq; a repeated ``event_id`` returns the stored event.

        Raises EventConflictError, StateNotFoundError, RunFinalizedError (the run is in a
        terminal status), LeaseLostError, StatePersistenceError.
        """
        check_write_guards(None, fence)
        type_, text = event_body(type, data, event_id, max_bytes=self.max_value_bytes)
        async with self._write() as tx:
            prior = await self._prior(tx, key, event_id, type_, text, False)
            if prior is not None:
                return prior
            probe = await self._live_probe(tx, key)
            if fence is not None:
                refusal = fence_refusal(key.run_id, fence, probe, await tx.now())
                if refusal is not None:
                    raise refusal
            rows = await tx.finish(
                "append_event",
                tenant=key.tenant,
                run_id=key.run_id,
                type=type_,
                data=text,
                now=tx.stamp(),
                event_id=event_id,
                terminal=0,
            )
        self._hint(key)
        return decode_event(key, rows[0])

    async def read_events(self, key: RunKey, *, after: int = 0, limit: int = 100) -> list[RunEvent]:
        """Return up to ``limit`` events with seq > ``after``, in order."""
        check_after(after, limit)
        async with self._read() as tx:
            rows = await tx.fetch(
                "read_events", tenant=key.tenant, run_id=key.run_id, after=after, limit=limit
            )
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
        """Set a terminal status and append the terminal event in one transaction; a retried
        ``event_id`` returns the stored run.

        Raises ValueError, RunFinalizedError (already terminal), StateConflictError,
        LeaseLostError, StateNotFoundError, EventConflictError.
        """
        check_write_guards(expected_version, fence)
        check_finalize(status, self.terminal_statuses)
        type_, text = event_body(event_type, event_data, event_id, max_bytes=self.max_value_bytes)
        async with self._write() as tx:
            ids = {"tenant": key.tenant, "run_id": key.run_id}
            if await self._prior(tx, key, event_id, type_, text, True) is not None:
                stored = await tx.fetch("get_run", **ids)
                if not stored:
                    raise StateNotFoundError(f"run {key.run_id!r} of tenant {key.tenant!r} is gone")
                return decode_run(stored[0])
            probe = await self._live_probe(tx, key)
            actual = int(probe[0])
            expected = actual if expected_version is None else expected_version
            now = await tx.now() if fence is not None else 0.0  # only a fence needs the time
            refusal = run_refusal(key, expected, fence, probe, now)
            if refusal is not None:
                raise refusal
            rows = await tx.fetch("finalize_run", status=status, now=tx.stamp(), **ids)
            if not rows:  # the write lock is held since the probe: it cannot vanish
                raise StateConflictError(expected, actual)
            await tx.finish(
                "append_event",
                type=type_,
                data=text,
                now=tx.stamp(),
                event_id=event_id,
                terminal=1,
                **ids,
            )
        self._hint(key)
        return decode_run(rows[0])

    def follow(
        self, key: RunKey, *, after: int = 0, poll_seconds: float | None = None
    ) -> AsyncIterator[RunEvent]:
        """Yield every event after ``after`` once, in order, until the run is terminal and
        drained. The follower polls every ``poll_seconds``.

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
