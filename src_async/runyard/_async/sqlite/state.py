"""AsyncSqliteStateStore: runs, sessions and fenced run leases in a SQLite file."""

from __future__ import annotations

from time import monotonic
from typing import Any

from runyard._async.local_updates import AsyncLocalUpdates
from runyard._async.pager import AsyncRunIteration
from runyard._async.sqlite._adapter import _AsyncSqliteAdapter, _AsyncTransaction
from runyard._async.sqlite.events import AsyncSqliteEvents
from runyard._async.sqlite.leases import AsyncSqliteRunLeases
from runyard._async.sqlite.retention import AsyncSqliteStateRetention
from runyard._flavours import async_sleep
from runyard._json import dump_json
from runyard._sql import fence_refusal, list_runs_name
from runyard.capabilities import StoreCapabilities
from runyard.errors import (
    ConfigurationError,
    StateConflictError,
    StateNotFoundError,
)
from runyard.keys import decode_cursor, encode_cursor, validate_identifier
from runyard.models import CounterDelta, RunKey, RunPage, RunRecord, SessionRecord
from runyard.sqlite.rows import (
    decode_run,
    decode_session,
)
from runyard.sqlite.statements_events import event_statements
from runyard.sqlite.statements_state import update_run_name
from runyard.validation import (
    COUNTER_FIELDS,
    DEFAULT_STATUS,
    check_delta,
    check_flag,
    check_limit,
    check_patch_result,
    check_status,
    check_write_guards,
    session_in_use,
    session_still_growing,
)

__all__ = ["AsyncSqliteStateStore"]

# Runs (with their event logs) one transaction of delete_session(cascade=True) deletes at most.
SESSION_DELETE_BATCH = 500
# Rounds of batches and the final check before delete_session gives up on a growing session.
_SESSION_DELETE_ATTEMPTS = 3


class AsyncSqliteStateStore(
    AsyncSqliteRunLeases,
    AsyncSqliteStateRetention,
    AsyncSqliteEvents,
    _AsyncSqliteAdapter,
    AsyncRunIteration,
):
    """A StateStore in a SQLite file: every write is one ``BEGIN IMMEDIATE`` transaction.

    ``await AsyncSqliteStateStore.open("runs.db", create_schema=True)``; several processes on
    one host may share the file. Time is the database's unless a ``clock`` is injected.
    Each run has an append-only event log (``append_event``, ``finalize``, ``follow``).
    """

    _kind = "state"
    # delete_session(cascade=True)'s batch (a test may set a smaller one on a store).
    _session_batch = SESSION_DELETE_BATCH
    capabilities = StoreCapabilities(
        version=1,
        fenced_writes=True,
        retry_ids=True,
        recovery=True,
        event_log=True,
        atomic_finalize=True,
        deployment="single_host",
    )

    @classmethod
    def _check_options(cls, options: dict[str, Any]) -> None:
        super()._check_options(options)
        live = options.get("live_updates")
        if not (live is None or isinstance(live, bool | AsyncLocalUpdates)):
            hub = AsyncLocalUpdates.__name__
            raise ConfigurationError(
                f"live_updates must be True, False, None or a {hub}, not {type(live).__name__}",
                fields=("live_updates",),
            )

    def __init__(
        self, *args: Any, live_updates: bool | AsyncLocalUpdates | None = None, **kwargs: Any
    ) -> None:
        """``live_updates``: None/False: followers poll; True: a hub of this store's own wakes
        followers in this process at every append and finalize; an AsyncLocalUpdates instance
        is shared (with other stores on the same file in this process). Followers in other
        processes always poll."""
        type(self)._check_options({"live_updates": live_updates})
        super().__init__(*args, **kwargs)
        self._sql = event_statements(self.tables)
        self.live_updates = AsyncLocalUpdates() if live_updates is True else live_updates or None

    # -- runs --------------------------------------------------------------------------------
    async def put_run(
        self,
        key: RunKey,
        blob: Any,
        *,
        expected_version: int,
        status: str | None = None,
        session_id: str | None = None,
        fence: int | None = None,
    ) -> RunRecord:
        """Write the run iff its version is ``expected_version`` (0 creates it).

        Raises StateConflictError(expected, actual), LeaseLostError for a stale ``fence``,
        StatePersistenceError for a value that is not storable JSON (before writing).
        """
        check_write_guards(expected_version, fence, version_required=True)
        check_status(status)
        text = dump_json(blob, max_bytes=self.max_value_bytes, what="run blob")
        if session_id is not None:
            validate_identifier(session_id, "session_id")
        record = await self._put_run(key, text, expected_version, status, session_id, fence)
        self._terminal_hint(key, status)
        return record

    async def _put_run(
        self,
        key: RunKey,
        text: str,
        expected_version: int,
        status: str | None,
        session_id: str | None,
        fence: int | None,
    ) -> RunRecord:
        async with self._write() as tx:
            if fence is not None:
                await self._check_fence(tx, key, fence, await tx.now(), expected_version)
            if expected_version == 0:
                statement, status, expected = "create_run", status or DEFAULT_STATUS, None
            else:
                status, expected = status or None, expected_version
                statement = update_run_name(session_id, status)
            rows = await tx.finish_read(
                statement,
                "get_run",
                tenant=key.tenant,
                run_id=key.run_id,
                blob=text,
                session_id=session_id,
                now=tx.stamp(),
                status=status,
                expected=expected,
            )
            if rows:
                return decode_run(rows[0])
            probe = await tx.fetch("probe_run", tenant=key.tenant, run_id=key.run_id)
            raise StateConflictError(expected_version, int(probe[0][0] or 0))

    async def _check_fence(
        self,
        tx: _AsyncTransaction,
        key: RunKey,
        fence: int,
        now: float,
        expected_version: int | None,
    ) -> int:
        """Refuse (version first, then fence) inside the write; return the stored version."""
        probe = (await tx.fetch("probe_run", tenant=key.tenant, run_id=key.run_id))[0]
        actual = int(probe[0] or 0)
        if expected_version is not None and actual != expected_version:
            raise StateConflictError(expected_version, actual)
        refusal = fence_refusal(key.run_id, fence, probe, now)
        if refusal is not None:
            raise refusal
        return actual

    async def patch_run(
        self,
        key: RunKey,
        delta: CounterDelta,
        *,
        status: str | None = None,
        fence: int | None = None,
    ) -> RunRecord:
        """Add ``delta`` to the counter columns and bump the version.

        Concurrent patches all land. Raises StateNotFoundError, LeaseLostError, and
        InvalidArgumentError naming the counter when one would pass MAX_COUNTER (the
        statement's own guard: nothing changes).
        """
        check_write_guards(None, fence)
        check_delta(delta)
        check_status(status)
        record = await self._patch_run(key, delta, status, fence)
        self._terminal_hint(key, status)
        return record

    async def _patch_run(
        self, key: RunKey, delta: CounterDelta, status: str | None, fence: int | None
    ) -> RunRecord:
        async with self._write() as tx:
            if fence is not None:
                probe = await tx.fetch("probe_run", tenant=key.tenant, run_id=key.run_id)
                if probe[0][0] is not None:
                    await self._check_fence(tx, key, fence, await tx.now(), None)
            rows = await tx.finish_read(
                "patch_run" if not status else "patch_run_status",
                "get_run",
                tenant=key.tenant,
                run_id=key.run_id,
                input_tokens=delta.input_tokens,
                output_tokens=delta.output_tokens,
                cost_micros=delta.cost_micros,
                iterations=delta.iterations,
                cursor=delta.cursor,
                status=status or None,
                now=tx.stamp(),
            )
            if rows:
                return decode_run(rows[0])
            stored = await tx.fetch("get_run", tenant=key.tenant, run_id=key.run_id)
            if stored:
                # Refused by the range guard: the write lock is still held, so the run shows why.
                run = decode_run(stored[0])
                check_patch_result(run.model_dump(include=set(COUNTER_FIELDS)), delta)
            raise StateNotFoundError(f"run {key.run_id!r} of tenant {key.tenant!r} does not exist")

    async def get_run(self, key: RunKey) -> RunRecord | None:
        """Return the run, or None."""
        async with self._read() as tx:
            rows = await tx.fetch("get_run", tenant=key.tenant, run_id=key.run_id)
        return decode_run(rows[0]) if rows else None

    async def delete_run(
        self, key: RunKey, *, expected_version: int | None = None, fence: int | None = None
    ) -> bool:
        """Delete the run and its event log; return whether it existed.

        Raises StateConflictError, LeaseLostError.
        """
        check_write_guards(expected_version, fence)
        async with self._write() as tx:
            probe = (await tx.fetch("probe_run", tenant=key.tenant, run_id=key.run_id))[0]
            if probe[0] is None:
                if expected_version:
                    raise StateConflictError(expected_version, 0)
                return False
            if expected_version is not None and expected_version != int(probe[0]):
                raise StateConflictError(expected_version, int(probe[0]))
            if fence is not None:
                await self._check_fence(tx, key, fence, await tx.now(), None)
            await tx.fetch("delete_events", tenant=key.tenant, run_id=key.run_id)
            await tx.fetch("delete_run", tenant=key.tenant, run_id=key.run_id)
            return True

    async def list_runs(
        self,
        tenant: str,
        *,
        status: str | None = None,
        session_id: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> RunPage:
        """Return a page of the tenant's runs in creation order (by ``seq``)."""
        validate_identifier(tenant, "tenant")
        check_status(status)
        if session_id is not None:
            validate_identifier(session_id, "session_id")
        check_limit(limit)
        after = decode_cursor(cursor, tenant)
        async with self._read() as tx:
            rows = await tx.fetch(
                list_runs_name(status, session_id),
                tenant=tenant,
                after=after,
                status=status,
                session_id=session_id,
                limit=limit + 1,
            )
        items = [decode_run(r) for r in rows[:limit]]
        more = len(rows) > limit
        return RunPage(
            items=items, next_cursor=encode_cursor(items[-1].seq, tenant) if more else None
        )

    # -- sessions ----------------------------------------------------------------------------
    async def put_session(
        self, tenant: str, session_id: str, blob: Any, *, expected_version: int
    ) -> SessionRecord:
        """Write the session iff its version is ``expected_version`` (0 creates it).

        Raises StateConflictError, StatePersistenceError.
        """
        check_write_guards(expected_version, version_required=True)
        validate_identifier(tenant, "tenant")
        validate_identifier(session_id, "session_id")
        text = dump_json(blob, max_bytes=self.max_value_bytes, what="session blob")
        async with self._write() as tx:
            params = {"tenant": tenant, "session_id": session_id, "blob": text}
            now = tx.stamp()
            if expected_version == 0:
                rows = await tx.finish("create_session", now=now, **params)
            else:
                rows = await tx.finish(
                    "update_session", now=now, expected=expected_version, **params
                )
            if rows:
                return decode_session(rows[0])
            found = await tx.fetch("session_version", tenant=tenant, session_id=session_id)
            actual = int(found[0][0]) if found else 0
            raise StateConflictError(expected_version, actual, what="session")

    async def get_session(self, tenant: str, session_id: str) -> SessionRecord | None:
        """Return the session, or None."""
        validate_identifier(tenant, "tenant")
        validate_identifier(session_id, "session_id")
        async with self._read() as tx:
            rows = await tx.fetch("get_session", tenant=tenant, session_id=session_id)
        return decode_session(rows[0]) if rows else None

    async def delete_session(self, tenant: str, session_id: str, *, cascade: bool = False) -> bool:
        """Delete the session (and its runs and their event logs when ``cascade``).

        With ``cascade`` the runs go first with their event logs, SESSION_DELETE_BATCH per
        transaction (the lock let go in between), then the session, in a transaction that
        refuses while runs remain; a cascade cut short leaves fewer runs (call it again).
        Raises StateInUseError (runs left, no ``cascade``), StatePersistenceError("contended").
        """
        check_flag(cascade, "cascade")
        validate_identifier(tenant, "tenant")
        validate_identifier(session_id, "session_id")
        ids = {"tenant": tenant, "session_id": session_id}
        runs_deleted = 0
        for _ in range(_SESSION_DELETE_ATTEMPTS):
            while cascade:
                started = monotonic()
                async with self._write() as tx:
                    await tx.fetch("delete_session_events", batch=self._session_batch, **ids)
                    gone = await tx.fetch("delete_session_runs", batch=self._session_batch, **ids)
                runs_deleted += len(gone)
                if len(gone) < self._session_batch:
                    break
                # The lock stays free as long as the batch held it: SQLite's busy handler has
                # other connections' writers poll (sleeps of up to 100 ms), so a lock taken
                # again at once starves them for the whole cascade (measured: a second).
                await async_sleep(monotonic() - started)
            async with self._write() as tx:
                runs = int((await tx.fetch("count_session_runs", **ids))[0][0])
                if not runs:
                    deleted = await tx.finish("delete_session", **ids)
                    return bool(deleted) or bool(runs_deleted)
            if not cascade:
                raise session_in_use(session_id, runs)
        raise session_still_growing(session_id)
