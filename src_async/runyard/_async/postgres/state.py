"""AsyncPostgresStateStore: runs, sessions and fenced run leases in PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from runyard._async.pager import AsyncRunIteration
from runyard._async.postgres._adapter import Source, _AsyncPostgresAdapter
from runyard._async.postgres.events import AsyncPostgresEvents
from runyard._async.postgres.leases import AsyncPostgresRunLeases
from runyard._async.postgres.retention import AsyncPostgresStateRetention
from runyard._async.postgres.updates import AsyncPostgresUpdates, own_updates
from runyard._async.postgres.writes import AsyncPostgresWrites
from runyard._json import dump_json
from runyard._sql import fence_refusal, list_runs_name, run_refusal
from runyard.capabilities import StoreCapabilities
from runyard.errors import (
    StateConflictError,
    StateNotFoundError,
    StoreOutcomeUnknown,
)
from runyard.keys import decode_cursor, encode_cursor, validate_identifier
from runyard.models import CounterDelta, RunKey, RunPage, RunRecord, SessionRecord
from runyard.postgres.rows import (
    decode_run,
    decode_session,
)
from runyard.postgres.statements import RUN_COLUMN_COUNT
from runyard.postgres.writes import run_target, session_target
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
from runyard.writes import mint_write_id

__all__ = ["AsyncPostgresStateStore"]

# The most runs one statement of a cascading delete_session removes.
DELETE_BATCH = 500


class AsyncPostgresStateStore(
    AsyncPostgresEvents,
    AsyncPostgresWrites,
    AsyncPostgresRunLeases,
    AsyncPostgresStateRetention,
    _AsyncPostgresAdapter,
    AsyncRunIteration,
):
    """A StateStore in PostgreSQL: each write is one statement, CAS on version and fence.

    Build it on a psycopg ``AsyncConnectionPool``/``AsyncConnection`` or any executor;
    ``open()`` and ``from_settings()`` also run verify(). ``bound(connection)`` joins the
    caller's transaction.
    """

    _kind = "state"
    capabilities = StoreCapabilities(
        version=1,
        fenced_writes=True,
        retry_ids=True,
        transactional=True,
        recovery=True,
        event_log=True,
        atomic_finalize=True,
        deployment="multi_server",
    )

    def __init__(
        self,
        source: Source,
        *,
        live_updates: bool | AsyncPostgresUpdates | None = None,
        **options: Any,
    ) -> None:
        """``live_updates``: None/False poll; True opens a LISTEN connection of its own (closed
        by aclose()); an AsyncPostgresUpdates instance is shared and left open."""
        super().__init__(source, **options)
        self.live_updates = own_updates(live_updates, source, self.tables)
        self._owns_updates = live_updates is True

    def _relations(self) -> Sequence[str]:
        return self.tables.state_relations()

    async def aclose(self) -> None:
        """Close the pool when this store opened it, and the live updates it opened."""
        if self._owns_updates and not self._bound and self.live_updates is not None:
            self._owns_updates = False
            await self.live_updates.aclose()
        await super().aclose()

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
        """Write the run iff its version is ``expected_version`` (0 creates it), in one statement.

        Each call carries a write id the row keeps; a lost reply is settled by reading it back
        (runyard.writes). Raises StateConflictError(expected, actual), LeaseLostError for a
        stale ``fence``, StatePersistenceError for a value no backend stores (before sending),
        and StoreOutcomeUnknown when the reply was lost and reading back cannot settle it.
        """
        check_write_guards(expected_version, fence, version_required=True)
        check_status(status)
        text = dump_json(blob, max_bytes=self.max_value_bytes, what="run blob")
        if session_id is not None:
            validate_identifier(session_id, "session_id")
        write_id = mint_write_id()
        send = partial(
            self._put_run, key, text, expected_version, status, session_id, fence, write_id
        )
        try:
            return await send()
        except StoreOutcomeUnknown as lost:
            if self._bound:
                raise
            return await self._settle_versioned(
                lost, run_target(key), send, expected_version, write_id, may_resend=True
            )

    async def _put_run(
        self,
        key: RunKey,
        text: str,
        expected_version: int,
        status: str | None,
        session_id: str | None,
        fence: int | None,
        write_id: str,
    ) -> RunRecord:
        now = self._now()
        if expected_version == 0:
            status = status or DEFAULT_STATUS
        rows = await self._fetch(
            "put_run",
            key.tenant,
            key.run_id,
            text,
            status or None,
            session_id,
            now,
            fence,
            expected_version,
            write_id,
            self._terminal_channel(status),
            idempotent=False,
        )
        row = rows[0]
        if row[0] is not None:
            return decode_run(row[:RUN_COLUMN_COUNT])
        # Refused: the same statement read what explains it (its snapshot's version and lease).
        refusal = run_refusal(key, expected_version, fence, row[RUN_COLUMN_COUNT:], now)
        if refusal is None:
            # The snapshot still showed the expected version and a good fence: a concurrent
            # write committed while this one waited. Read the winner's (a second round trip).
            refusal = run_refusal(key, expected_version, fence, await self._probe(key), now)
        raise refusal or StateConflictError(expected_version, expected_version)

    async def _probe(self, key: RunKey) -> Sequence[Any] | None:
        rows = await self._fetch("probe_run", key.tenant, key.run_id)
        return rows[0] if rows else None

    async def patch_run(
        self,
        key: RunKey,
        delta: CounterDelta,
        *,
        status: str | None = None,
        fence: int | None = None,
    ) -> RunRecord:
        """Add ``delta`` to the counter columns and bump the version, in one statement.

        Concurrent patches all land. A lost reply is settled by reading back this patch's
        write id (never by sending it again). Raises StateNotFoundError, LeaseLostError, and
        StoreOutcomeUnknown when the reply was lost and the run's last write is another.
        """
        check_write_guards(None, fence)
        check_delta(delta)
        check_status(status)
        now = self._now()
        write_id = mint_write_id()
        try:
            rows = await self._fetch(
                "patch_run",
                key.tenant,
                key.run_id,
                delta.input_tokens,
                delta.output_tokens,
                delta.cost_micros,
                delta.iterations,
                delta.cursor,
                status or None,
                now,
                fence,
                write_id,
                self._terminal_channel(status),
                idempotent=False,
            )
        except StoreOutcomeUnknown as lost:
            if self._bound:
                raise
            return await self._run_written_by(lost, key, write_id, "patch_run")
        if rows:
            return decode_run(rows[0])
        probe = await self._probe(key)
        if probe is None or probe[0] is None:
            raise StateNotFoundError(f"run {key.run_id!r} of tenant {key.tenant!r} does not exist")
        refusal = fence_refusal(key.run_id, fence, probe, now) if fence is not None else None
        if refusal is None:
            # Refused by the range guard: counters only grow, so the stored run still shows why.
            run = await self.get_run(key)
            if run is not None:
                check_patch_result(run.model_dump(include=set(COUNTER_FIELDS)), delta)
        raise refusal or StateNotFoundError(
            f"run {key.run_id!r} of tenant {key.tenant!r} does not exist"
        )

    async def get_run(self, key: RunKey) -> RunRecord | None:
        """Return the run, or None."""
        rows = await self._fetch("get_run", key.tenant, key.run_id)
        return decode_run(rows[0]) if rows else None

    async def delete_run(
        self, key: RunKey, *, expected_version: int | None = None, fence: int | None = None
    ) -> bool:
        """Delete the run and its event log (one statement); return whether it existed.

        The run's last write id goes to the tombstones table (until ``prune()`` removes it
        after runyard.writes.TOMBSTONE_SECONDS), so a put whose reply was lost is not sent
        again over the delete. Raises StateConflictError, LeaseLostError.
        """
        check_write_guards(expected_version, fence)
        now = self._now()
        rows = await self._fetch(
            "delete_run", key.tenant, key.run_id, expected_version, fence, now, idempotent=False
        )
        if rows:
            return True
        probe = await self._probe(key)
        actual = probe[0] if probe else None
        if actual is None:
            if expected_version:
                raise StateConflictError(expected_version, 0)
            return False
        if expected_version is not None and expected_version != actual:
            raise StateConflictError(expected_version, int(actual))
        refusal = fence_refusal(key.run_id, fence, probe, now) if fence is not None else None
        if refusal is not None:
            raise refusal
        return False

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
        name = list_runs_name(status, session_id)
        rows = await self._fetch(name, tenant, after, status, session_id, limit + 1)
        items = [decode_run(r) for r in rows[:limit]]
        more = len(rows) > limit
        return RunPage(
            items=items, next_cursor=encode_cursor(items[-1].seq, tenant) if more else None
        )

    # -- sessions ----------------------------------------------------------------------------
    async def put_session(
        self, tenant: str, session_id: str, blob: Any, *, expected_version: int
    ) -> SessionRecord:
        """Write the session iff its version is ``expected_version`` (0 creates it), in one
        statement.

        A lost reply is settled by reading back the call's write id. Raises
        StateConflictError, and StoreOutcomeUnknown when the reply was lost and reading back
        cannot settle it.
        """
        check_write_guards(expected_version, version_required=True)
        validate_identifier(tenant, "tenant")
        validate_identifier(session_id, "session_id")
        text = dump_json(blob, max_bytes=self.max_value_bytes, what="session blob")
        write_id = mint_write_id()
        send = partial(self._put_session, tenant, session_id, text, expected_version, write_id)
        try:
            return await send()
        except StoreOutcomeUnknown as lost:
            if self._bound:
                raise
            return await self._settle_versioned(
                lost,
                session_target(tenant, session_id),
                send,
                expected_version,
                write_id,
                may_resend=True,
            )

    async def _put_session(
        self, tenant: str, session_id: str, text: str, expected_version: int, write_id: str
    ) -> SessionRecord:
        rows = await self._fetch(
            "put_session",
            tenant,
            session_id,
            text,
            self._now(),
            expected_version,
            write_id,
            idempotent=False,
        )
        row = rows[0]
        if row[0] is not None:
            return decode_session(row[:6])
        actual = int(row[6] or 0)
        if actual == expected_version:
            # A concurrent write committed while this one waited: read the winner's version.
            current = await self.get_session(tenant, session_id)
            actual = current.version if current else 0
        raise StateConflictError(expected_version, actual, what="session")

    async def get_session(self, tenant: str, session_id: str) -> SessionRecord | None:
        """Return the session, or None."""
        validate_identifier(tenant, "tenant")
        validate_identifier(session_id, "session_id")
        rows = await self._fetch("get_session", tenant, session_id)
        return decode_session(rows[0]) if rows else None

    async def delete_session(self, tenant: str, session_id: str, *, cascade: bool = False) -> bool:
        """Delete the session (and its runs and their event logs when ``cascade``).

        With ``cascade`` the runs go first, with their event logs, in statements of at most
        DELETE_BATCH runs each (no statement's work grows with the number of runs), then the
        session with a statement that refuses while runs remain. Each deleted record's last
        write id goes to the tombstones (as delete_run's). Raises StateInUseError when
        it still has runs and ``cascade`` is False, StatePersistenceError("contended") when
        runs keep being added.
        """
        check_flag(cascade, "cascade")
        validate_identifier(tenant, "tenant")
        validate_identifier(session_id, "session_id")
        runs_deleted = 0
        for _ in range(3):
            while cascade:
                batch = await self._fetch(
                    "delete_session_runs",
                    tenant,
                    session_id,
                    DELETE_BATCH,
                    self._now(),
                    idempotent=False,
                )
                runs_deleted += len(batch)
                if len(batch) < DELETE_BATCH:
                    break
            rows = await self._fetch(
                "delete_session", tenant, session_id, False, self._now(), idempotent=False
            )
            _, sessions_deleted, runs_before = (int(v) for v in rows[0])
            if not runs_before:
                return bool(sessions_deleted or runs_deleted)
            if not cascade:
                raise session_in_use(session_id, runs_before)
        raise session_still_growing(session_id)
