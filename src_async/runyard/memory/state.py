"""The memory state core: runs, sessions and run leases, pure and single-threaded.

The twins wrap it in their lock; it is the reference model property tests compare against.
"""

from __future__ import annotations

from typing import Any

from runyard._json import copy_json
from runyard.clock import Clock
from runyard.errors import (
    LeaseLostError,
    RunLeaseHeldError,
    StateConflictError,
    StateNotFoundError,
)
from runyard.keys import decode_cursor, encode_cursor, validate_identifier
from runyard.memory._copies import detached
from runyard.models import (
    CounterDelta,
    RunKey,
    RunLease,
    RunPage,
    RunRecord,
    SessionRecord,
)
from runyard.validation import (
    COUNTER_FIELDS,
    DEFAULT_MAX_VALUE_BYTES,
    DEFAULT_STATUS,
    check_delta,
    check_limit,
    check_patch_result,
    check_status,
    check_ttl,
    session_in_use,
)

__all__ = ["MemoryStateCore"]


class MemoryStateCore:
    """Runs, sessions and run leases in dictionaries."""

    def __init__(self, clock: Clock, max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES) -> None:
        self.clock = clock
        self.max_value_bytes = max_value_bytes
        self._runs: dict[tuple[str, str], RunRecord] = {}
        self._sessions: dict[tuple[str, str], SessionRecord] = {}
        self._leases: dict[tuple[str, str], RunLease] = {}
        self._epochs: dict[tuple[str, str], int] = {}
        # The highest epoch prune() removed, per tenant: a pruned run's next epoch is above it.
        self._floors: dict[str, int] = {}
        self._seq = 0

    # -- fencing ---------------------------------------------------------------------------
    def _check_fence(self, key: RunKey, fence: int | None) -> None:
        if fence is None:
            return
        k = (key.tenant, key.run_id)
        if self._epochs.get(k, 0) != fence:
            raise LeaseLostError(key.run_id, "taken")
        lease = self._leases.get(k)
        if lease is None or lease.expires_at < self.clock.now():
            raise LeaseLostError(key.run_id, "expired")

    # -- runs ------------------------------------------------------------------------------
    @detached
    def put_run(
        self,
        key: RunKey,
        blob: Any,
        *,
        expected_version: int,
        status: str | None,
        session_id: str | None,
        fence: int | None,
    ) -> RunRecord:
        check_status(status)
        stored = copy_json(blob, self.max_value_bytes, "run blob")
        if session_id is not None:
            validate_identifier(session_id, "session_id")
        k = (key.tenant, key.run_id)
        existing = self._runs.get(k)
        actual = existing.version if existing else 0
        if expected_version != actual:
            raise StateConflictError(expected_version, actual)
        self._check_fence(key, fence)
        now = self.clock.now()
        if existing is None:
            self._seq += 1
            record = RunRecord(
                tenant=key.tenant,
                run_id=key.run_id,
                blob=stored,
                version=1,
                status=status or DEFAULT_STATUS,
                session_id=session_id,
                created_at=now,
                updated_at=now,
                seq=self._seq,
            )
        else:
            record = existing.model_copy(
                update={
                    "blob": stored,
                    "version": actual + 1,
                    "status": status or existing.status,
                    "session_id": session_id if session_id is not None else existing.session_id,
                    "updated_at": now,
                }
            )
        self._runs[k] = record
        return record

    @detached
    def patch_run(
        self, key: RunKey, delta: CounterDelta, *, status: str | None, fence: int | None
    ) -> RunRecord:
        check_delta(delta)
        check_status(status)
        k = (key.tenant, key.run_id)
        existing = self._runs.get(k)
        if existing is None:
            raise StateNotFoundError(f"run {key.run_id!r} of tenant {key.tenant!r} does not exist")
        self._check_fence(key, fence)
        check_patch_result(existing.model_dump(include=set(COUNTER_FIELDS)), delta)
        record = existing.model_copy(
            update={
                "input_tokens": existing.input_tokens + delta.input_tokens,
                "output_tokens": existing.output_tokens + delta.output_tokens,
                "cost_micros": existing.cost_micros + delta.cost_micros,
                "iterations": existing.iterations + delta.iterations,
                "cursor": existing.cursor + delta.cursor,
                "status": status or existing.status,
                "version": existing.version + 1,
                "updated_at": self.clock.now(),
            }
        )
        self._runs[k] = record
        return record

    @detached
    def get_run(self, key: RunKey) -> RunRecord | None:
        return self._runs.get((key.tenant, key.run_id))

    @detached
    def delete_run(self, key: RunKey, *, expected_version: int | None, fence: int | None) -> bool:
        k = (key.tenant, key.run_id)
        existing = self._runs.get(k)
        if existing is None:
            if expected_version:
                raise StateConflictError(expected_version, 0)
            return False
        if expected_version is not None and expected_version != existing.version:
            raise StateConflictError(expected_version, existing.version)
        self._check_fence(key, fence)
        del self._runs[k]
        return True

    @detached
    def list_runs(
        self,
        tenant: str,
        *,
        status: str | None,
        session_id: str | None,
        limit: int,
        cursor: str | None,
    ) -> RunPage:
        validate_identifier(tenant, "tenant")
        check_status(status)
        if session_id is not None:
            validate_identifier(session_id, "session_id")
        check_limit(limit)
        after = decode_cursor(cursor, tenant)
        matching = sorted(
            (
                r
                for (t, _), r in self._runs.items()
                if t == tenant
                and r.seq > after
                and (status is None or r.status == status)
                and (session_id is None or r.session_id == session_id)
            ),
            key=lambda r: r.seq,
        )
        page = matching[:limit]
        more = len(matching) > limit
        return RunPage(
            items=page, next_cursor=encode_cursor(page[-1].seq, tenant) if more else None
        )

    # -- sessions --------------------------------------------------------------------------
    @detached
    def put_session(
        self, tenant: str, session_id: str, blob: Any, *, expected_version: int
    ) -> SessionRecord:
        validate_identifier(tenant, "tenant")
        validate_identifier(session_id, "session_id")
        stored = copy_json(blob, self.max_value_bytes, "session blob")
        k = (tenant, session_id)
        existing = self._sessions.get(k)
        actual = existing.version if existing else 0
        if expected_version != actual:
            raise StateConflictError(expected_version, actual, what="session")
        now = self.clock.now()
        record = SessionRecord(
            tenant=tenant,
            session_id=session_id,
            blob=stored,
            version=actual + 1,
            created_at=existing.created_at if existing else now,
            updated_at=now,
        )
        self._sessions[k] = record
        return record

    @detached
    def get_session(self, tenant: str, session_id: str) -> SessionRecord | None:
        validate_identifier(tenant, "tenant")
        validate_identifier(session_id, "session_id")
        return self._sessions.get((tenant, session_id))

    def session_runs(self, tenant: str, session_id: str) -> list[str]:
        """The ids of the tenant's runs that name the session."""
        return [
            run_id
            for (t, run_id), r in self._runs.items()
            if t == tenant and r.session_id == session_id
        ]

    @detached
    def delete_session(self, tenant: str, session_id: str, *, cascade: bool) -> bool:
        validate_identifier(tenant, "tenant")
        validate_identifier(session_id, "session_id")
        runs = [(tenant, run_id) for run_id in self.session_runs(tenant, session_id)]
        if runs and not cascade:
            raise session_in_use(session_id, len(runs))
        for k in runs:
            del self._runs[k]
        return self._sessions.pop((tenant, session_id), None) is not None or bool(runs)

    # -- run leases ------------------------------------------------------------------------
    @detached
    def acquire_lease(self, key: RunKey, holder: str, *, ttl_seconds: float) -> RunLease:
        validate_identifier(holder, "holder")
        check_ttl(ttl_seconds)
        k = (key.tenant, key.run_id)
        now = self.clock.now()
        current = self._leases.get(k)
        if current is not None and current.expires_at >= now:
            if current.holder != holder:
                raise RunLeaseHeldError(current.holder, current.epoch, current.expires_at)
            epoch = current.epoch
        else:
            epoch = max(self._epochs.get(k, 0), self._floors.get(key.tenant, 0)) + 1
            self._epochs[k] = epoch
        lease = RunLease(
            tenant=key.tenant,
            run_id=key.run_id,
            holder=holder,
            epoch=epoch,
            expires_at=now + ttl_seconds,
        )
        self._leases[k] = lease
        return lease

    @detached
    def renew_lease(self, lease: RunLease, *, ttl_seconds: float) -> RunLease:
        check_ttl(ttl_seconds)
        k = (lease.tenant, lease.run_id)
        now = self.clock.now()
        current = self._leases.get(k)
        if current is None or current.epoch != lease.epoch:
            raise LeaseLostError(lease.run_id, "taken")
        if current.expires_at < now:
            raise LeaseLostError(lease.run_id, "expired")
        renewed = current.model_copy(update={"expires_at": now + ttl_seconds})
        self._leases[k] = renewed
        return renewed

    @detached
    def release_lease(self, lease: RunLease) -> bool:
        k = (lease.tenant, lease.run_id)
        current = self._leases.get(k)
        if current is None or current.epoch != lease.epoch:
            return False
        del self._leases[k]
        return True

    @detached
    def get_lease(self, key: RunKey) -> RunLease | None:
        lease = self._leases.get((key.tenant, key.run_id))
        if lease is None or lease.expires_at < self.clock.now():
            return None
        return lease

    def prune(self, limit: int) -> int:
        """Forget up to ``limit`` runs' lease entries that are not live (lapsed or released),
        raising the tenant's floor to their epoch so that fencing survives."""
        check_limit(limit)
        now = self.clock.now()
        doomed: list[tuple[str, str]] = []
        for k in self._epochs:
            if len(doomed) == limit:
                break
            lease = self._leases.get(k)
            if lease is None or lease.expires_at < now:
                doomed.append(k)
        for k in doomed:
            tenant = k[0]
            self._floors[tenant] = max(self._floors.get(tenant, 0), self._epochs.pop(k))
            self._leases.pop(k, None)
        return len(doomed)
