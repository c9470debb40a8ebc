"""AsyncPostgresStateStore: runs, sessions and fenced run leases in PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runyard._async.pager import AsyncRunPager
from runyard._async.postgres._adapter import _AsyncPostgresAdapter
from runyard._json import dump_json, load_json
from runyard._memory import check_limit
from runyard._postgres_rows import (
    decode_run,
    decode_run_lease,
    decode_session,
    fence_refusal,
)
from runyard.capabilities import StoreCapabilities
from runyard.errors import (
    LeaseLostError,
    RunLeaseHeldError,
    StateConflictError,
    StateInUseError,
    StateNotFoundError,
    StatePersistenceError,
    StoreOutcomeUnknown,
)
from runyard.keys import decode_cursor, encode_cursor, validate_identifier
from runyard.models import CounterDelta, RunKey, RunLease, RunPage, RunRecord, SessionRecord

__all__ = ["AsyncPostgresStateStore"]

DEFAULT_STATUS = "running"


def _check_ttl(ttl_seconds: float) -> float:
    if not ttl_seconds > 0:
        raise ValueError(f"ttl_seconds must be positive, not {ttl_seconds!r}")
    return float(ttl_seconds)


class AsyncPostgresStateStore(_AsyncPostgresAdapter):
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
        deployment="multi_server",
    )

    def _relations(self) -> Sequence[str]:
        return self.tables.state_relations()

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

        Raises StateConflictError(expected, actual), LeaseLostError for a stale ``fence``,
        StatePersistenceError for a value jsonb would refuse (before sending), and
        StoreOutcomeUnknown when the reply was lost and reading back cannot settle it.
        """
        text = dump_json(blob, max_bytes=self.max_value_bytes, what="run blob")
        if session_id is not None:
            validate_identifier(session_id, "session_id")
        try:
            return await self._put_run(key, text, expected_version, status, session_id, fence)
        except StoreOutcomeUnknown:
            if self._bound:
                raise
            # The expected version is the write's identity: read back what is stored.
            stored = await self.get_run(key)
            if (
                stored is not None
                and stored.version == expected_version + 1
                and stored.blob == load_json(text)
            ):
                return stored
            if (stored.version if stored else 0) == expected_version:
                return await self._put_run(key, text, expected_version, status, session_id, fence)
            raise

    async def _put_run(
        self,
        key: RunKey,
        text: str,
        expected_version: int,
        status: str | None,
        session_id: str | None,
        fence: int | None,
    ) -> RunRecord:
        now = self._now()
        args = (key.tenant, key.run_id, text)
        if expected_version == 0:
            rows = await self._fetch(
                "create_run",
                *args,
                status or DEFAULT_STATUS,
                session_id,
                now,
                fence,
                idempotent=False,
            )
        else:
            rows = await self._fetch(
                "update_run",
                *args,
                status or None,
                session_id,
                now,
                fence,
                expected_version,
                idempotent=False,
            )
        if rows:
            return decode_run(rows[0])
        probe = await self._probe(key)
        actual = int(probe[0] or 0) if probe else 0
        if actual != expected_version:
            raise StateConflictError(expected_version, actual)
        if fence is not None:
            refusal = fence_refusal(key.run_id, fence, probe, now)
            if refusal is not None:
                raise refusal
        raise StateConflictError(expected_version, actual)

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

        Concurrent patches all land. Raises StateNotFoundError, LeaseLostError, and
        StoreOutcomeUnknown when the reply was lost (a patch has no identity to read back).
        """
        now = self._now()
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
            idempotent=False,
        )
        if rows:
            return decode_run(rows[0])
        probe = await self._probe(key)
        if probe is None or probe[0] is None:
            raise StateNotFoundError(f"run {key.run_id!r} of tenant {key.tenant!r} does not exist")
        refusal = fence_refusal(key.run_id, fence, probe, now) if fence is not None else None
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
        """Delete the run; return whether it existed. Raises StateConflictError, LeaseLostError."""
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
        check_limit(limit)
        after = decode_cursor(cursor)
        rows = await self._fetch("list_runs", tenant, after, status, session_id, limit + 1)
        items = [decode_run(r) for r in rows[:limit]]
        more = len(rows) > limit
        return RunPage(items=items, next_cursor=encode_cursor(items[-1].seq) if more else None)

    def iter_runs(
        self,
        tenant: str,
        *,
        status: str | None = None,
        session_id: str | None = None,
        page_size: int = 100,
    ) -> AsyncRunPager:
        """Iterate every run of the tenant, page by page."""
        return AsyncRunPager(
            self, tenant, status=status, session_id=session_id, page_size=page_size
        )

    # -- sessions ----------------------------------------------------------------------------
    async def put_session(
        self, tenant: str, session_id: str, blob: Any, *, expected_version: int
    ) -> SessionRecord:
        """Write the session iff its version is ``expected_version``. Raises StateConflictError."""
        validate_identifier(tenant, "tenant")
        validate_identifier(session_id, "session_id")
        text = dump_json(blob, max_bytes=self.max_value_bytes, what="session blob")
        now = self._now()
        if expected_version == 0:
            rows = await self._fetch(
                "create_session", tenant, session_id, text, now, idempotent=False
            )
        else:
            rows = await self._fetch(
                "update_session", tenant, session_id, text, now, expected_version, idempotent=False
            )
        if rows:
            return decode_session(rows[0])
        current = await self.get_session(tenant, session_id)
        raise StateConflictError(
            expected_version, current.version if current else 0, what="session"
        )

    async def get_session(self, tenant: str, session_id: str) -> SessionRecord | None:
        """Return the session, or None."""
        validate_identifier(tenant, "tenant")
        validate_identifier(session_id, "session_id")
        rows = await self._fetch("get_session", tenant, session_id)
        return decode_session(rows[0]) if rows else None

    async def delete_session(self, tenant: str, session_id: str, *, cascade: bool = False) -> bool:
        """Delete the session (and its runs when ``cascade``), in one statement.

        Raises StateInUseError when it still has runs and ``cascade`` is False.
        """
        validate_identifier(tenant, "tenant")
        validate_identifier(session_id, "session_id")
        rows = await self._fetch(
            "delete_session", tenant, session_id, bool(cascade), idempotent=False
        )
        runs_deleted, sessions_deleted, runs_before = (int(v) for v in rows[0])
        if runs_before and not cascade:
            raise StateInUseError(
                f"session {session_id!r} still has {runs_before} run(s); "
                "delete them first or pass cascade=True"
            )
        return bool(sessions_deleted or runs_deleted)

    # -- run leases --------------------------------------------------------------------------
    async def acquire_lease(self, key: RunKey, holder: str, *, ttl_seconds: float) -> RunLease:
        """Lease the run to ``holder``: a new epoch unless ``holder`` still holds it.

        Raises RunLeaseHeldError naming the live holder.
        """
        validate_identifier(holder, "holder")
        ttl = _check_ttl(ttl_seconds)
        for _ in range(3):
            now = self._now()
            rows = await self._fetch(
                "acquire_lease", key.tenant, key.run_id, holder, now, now + ttl
            )
            if rows:
                return decode_run_lease(rows[0])
            current = await self._fetch("get_lease", key.tenant, key.run_id)
            if current and current[0][2] is not None and float(current[0][4]) >= now:
                row = current[0]
                raise RunLeaseHeldError(row[2], int(row[3]), float(row[4]))
        raise StatePersistenceError("the run lease kept changing; try again", reason="contended")

    async def renew_lease(self, lease: RunLease, *, ttl_seconds: float) -> RunLease:
        """Extend a live lease, keeping its epoch. Raises LeaseLostError ("taken", "expired")."""
        ttl = _check_ttl(ttl_seconds)
        now = self._now()
        rows = await self._fetch(
            "renew_lease", lease.tenant, lease.run_id, lease.epoch, now, now + ttl
        )
        if rows:
            return decode_run_lease(rows[0])
        current = await self._fetch("get_lease", lease.tenant, lease.run_id)
        if not current or current[0][2] is None or current[0][3] != lease.epoch:
            raise LeaseLostError(lease.run_id, "taken")
        if float(current[0][4]) < now:
            raise LeaseLostError(lease.run_id, "expired")
        raise LeaseLostError(lease.run_id, "taken")

    async def release_lease(self, lease: RunLease) -> bool:
        """Release the lease if it is still current; a stale release changes nothing."""
        rows = await self._fetch("release_lease", lease.tenant, lease.run_id, lease.epoch)
        return bool(rows)

    async def get_lease(self, key: RunKey) -> RunLease | None:
        """Return the live lease on the run, or None."""
        rows = await self._fetch("get_lease", key.tenant, key.run_id)
        if not rows or rows[0][2] is None or float(rows[0][4]) < self._now():
            return None
        return decode_run_lease(rows[0])
