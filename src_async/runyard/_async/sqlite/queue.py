"""AsyncSqliteWorkQueue: tenant-fair work items with fenced leases in a SQLite file."""

from __future__ import annotations

from typing import Any

from runyard._async.sqlite._adapter import _AsyncSqliteAdapter, _AsyncTransaction
from runyard._json import dump_json
from runyard._sql import settle_refusal
from runyard.capabilities import StoreCapabilities
from runyard.errors import LeaseLostError, WorkItemNotFoundError
from runyard.keys import validate_identifier
from runyard.models import DeadLetter, Lease, QueueStats, WorkItem
from runyard.policy import FailureDecision, QueuePolicy
from runyard.sqlite.rows import decode_dead_letter, decode_item, decode_lease
from runyard.sqlite.statements_queue import queue_statements
from runyard.validation import (
    check_delay,
    check_error_text,
    check_limit,
    check_priority,
    item_id_or_new,
    settle_target,
)

__all__ = ["AsyncSqliteWorkQueue"]


class AsyncSqliteWorkQueue(_AsyncSqliteAdapter):
    """A WorkQueue in a SQLite file: the claim is one statement, every settle is fenced.

    ``await AsyncSqliteWorkQueue.open("work.db", create_schema=True)``; worker processes on
    one host may claim from the same file. Time is the database's unless a ``clock`` is
    injected.
    """

    _kind = "queue"
    capabilities = StoreCapabilities(
        version=1,
        fenced_writes=True,
        retry_ids=True,
        atomic_settle=True,
        recovery=True,
        deployment="single_host",
    )

    def __init__(self, *args: Any, policy: QueuePolicy | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.policy = policy or QueuePolicy()
        self._sql = queue_statements(self.tables)

    def _limits(self) -> dict[str, float]:
        return {"max_lease": float(self.policy.max_lease_seconds)}

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

        Raises StatePersistenceError for a payload that is not storable JSON, before writing.
        """
        validate_identifier(tenant, "tenant")
        item_id, _ = item_id_or_new(item_id)
        if dedupe_key is not None:
            validate_identifier(dedupe_key, "dedupe_key")
        priority = check_priority(priority)
        delay = check_delay(delay_seconds)
        text = dump_json(payload, max_bytes=self.max_value_bytes, what="payload")
        async with self._write() as tx:
            ids = {"tenant": tenant, "item_id": item_id, "dedupe_key": dedupe_key}
            rows = await tx.finish(
                "enqueue",
                payload=text,
                priority=priority,
                delay=delay,
                now=tx.stamp(),
                **ids,
            )
            if not rows:
                rows = await tx.fetch("find_item", **ids)
            return decode_item(rows[0])

    async def claim(self, worker: str) -> Lease | None:
        """Lease the next due item, tenants served in rotation; None when nothing is due.

        One statement picks the tenant with the oldest turn and its head item and writes the
        claim; the schema's trigger advances the turn.
        """
        validate_identifier(worker, "worker")
        # A new lease runs lease_seconds (QueuePolicy keeps max_lease_seconds at least that).
        async with self._write() as tx:
            rows = await tx.finish(
                "claim",
                worker=worker,
                now=tx.stamp(),
                lease_seconds=float(self.policy.lease_seconds),
            )
        return decode_lease(rows[0]) if rows else None

    # -- settling ----------------------------------------------------------------------------
    async def _refused(
        self, tx: _AsyncTransaction, tenant: str, item_id: str, token: int, now: float
    ) -> Exception:
        rows = await tx.fetch("probe_item", tenant=tenant, item_id=item_id)
        refusal = settle_refusal(
            tenant, item_id, token, rows[0] if rows else None, now, self.policy
        )
        return refusal or LeaseLostError(item_id, "taken")

    async def heartbeat(
        self, tenant: str | Lease, item_id: str | None = None, *, token: int | None = None
    ) -> Lease:
        """Extend the lease (never past max_lease_seconds from the claim); called with the
        ``Lease`` alone or with ``tenant, item_id, token=``.

        Raises LeaseLostError ("taken", "capped", "expired"), WorkItemNotFoundError.
        """
        tenant, item_id, token = settle_target(tenant, item_id, token)
        async with self._write() as tx:
            return await self._heartbeat(tx, tenant, item_id, token)

    async def _heartbeat(
        self, tx: _AsyncTransaction, tenant: str, item_id: str, token: int
    ) -> Lease:
        rows = await tx.fetch(
            "heartbeat",
            tenant=tenant,
            item_id=item_id,
            token=token,
            now=tx.stamp(),
            lease_seconds=float(self.policy.lease_seconds),
            **self._limits(),
        )
        if rows:
            return decode_lease(rows[0])
        raise await self._refused(tx, tenant, item_id, token, await tx.now())

    async def complete(
        self, tenant: str | Lease, item_id: str | None = None, *, token: int | None = None
    ) -> None:
        """Finish the item (deleting it and freeing its dedupe key), fenced on ``token``.

        Raises LeaseLostError, WorkItemNotFoundError.
        """
        tenant, item_id, token = settle_target(tenant, item_id, token)
        async with self._write() as tx:
            ids = {"tenant": tenant, "item_id": item_id, "token": token}
            if not await tx.finish("complete", now=tx.stamp(), **ids, **self._limits()):
                raise await self._refused(tx, tenant, item_id, token, await tx.now())

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

        Raises LeaseLostError, WorkItemNotFoundError.
        """
        tenant, item_id, token = settle_target(tenant, item_id, token)
        check_error_text(error)
        async with self._write() as tx:
            now = await tx.now()
            rows = await tx.fetch("probe_item", tenant=tenant, item_id=item_id)
            probe = rows[0] if rows else None
            refusal = settle_refusal(tenant, item_id, token, probe, now, self.policy)
            if refusal is not None or probe is None:
                raise refusal or LeaseLostError(item_id, "taken")
            decision = self.policy.on_failure(int(probe[4]), now, retryable=retryable)
            return await self._decide(tx, tenant, item_id, token, decision, error, now)

    async def _decide(
        self,
        tx: _AsyncTransaction,
        tenant: str,
        item_id: str,
        token: int,
        decision: FailureDecision,
        error: str | None,
        now: float,
    ) -> WorkItem:
        ids = {"tenant": tenant, "item_id": item_id, "token": token, "error": error}
        if decision.outcome == "dead" or decision.retry_at is None:
            rows = await tx.fetch("kill", reason=decision.reason, now=now, **ids)
        else:
            rows = await tx.fetch("retry", retry_at=decision.retry_at, **ids)
        return decode_item(rows[0])

    # -- recovery ----------------------------------------------------------------------------
    async def reap(self, *, limit: int = 100) -> list[WorkItem]:
        """Return lapsed leases to ready (or the dead letter), oldest expiry first, at most
        ``limit``, in one transaction."""
        check_limit(limit)
        async with self._write() as tx:
            now = await tx.now()
            lapsed = await tx.fetch("lapsed", now=now, limit=limit)
            out = []
            for tenant, item_id, token, attempts in lapsed:
                decision = self.policy.on_lapse(int(attempts), now)
                out.append(
                    await self._decide(tx, tenant, item_id, token, decision, "lease lapsed", now)
                )
            return out

    async def adopt(self, worker: str, *, limit: int = 100) -> list[Lease]:
        """Return (and extend) the live leases ``worker`` holds, in claim order."""
        validate_identifier(worker, "worker")
        check_limit(limit)
        async with self._write() as tx:
            now = await tx.now()
            held = await tx.fetch("held", worker=worker, now=now, limit=limit, **self._limits())
            return [await self._heartbeat(tx, t, i, token) for t, i, token in held]

    # -- dead letters and inspection ---------------------------------------------------------
    async def dead_letters(self, tenant: str, *, limit: int = 100) -> list[DeadLetter]:
        """Return the tenant's dead-lettered items, oldest first."""
        validate_identifier(tenant, "tenant")
        check_limit(limit)
        async with self._read() as tx:
            rows = await tx.fetch("dead_letters", tenant=tenant, limit=limit)
        return [decode_dead_letter(row) for row in rows]

    async def requeue(self, tenant: str, item_id: str) -> WorkItem:
        """Move a dead-lettered item back to ready, attempts reset. Raises WorkItemNotFoundError."""
        validate_identifier(tenant, "tenant")
        validate_identifier(item_id, "item_id")
        async with self._write() as tx:
            rows = await tx.fetch("requeue", tenant=tenant, item_id=item_id, now=await tx.now())
        if not rows:
            raise WorkItemNotFoundError(f"no dead-lettered item {item_id!r} in tenant {tenant!r}")
        return decode_item(rows[0])

    async def get_item(self, tenant: str, item_id: str) -> WorkItem | None:
        """Return the item (ready, leased or dead), or None once completed or unknown."""
        validate_identifier(tenant, "tenant")
        validate_identifier(item_id, "item_id")
        async with self._read() as tx:
            rows = await tx.fetch("get_item", tenant=tenant, item_id=item_id)
        return decode_item(rows[0]) if rows else None

    async def stats(self) -> QueueStats:
        """Count the queue's items by state (one scan of the work table)."""
        async with self._read() as tx:
            rows = await tx.fetch("stats", now=await tx.now())
        ready, delayed, leased, dead, tenants = (int(v) for v in rows[0])
        return QueueStats(ready=ready, delayed=delayed, leased=leased, dead=dead, tenants=tenants)
