"""The memory event log core: each run's events in a list, pure and single-threaded.

The twins call it under the state store's lock, so append and finalize are atomic.
"""

from __future__ import annotations

from runyard._json import load_json
from runyard.errors import RunFinalizedError, StateConflictError, StateNotFoundError
from runyard.events import (
    TERMINAL_STATUSES,
    EventConflictError,
    RunEvent,
    check_after,
    same_content,
)
from runyard.memory.state import MemoryStateCore
from runyard.models import CounterDelta, RunKey, RunRecord

__all__ = ["MemoryEventsCore"]


class MemoryEventsCore:
    """The event logs of one MemoryStateCore's runs."""

    def __init__(
        self, state: MemoryStateCore, terminal_statuses: frozenset[str] = TERMINAL_STATUSES
    ) -> None:
        self.state = state
        self.terminal_statuses = terminal_statuses
        self._logs: dict[tuple[str, str], list[RunEvent]] = {}
        self._ids: dict[tuple[str, str], dict[str, int]] = {}

    def _prior(
        self, key: RunKey, event_id: str | None, type_: str, data: str, terminal: bool
    ) -> RunEvent | None:
        """The event a retried ``event_id`` stored (None: a new event); EventConflictError
        when it was stored with other content, or as the terminal event by an append (or as
        an ordinary event by a finalize)."""
        if event_id is None:
            return None
        seq = self._ids.get((key.tenant, key.run_id), {}).get(event_id)
        if seq is None:
            return None
        event = self._logs[(key.tenant, key.run_id)][seq - 1]
        if event.terminal != terminal or not same_content(event, type_, data):
            raise EventConflictError(key.run_id, event_id, seq)
        return event

    def _append(
        self, key: RunKey, type_: str, data: str, event_id: str | None, terminal: bool
    ) -> RunEvent:
        log = self._logs.setdefault((key.tenant, key.run_id), [])
        event = RunEvent(
            tenant=key.tenant,
            run_id=key.run_id,
            seq=len(log) + 1,
            type=type_,
            data=load_json(data),
            at=self.state.clock.now(),
            event_id=event_id,
            terminal=terminal,
        )
        log.append(event)
        if event_id is not None:
            self._ids.setdefault((key.tenant, key.run_id), {})[event_id] = event.seq
        return event

    def _live_run(self, key: RunKey) -> RunRecord:
        """The run, if it exists and is not terminal; else StateNotFoundError/RunFinalizedError."""
        current = self.state.get_run(key)
        if current is None:
            raise StateNotFoundError(f"run {key.run_id!r} of tenant {key.tenant!r} does not exist")
        if current.status in self.terminal_statuses:
            raise RunFinalizedError(key.run_id, current.status)
        return current

    def append(
        self, key: RunKey, type_: str, data: str, *, event_id: str | None, fence: int | None
    ) -> RunEvent:
        """Append (or return the event a retried ``event_id`` stored)."""
        prior = self._prior(key, event_id, type_, data, False)
        if prior is not None:
            return prior.model_copy()
        self._live_run(key)
        self.state._check_fence(key, fence)
        return self._append(key, type_, data, event_id, False).model_copy()

    def delete_run(self, key: RunKey, *, expected_version: int | None, fence: int | None) -> bool:
        """Delete the run (MemoryStateCore.delete_run) and, when it existed, its log."""
        deleted = self.state.delete_run(key, expected_version=expected_version, fence=fence)
        if deleted:
            self._logs.pop((key.tenant, key.run_id), None)
            self._ids.pop((key.tenant, key.run_id), None)
        return deleted

    def delete_session(self, tenant: str, session_id: str, *, cascade: bool) -> bool:
        """Delete the session (MemoryStateCore.delete_session) and the logs of the runs it
        deleted."""
        doomed = self.state.session_runs(tenant, session_id) if cascade else []
        deleted = self.state.delete_session(tenant, session_id, cascade=cascade)
        for run_id in doomed:
            self._logs.pop((tenant, run_id), None)
            self._ids.pop((tenant, run_id), None)
        return deleted

    def read(self, key: RunKey, *, after: int, limit: int) -> list[RunEvent]:
        """Events with seq > ``after``, at most ``limit``."""
        check_after(after, limit)
        log = self._logs.get((key.tenant, key.run_id), [])
        return [e.model_copy() for e in log[after : after + limit]]

    def finalize(
        self,
        key: RunKey,
        *,
        status: str,
        type_: str,
        data: str,
        expected_version: int | None,
        fence: int | None,
        event_id: str | None,
    ) -> RunRecord:
        """Set ``status`` and append the terminal event, or change nothing."""
        if self._prior(key, event_id, type_, data, True) is not None:
            current = self.state.get_run(key)
            if current is None:
                raise StateNotFoundError(f"run {key.run_id!r} of tenant {key.tenant!r} is gone")
            return current
        actual = self._live_run(key).version
        if expected_version is not None and expected_version != actual:
            raise StateConflictError(expected_version, actual)
        # patch_run checks the fence before it changes anything.
        record = self.state.patch_run(key, CounterDelta(), status=status, fence=fence)
        self._append(key, type_, data, event_id, True)
        return record
