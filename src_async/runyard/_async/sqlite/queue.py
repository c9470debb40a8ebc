"""AsyncSqliteWorkQueue: tenant-fair work items with fenced leases in a SQLite file."""

from __future__ import annotations

from typing import Any

from runyard._async.sqlite.queue_batched import _AsyncBatchedSqliteQueue
from runyard._sql import decode_dead_letter, decode_item
from runyard.capabilities import StoreCapabilities
from runyard.errors import RunyardError
from runyard.keys import validate_identifier
from runyard.models import DeadLetter, Lease, QueueStats, WorkItem
from runyard.policy import QueuePolicy
from runyard.queue_args import check_item
from runyard.sqlite.queue_transactions import (
    START,
    QueuePlan,
    adopt_body,
    cancel_body,
    enqueue_body,
    fail_body,
    heartbeat_body,
    prune_body,
    purge_dead_body,
    reap_body,
    requeue_body,
    select_body,
    settle_body,
)
from runyard.sqlite.statements_queue import queue_statements
from runyard.validation import check_failure, check_limit, check_older_than, settle_target

__all__ = ["AsyncSqliteWorkQueue"]


class AsyncSqliteWorkQueue(_AsyncBatchedSqliteQueue):
    """A WorkQueue in a SQLite file: the claim is one statement, every settle is fenced.

    ``await AsyncSqliteWorkQueue.open("work.db", create_schema=True)``; worker processes on
    one host may claim from the same file. Time is the database's unless a ``clock`` is
    injected. Every call is one ``BEGIN IMMEDIATE`` transaction (or one read) in one trip to
    the driver.
    """

    _kind = "queue"
    capabilities = StoreCapabilities(
        version=1,
        fenced_writes=True,
        retry_ids=True,
        atomic_settle=True,
        recovery=True,
        batched_operations=True,
        deployment="single_host",
    )

    def __init__(self, *args: Any, policy: QueuePolicy | None = None, **kwargs: Any) -> None:
        type(self)._check_options({"policy": policy})
        super().__init__(*args, **kwargs)
        self.policy = policy or QueuePolicy()
        self._sql = queue_statements(self.tables)
        self._plan = QueuePlan(self._sql, self.policy)
        self._prune_after = START  # prune's cursor: the last tenant it looked at

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
        run_at: float | None = None,
        max_attempts: int | None = None,
    ) -> WorkItem:
        """Add an item; a repeated ``item_id`` or live ``dedupe_key`` returns the existing one.

        ``run_at`` (seconds since the epoch, the database's clock) or ``delay_seconds``, never
        both; ``max_attempts`` overrides the policy's for this item. Raises
        InvalidArgumentError, or StatePersistenceError for a payload that is not storable
        JSON, before writing.
        """
        checked = check_item(
            tenant,
            payload,
            item_id=item_id,
            dedupe_key=dedupe_key,
            priority=priority,
            delay_seconds=delay_seconds,
            run_at=run_at,
            max_attempts=max_attempts,
            max_bytes=self.max_value_bytes,
        )
        (item,) = await self._transact(enqueue_body, self._plan, self._now(), tenant, [checked])
        return item

    async def claim(self, worker: str) -> Lease | None:
        """Lease the next due item, tenants served in rotation; None when nothing is due.

        First reclaims up to RECLAIM_PER_CLAIM lapsed leases as ``reap`` does; one statement
        then picks the tenant with the oldest turn and its head item and writes the claim.
        """
        validate_identifier(worker, "worker")
        leases = await self._claim(worker, 1)
        return leases[0] if leases else None

    # -- settling ----------------------------------------------------------------------------
    async def heartbeat(
        self, tenant: str | Lease, item_id: str | None = None, *, token: int | None = None
    ) -> Lease:
        """Extend the lease (never past max_lease_seconds from the claim); called with the
        ``Lease`` alone or with ``tenant, item_id, token=``.

        Raises LeaseLostError ("taken", "capped", "expired"), WorkItemNotFoundError.
        """
        target = settle_target(tenant, item_id, token)
        (outcome,) = await self._transact(heartbeat_body, self._plan, self._now(), [target])
        if isinstance(outcome, RunyardError):
            raise outcome
        return outcome

    async def complete(
        self, tenant: str | Lease, item_id: str | None = None, *, token: int | None = None
    ) -> None:
        """Finish the item (deleting it and freeing its dedupe key), fenced on ``token``.

        Raises LeaseLostError, WorkItemNotFoundError.
        """
        target = settle_target(tenant, item_id, token)
        (refusal,) = await self._transact(
            settle_body, self._plan, self._now(), [target], "complete"
        )
        if refusal is not None:
            raise refusal

    async def fail(
        self,
        tenant: str | Lease,
        item_id: str | None = None,
        *,
        token: int | None = None,
        error: str | None = None,
        retryable: bool = True,
    ) -> WorkItem:
        """Record a failed attempt: retried after backoff, or dead-lettered per the policy
        (with the item's own ``max_attempts`` when it has one).

        Raises LeaseLostError, WorkItemNotFoundError.
        """
        target = settle_target(tenant, item_id, token)
        check_failure(error, retryable)
        return await self._transact(fail_body, self._plan, self._now(), target, error, retryable)

    # -- recovery ----------------------------------------------------------------------------
    async def reap(self, *, limit: int = 100) -> list[WorkItem]:
        """Decide lapsed leases, oldest expiry first, at most ``limit``, in one transaction:
        each counts its attempt and is retried as the policy says, or dead-lettered."""
        check_limit(limit)
        return await self._transact(reap_body, self._plan, self._now(), limit)

    async def adopt(self, worker: str, *, limit: int = 100) -> list[Lease]:
        """Return (and extend) the live leases ``worker`` holds, in claim order, each under a
        fresh fencing token: the old token is refused afterwards (LeaseLostError "taken")."""
        validate_identifier(worker, "worker")
        check_limit(limit)
        return await self._transact(adopt_body, self._plan, self._now(), worker, limit)

    # -- dead letters, cancelling and retention ----------------------------------------------
    async def dead_letters(self, tenant: str, *, limit: int = 100) -> list[DeadLetter]:
        """Return the tenant's dead-lettered items, oldest first."""
        validate_identifier(tenant, "tenant")
        check_limit(limit)
        params = {"tenant": tenant, "limit": limit}
        rows = await self._view(select_body, self._sql["dead_letters"], params)
        return [decode_dead_letter(row) for row in rows]

    async def requeue(self, tenant: str, item_id: str) -> WorkItem:
        """Move a dead-lettered item back to ready, attempts reset. Raises WorkItemNotFoundError."""
        validate_identifier(tenant, "tenant")
        validate_identifier(item_id, "item_id")
        return await self._transact(requeue_body, self._plan, self._now(), tenant, item_id)

    async def cancel(self, tenant: str, item_id: str) -> bool:
        """Remove a ready, delayed or dead item (its dedupe key is freed): True; False when the
        item is unknown or already completed. Raises ItemLeasedError for a leased item."""
        validate_identifier(tenant, "tenant")
        validate_identifier(item_id, "item_id")
        return await self._transact(cancel_body, self._plan, self._now(), tenant, item_id)

    async def purge_dead(self, tenant: str, *, older_than: float = 0.0, limit: int = 100) -> int:
        """Delete up to ``limit`` of the tenant's dead letters that died at least ``older_than``
        seconds ago, oldest first; return how many were deleted."""
        validate_identifier(tenant, "tenant")
        age = check_older_than(older_than)
        check_limit(limit)
        return await self._transact(purge_dead_body, self._plan, self._now(), tenant, age, limit)

    async def prune(self, *, limit: int = 100) -> int:
        """Forget the turns of up to ``limit`` tenants that hold no item in any state, least
        recently served first (looking at no more than 10 tenants per one it may forget, from
        where the last call stopped); return how many. A later enqueue for such a tenant
        serves it as a new one."""
        check_limit(limit)
        after = self._prune_after
        removed, self._prune_after = await self._transact(
            prune_body, self._plan, self._now(), after, limit
        )
        return removed

    # -- inspection --------------------------------------------------------------------------
    async def get_item(self, tenant: str, item_id: str) -> WorkItem | None:
        """Return the item (ready, leased or dead), or None once completed or unknown."""
        validate_identifier(tenant, "tenant")
        validate_identifier(item_id, "item_id")
        params = {"tenant": tenant, "item_id": item_id}
        rows = await self._view(select_body, self._sql["get_item"], params)
        return decode_item(rows[0]) if rows else None

    async def stats(self) -> QueueStats:
        """Count the queue's items by state (one scan of the work table)."""
        rows = await self._view(select_body, self._sql["stats"], {"now": self._now()})
        ready, delayed, leased, dead, tenants = (int(v) for v in rows[0])
        return QueueStats(ready=ready, delayed=delayed, leased=leased, dead=dead, tenants=tenants)
