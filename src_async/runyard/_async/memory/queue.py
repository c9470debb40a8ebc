"""AsyncMemoryWorkQueue: tenant-fair work items with fenced leases, in this process."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from runyard._async.closing import AsyncClosing
from runyard._flavours import AsyncLock
from runyard._flavours_worker import AsyncCondition
from runyard.capabilities import StoreCapabilities
from runyard.clock import Clock, SystemClock
from runyard.errors import RunyardError
from runyard.memory.queue import MemoryQueueCore
from runyard.models import DeadLetter, Lease, NewItem, QueueStats, WorkItem
from runyard.policy import QueuePolicy
from runyard.queue_args import check_leases
from runyard.validation import DEFAULT_MAX_VALUE_BYTES, settle_target

__all__ = ["AsyncMemoryWorkQueue"]


class AsyncMemoryWorkQueue(AsyncClosing):
    """A WorkQueue held in this process's memory; nothing survives the process."""

    capabilities = StoreCapabilities(
        version=1,
        fenced_writes=True,
        retry_ids=True,
        atomic_settle=True,
        recovery=True,
        batched_operations=True,
        deployment="single_process",
    )

    def __init__(
        self,
        *,
        policy: QueuePolicy | None = None,
        clock: Clock | None = None,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    ) -> None:
        self.policy = policy or QueuePolicy()
        self._core = MemoryQueueCore(clock or SystemClock(), self.policy, max_value_bytes)
        self._lock = AsyncLock()
        self.wakeups = AsyncCondition()
        """Notified by every enqueue that adds an item; idle workers wait on it."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(policy={self.policy!r})"

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

        ``delay_seconds`` or ``run_at`` (seconds since the epoch on the queue's clock), never
        both; ``max_attempts`` overrides the policy's for this item. Raises InvalidArgumentError.
        """
        async with self._lock:
            item = self._core.enqueue(
                tenant,
                payload,
                item_id=item_id,
                dedupe_key=dedupe_key,
                priority=priority,
                delay_seconds=delay_seconds,
                run_at=run_at,
                max_attempts=max_attempts,
            )
        self.wakeups.notify()
        return item

    async def enqueue_many(self, tenant: str, items: Collection[NewItem]) -> list[WorkItem]:
        """Add every item, as ``enqueue`` would one by one; all are checked before any is added."""
        async with self._lock:
            added = self._core.enqueue_many(tenant, items)
        self.wakeups.notify()
        return added

    async def claim_many(self, worker: str, *, limit: int) -> list[Lease]:
        """Lease up to ``limit`` due items in the rotation ``limit`` single claims would follow,
        after taking back up to RECLAIM_PER_CLAIM lapsed leases as ``reap`` does."""
        async with self._lock:
            return self._core.claim_many(worker, limit=limit)

    async def heartbeat_many(self, leases: Collection[Lease]) -> list[Lease | RunyardError]:
        """Extend every lease: the renewed Lease, or that item's LeaseLostError/not-found."""
        targets = check_leases(leases)
        async with self._lock:
            return self._core.heartbeat_many(targets)

    async def complete_many(self, leases: Collection[Lease]) -> list[RunyardError | None]:
        """Finish every item: None, or that item's LeaseLostError/WorkItemNotFoundError."""
        targets = check_leases(leases)
        async with self._lock:
            return self._core.settle_many(targets, release=False)

    async def release_many(self, leases: Collection[Lease]) -> list[RunyardError | None]:
        """Hand every item back to ready at once, its attempt not counted; per-item errors."""
        targets = check_leases(leases)
        async with self._lock:
            result = self._core.settle_many(targets, release=True)
        self.wakeups.notify()
        return result

    async def claim(self, worker: str) -> Lease | None:
        """Lease the next due item, tenants served in rotation; None when nothing is due.

        First takes back up to RECLAIM_PER_CLAIM lapsed leases, as ``reap`` does."""
        async with self._lock:
            return self._core.claim(worker)

    async def heartbeat(
        self, tenant: str | Lease, item_id: str | None = None, *, token: int | None = None
    ) -> Lease:
        """Extend the lease. Raises LeaseLostError, WorkItemNotFoundError."""
        tenant, item_id, token = settle_target(tenant, item_id, token)
        async with self._lock:
            return self._core.heartbeat(tenant, item_id, token=token)

    async def complete(
        self, tenant: str | Lease, item_id: str | None = None, *, token: int | None = None
    ) -> None:
        """Finish the item. Raises LeaseLostError, WorkItemNotFoundError."""
        tenant, item_id, token = settle_target(tenant, item_id, token)
        async with self._lock:
            self._core.complete(tenant, item_id, token=token)

    async def fail(
        self,
        tenant: str | Lease,
        item_id: str | None = None,
        *,
        token: int | None = None,
        error: str | None = None,
        retryable: bool = True,
    ) -> WorkItem:
        """Record a failed attempt: retried after backoff, or dead-lettered per the policy."""
        tenant, item_id, token = settle_target(tenant, item_id, token)
        async with self._lock:
            return self._core.fail(tenant, item_id, token=token, error=error, retryable=retryable)

    async def reap(self, *, limit: int = 100) -> list[WorkItem]:
        """Return lapsed leases to ready after the policy's backoff (or to the dead letter), at
        most ``limit``, oldest expiry first."""
        async with self._lock:
            return self._core.reap(limit=limit)

    async def adopt(self, worker: str, *, limit: int = 100) -> list[Lease]:
        """Return the live leases ``worker`` held, extended, each under a new token (settling
        with the old one raises LeaseLostError)."""
        async with self._lock:
            return self._core.adopt(worker, limit=limit)

    async def dead_letters(self, tenant: str, *, limit: int = 100) -> list[DeadLetter]:
        """Return the tenant's dead-lettered items, oldest first."""
        async with self._lock:
            return self._core.dead_letters(tenant, limit=limit)

    async def requeue(self, tenant: str, item_id: str) -> WorkItem:
        """Move a dead-lettered item back to ready. Raises WorkItemNotFoundError."""
        async with self._lock:
            return self._core.requeue(tenant, item_id)

    async def cancel(self, tenant: str, item_id: str) -> bool:
        """Remove a ready, delayed or dead item (its dedupe key is freed): True; False when it
        is unknown or completed. Raises ItemLeasedError for a leased item."""
        async with self._lock:
            return self._core.cancel(tenant, item_id)

    async def purge_dead(self, tenant: str, *, older_than: float = 0.0, limit: int = 100) -> int:
        """Delete up to ``limit`` of the tenant's dead letters that died at least ``older_than``
        seconds ago, oldest first; return how many."""
        async with self._lock:
            return self._core.purge_dead(tenant, older_than=older_than, limit=limit)

    async def prune(self, *, limit: int = 100) -> int:
        """Forget the rotation entries of up to ``limit`` tenants that hold no item in any
        state; return how many. A later enqueue for such a tenant serves it as a new one."""
        async with self._lock:
            return self._core.prune(limit=limit)

    async def get_item(self, tenant: str, item_id: str) -> WorkItem | None:
        """Return the item, or None once completed or unknown."""
        async with self._lock:
            return self._core.get_item(tenant, item_id)

    async def stats(self) -> QueueStats:
        """Count the queue's items by state."""
        async with self._lock:
            return self._core.stats()

    async def aclose(self) -> None:
        """Nothing to release; present for the protocol."""
