"""AsyncPostgresWorkQueue: tenant-fair work items with fenced leases in PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runyard._async.postgres._adapter import Source, _AsyncPostgresAdapter
from runyard._json import dump_json
from runyard._sql import settle_refusal
from runyard.capabilities import StoreCapabilities
from runyard.clock import Clock
from runyard.errors import (
    LeaseLostError,
    QueueUnavailableError,
    RunyardError,
    StoreOutcomeUnknown,
    WorkItemNotFoundError,
)
from runyard.keys import validate_identifier
from runyard.models import DeadLetter, Lease, QueueStats, WorkItem
from runyard.policy import QueuePolicy
from runyard.postgres.rows import (
    decode_dead_letter,
    decode_item,
    decode_lease,
    item_state,
)
from runyard.postgres.schema import StateTables
from runyard.validation import (
    DEFAULT_MAX_VALUE_BYTES,
    check_delay,
    check_error_text,
    check_limit,
    check_priority,
    item_id_or_new,
    settle_target,
)

__all__ = ["AsyncPostgresWorkQueue"]

# How many tenants one claim passes over when their due heads are all locked by other claims.
MAX_TENANTS_PASSED_OVER = 32


class AsyncPostgresWorkQueue(_AsyncPostgresAdapter):
    """A WorkQueue in PostgreSQL: the claim is one statement, every settle is fenced.

    Build it on a psycopg ``AsyncConnectionPool``/``AsyncConnection`` or any executor;
    ``open()`` and ``from_settings()`` also run verify(). ``bound(connection)`` joins the
    caller's transaction, so work is enqueued atomically with the caller's own writes.
    """

    _kind = "queue"
    capabilities = StoreCapabilities(
        version=1,
        fenced_writes=True,
        retry_ids=True,
        transactional=True,
        atomic_settle=True,
        recovery=True,
        deployment="multi_server",
    )

    def __init__(
        self,
        source: Source,
        *,
        policy: QueuePolicy | None = None,
        tables: StateTables | None = None,
        clock: Clock | None = None,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        retry_attempts: int = 3,
        retry_backoff_seconds: float = 0.05,
        schema_version: int | None = None,
        prepare: bool = True,
        close_source: bool = False,
    ) -> None:
        super().__init__(
            source,
            tables=tables,
            clock=clock,
            max_value_bytes=max_value_bytes,
            retry_attempts=retry_attempts,
            retry_backoff_seconds=retry_backoff_seconds,
            schema_version=schema_version,
            prepare=prepare,
            close_source=close_source,
        )
        self.policy = policy or QueuePolicy()

    def _relations(self) -> Sequence[str]:
        return self.tables.queue_relations()

    # -- enqueue and claim -------------------------------------------------------------------
    async def enqueue(
        self,
        tenant: str,
        payload: Any,
        *,
        item_id: str | None = None,
        dedupe_key: str | None = None,
        priority: int = 0,
        delay_seconds: float = 0.0,
    ) -> WorkItem:
        """Add an item; a repeated ``item_id`` or live ``dedupe_key`` returns the existing one.

        One statement (safe to retry: the item id is its identity). Raises
        StatePersistenceError for a payload no backend stores, before sending.
        """
        validate_identifier(tenant, "tenant")
        item_id, _ = item_id_or_new(item_id)
        if dedupe_key is not None:
            validate_identifier(dedupe_key, "dedupe_key")
        priority = check_priority(priority)
        delay_seconds = check_delay(delay_seconds)
        text = dump_json(payload, max_bytes=self.max_value_bytes, what="payload")
        for _ in range(3):
            now = self._now()
            rows = await self._fetch(
                "enqueue", tenant, item_id, text, priority, now + delay_seconds, now, dedupe_key
            )
            if rows:
                return decode_item(rows[0][1:])
            # The item we collided with committed after this statement's snapshot was taken.
            rows = await self._fetch("find_item", tenant, item_id, dedupe_key)
            if rows:
                return decode_item(rows[0])
        raise QueueUnavailableError("the item kept changing while enqueuing; try again")

    async def claim(self, worker: str) -> Lease | None:
        """Lease the next due item, tenants served in rotation; None when nothing is due.

        One statement, waiting on no lock, picks the tenant with the oldest turn whose rotation
        row is free (or, when all are held, any with due work), locks its head item
        (``FOR UPDATE SKIP LOCKED``), writes the claim and advances the turn; a claim that
        nearly drained its tenant then asks for the tenant's retirement. Raises
        StoreOutcomeUnknown when the reply was lost (adopt() recovers such a lease).
        """
        validate_identifier(worker, "worker")
        passed_over: list[str] = []
        while len(passed_over) <= MAX_TENANTS_PASSED_OVER:
            now = self._now()
            expires = self.policy.lease_expiry(now, now)
            try:
                rows = await self._fetch(
                    "claim", now, worker, expires, passed_over, idempotent=False
                )
            except StoreOutcomeUnknown as exc:
                raise StoreOutcomeUnknown(
                    f"{exc}; a lease it took is returned by adopt({worker!r}) or reaped "
                    "when it lapses"
                ) from None
            if not rows:
                return None
            tenant, near_empty = rows[0][0], rows[0][1]
            if rows[0][2] is None:
                passed_over.append(tenant)
                continue
            lease = decode_lease(rows[0][2:])
            if near_empty:
                await self._retire(tenant)
            return lease
        return None

    async def _retire(self, tenant: str) -> None:
        """Take the tenant out of the rotation if it has no ready item left.

        Best effort when unbound: the lease is already taken, and a row left behind costs
        later claims one index probe until the next retire removes it.
        """
        try:
            await self._fetch("retire", tenant, idempotent=True)
        except RunyardError:
            if self._bound:
                raise

    # -- settling ----------------------------------------------------------------------------
    async def _probe(self, tenant: str, item_id: str) -> Sequence[Any] | None:
        rows = await self._fetch("probe_item", tenant, item_id)
        return rows[0] if rows else None

    async def _refused(self, tenant: str, item_id: str, token: int, now: float) -> Exception:
        probe = await self._probe(tenant, item_id)
        refusal = settle_refusal(tenant, item_id, token, probe, now, self.policy)
        return refusal or LeaseLostError(item_id, "taken")

    async def heartbeat(
        self, tenant: str | Lease, item_id: str | None = None, *, token: int | None = None
    ) -> Lease:
        """Extend the lease (never past max_lease_seconds from the claim).

        Raises LeaseLostError ("taken", "capped", "expired"), WorkItemNotFoundError.
        """
        tenant, item_id, token = settle_target(tenant, item_id, token)
        now = self._now()
        rows = await self._fetch(
            "heartbeat",
            tenant,
            item_id,
            token,
            now,
            now + float(self.policy.lease_seconds),
            float(self.policy.max_lease_seconds),
        )
        if rows:
            return decode_lease(rows[0])
        raise await self._refused(tenant, item_id, token, now)

    async def complete(
        self, tenant: str | Lease, item_id: str | None = None, *, token: int | None = None
    ) -> None:
        """Finish the item (deleting it and freeing its dedupe key), fenced on ``token``.

        Raises LeaseLostError, WorkItemNotFoundError, StoreOutcomeUnknown when the reply was
        lost and reading back cannot settle it.
        """
        tenant, item_id, token = settle_target(tenant, item_id, token)
        now = self._now()
        try:
            rows = await self._complete(tenant, item_id, token, now)
        except StoreOutcomeUnknown:
            if self._bound:
                raise
            # The token is the write's identity: gone means completed; still ours means not.
            probe = await self._probe(tenant, item_id)
            if probe is None:
                return
            if settle_refusal(tenant, item_id, token, probe, now, self.policy) is not None:
                raise
            rows = await self._complete(tenant, item_id, token, now)
        if not rows:
            raise await self._refused(tenant, item_id, token, now)

    async def _complete(
        self, tenant: str, item_id: str, token: int, now: float
    ) -> Sequence[Sequence[Any]]:
        return await self._fetch(
            "complete",
            tenant,
            item_id,
            token,
            now,
            float(self.policy.max_lease_seconds),
            idempotent=False,
        )

    async def fail(
        self,
        tenant: str | Lease,
        item_id: str | None = None,
        *,
        token: int | None = None,
        error: str | None = None,
        retryable: bool = True,
    ) -> WorkItem:
        """Record a failed attempt: retried after backoff, or dead-lettered per the policy.

        Raises LeaseLostError, WorkItemNotFoundError, StoreOutcomeUnknown when the reply was
        lost and the item no longer carries this token (reading back cannot tell this call's
        write from a reap's).
        """
        tenant, item_id, token = settle_target(tenant, item_id, token)
        check_error_text(error)
        now = self._now()
        probe = await self._probe(tenant, item_id)
        refusal = settle_refusal(tenant, item_id, token, probe, now, self.policy)
        if refusal is not None or probe is None:
            raise refusal or LeaseLostError(item_id, "taken")
        decision = self.policy.on_failure(int(probe[4]), now, retryable=retryable)
        state = item_state(decision)
        args = (
            tenant,
            item_id,
            token,
            now,
            float(self.policy.max_lease_seconds),
            state,
            decision.retry_at if state == "ready" else None,
            error,
            decision.reason if state == "dead" else None,
        )
        try:
            rows = await self._fetch("fail", *args, idempotent=False)
        except StoreOutcomeUnknown:
            if self._bound:
                raise
            # The token is the write's identity: still ours and live means it was not applied.
            probe = await self._probe(tenant, item_id)
            if (
                probe is None
                or settle_refusal(tenant, item_id, token, probe, now, self.policy) is not None
            ):
                raise
            rows = await self._fetch("fail", *args, idempotent=False)
        if rows:
            return decode_item(rows[0])
        raise await self._refused(tenant, item_id, token, now)

    # -- recovery ----------------------------------------------------------------------------
    async def reap(self, *, limit: int = 100) -> list[WorkItem]:
        """Return lapsed leases to ready (or the dead letter), at most ``limit``.

        Candidates are read oldest expiry first, then applied in one statement that skips rows
        another session holds (``SKIP LOCKED``) and repeats every lapse predicate.
        """
        check_limit(limit)
        now = self._now()
        lapsed = await self._fetch("lapsed", now, limit)
        if not lapsed:
            return []
        decisions = [self.policy.on_lapse(int(row[3]), now) for row in lapsed]
        states = [item_state(d) for d in decisions]
        rows = await self._fetch(
            "reap",
            now,
            [row[0] for row in lapsed],
            [row[1] for row in lapsed],
            [row[2] for row in lapsed],
            states,
            [d.retry_at if s == "ready" else None for d, s in zip(decisions, states, strict=True)],
            [d.reason for d in decisions],
            "lease lapsed",
            idempotent=False,
        )
        return [decode_item(row[1:]) for row in sorted(rows, key=lambda row: int(row[0]))]

    async def adopt(self, worker: str, *, limit: int = 100) -> list[Lease]:
        """Return (and extend) the live leases ``worker`` holds, in claim order."""
        validate_identifier(worker, "worker")
        check_limit(limit)
        now = self._now()
        rows = await self._fetch(
            "adopt",
            worker,
            now,
            now + float(self.policy.lease_seconds),
            float(self.policy.max_lease_seconds),
            limit,
        )
        return sorted((decode_lease(row) for row in rows), key=lambda lease: lease.token)

    # -- dead letters and inspection ---------------------------------------------------------
    async def dead_letters(self, tenant: str, *, limit: int = 100) -> list[DeadLetter]:
        """Return the tenant's dead-lettered items, oldest first."""
        validate_identifier(tenant, "tenant")
        check_limit(limit)
        rows = await self._fetch("dead_letters", tenant, limit)
        return [decode_dead_letter(row) for row in rows]

    async def requeue(self, tenant: str, item_id: str) -> WorkItem:
        """Move a dead-lettered item back to ready, attempts reset. Raises WorkItemNotFoundError."""
        validate_identifier(tenant, "tenant")
        validate_identifier(item_id, "item_id")
        rows = await self._fetch("requeue", tenant, item_id, self._now(), idempotent=False)
        if not rows:
            raise WorkItemNotFoundError(f"no dead-lettered item {item_id!r} in tenant {tenant!r}")
        return decode_item(rows[0])

    async def get_item(self, tenant: str, item_id: str) -> WorkItem | None:
        """Return the item (ready, leased or dead), or None once completed or unknown."""
        validate_identifier(tenant, "tenant")
        validate_identifier(item_id, "item_id")
        rows = await self._fetch("get_item", tenant, item_id)
        return decode_item(rows[0]) if rows else None

    async def stats(self) -> QueueStats:
        """Count the queue's items by state (one scan of the work table)."""
        rows = await self._fetch("stats", self._now())
        ready, delayed, leased, dead, tenants = (int(v) for v in rows[0])
        return QueueStats(ready=ready, delayed=delayed, leased=leased, dead=dead, tenants=tenants)
