"""The StateStore and WorkQueue protocols every backend implements."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Protocol, runtime_checkable

from runyard.capabilities import StoreCapabilities
from runyard.errors import RunyardError
from runyard.models import (
    CounterDelta,
    DeadLetter,
    Lease,
    NewItem,
    QueueStats,
    RunKey,
    RunLease,
    RunPage,
    RunRecord,
    SessionRecord,
    WorkItem,
)

__all__ = ["AsyncBatchedWorkQueue", "AsyncStateStore", "AsyncWorkQueue"]


@runtime_checkable
class AsyncStateStore(Protocol):
    """Runs and sessions of an agent loop, tenant-scoped, with fenced run leases."""

    capabilities: StoreCapabilities

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
        StatePersistenceError for a value that cannot be stored.
        """
        ...

    async def patch_run(
        self,
        key: RunKey,
        delta: CounterDelta,
        *,
        status: str | None = None,
        fence: int | None = None,
    ) -> RunRecord:
        """Add ``delta`` to the run's counters and bump its version; needs no expected version.

        All or nothing: a patch that would take a counter past 2**53 - 1 writes nothing and
        raises InvalidArgumentError. Raises StateNotFoundError, LeaseLostError.
        """
        ...

    async def get_run(self, key: RunKey) -> RunRecord | None:
        """Return the run, or None."""
        ...

    async def delete_run(
        self, key: RunKey, *, expected_version: int | None = None, fence: int | None = None
    ) -> bool:
        """Delete the run; return whether it existed. Raises StateConflictError, LeaseLostError."""
        ...

    async def list_runs(
        self,
        tenant: str,
        *,
        status: str | None = None,
        session_id: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> RunPage:
        """Return a page of the tenant's runs in creation order; pass ``next_cursor`` on."""
        ...

    async def put_session(
        self, tenant: str, session_id: str, blob: Any, *, expected_version: int
    ) -> SessionRecord:
        """Write the session iff its version is ``expected_version``. Raises StateConflictError."""
        ...

    async def get_session(self, tenant: str, session_id: str) -> SessionRecord | None:
        """Return the session, or None."""
        ...

    async def delete_session(self, tenant: str, session_id: str, *, cascade: bool = False) -> bool:
        """Delete the session (and its runs when ``cascade``). Raises StateInUseError."""
        ...

    async def acquire_lease(self, key: RunKey, holder: str, *, ttl_seconds: float) -> RunLease:
        """Lease the run to ``holder``: a new holder gets the next epoch, the current holder
        keeps its own. Raises RunLeaseHeldError."""
        ...

    async def renew_lease(self, lease: RunLease, *, ttl_seconds: float) -> RunLease:
        """Extend a live lease, keeping its epoch. Raises LeaseLostError."""
        ...

    async def release_lease(self, lease: RunLease) -> bool:
        """Release the lease if it is still current; a stale release changes nothing."""
        ...

    async def get_lease(self, key: RunKey) -> RunLease | None:
        """Return the live lease on the run, or None."""
        ...

    async def prune(self, *, limit: int = 100) -> int:
        """Remove up to ``limit`` entries that no live state needs: run leases that lapsed or
        were released (by the store's clock), and where the backend keeps them (Redis) session
        run sets left without a run; return how many were removed.

        A live lease is never removed, and fencing survives: the tenant keeps the highest
        epoch pruned, so the next lease of that run gets a higher one. Each call does bounded
        work; call it until it returns less than ``limit`` to catch up. Raises
        InvalidArgumentError for a bad ``limit``.
        """
        ...

    async def aclose(self) -> None:
        """Release the store's resources."""
        ...


@runtime_checkable
class AsyncWorkQueue(Protocol):
    """At-least-once, tenant-fair work items with fenced leases."""

    capabilities: StoreCapabilities

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

        ``delay_seconds`` or ``run_at`` (seconds since the epoch on the store's clock; a past
        time is due at once), never both. ``max_attempts`` overrides the policy's for this item.
        """
        ...

    async def claim(self, worker: str) -> Lease | None:
        """Lease the next item, tenants served in rotation; None when nothing is due."""
        ...

    async def heartbeat(
        self, tenant: str | Lease, item_id: str | None = None, *, token: int | None = None
    ) -> Lease:
        """Extend the lease; pass the ``Lease`` alone or ``tenant, item_id, token=``.

        Raises LeaseLostError, WorkItemNotFoundError, InvalidArgumentError.
        """
        ...

    async def complete(
        self, tenant: str | Lease, item_id: str | None = None, *, token: int | None = None
    ) -> None:
        """Finish the item; pass the ``Lease`` alone or ``tenant, item_id, token=``.

        Raises LeaseLostError, WorkItemNotFoundError, InvalidArgumentError.
        """
        ...

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

        Pass the ``Lease`` alone or ``tenant, item_id, token=``; ``error`` is text of at most
        16 KiB (runyard.validation.MAX_ERROR_BYTES). Raises LeaseLostError,
        WorkItemNotFoundError, InvalidArgumentError.
        """
        ...

    async def reap(self, *, limit: int = 100) -> list[WorkItem]:
        """Return lapsed leases to ready (or the dead letter), at most ``limit``."""
        ...

    async def adopt(self, worker: str, *, limit: int = 100) -> list[Lease]:
        """Return (and extend) the live leases ``worker`` held before it restarted."""
        ...

    async def dead_letters(self, tenant: str, *, limit: int = 100) -> list[DeadLetter]:
        """Return the tenant's dead-lettered items, oldest first."""
        ...

    async def requeue(self, tenant: str, item_id: str) -> WorkItem:
        """Move a dead-lettered item back to ready with its attempts reset."""
        ...

    async def get_item(self, tenant: str, item_id: str) -> WorkItem | None:
        """Return the item (ready, leased or dead), or None once completed or unknown."""
        ...

    async def cancel(self, tenant: str, item_id: str) -> bool:
        """Remove a ready, delayed or dead item (its dedupe key is freed): True; False when the
        item is unknown or already completed. Raises ItemLeasedError for a leased item."""
        ...

    async def purge_dead(self, tenant: str, *, older_than: float = 0.0, limit: int = 100) -> int:
        """Delete up to ``limit`` of the tenant's dead letters that died at least ``older_than``
        seconds ago, oldest first; return how many were deleted."""
        ...

    async def prune(self, *, limit: int = 100) -> int:
        """Forget the rotation entries of up to ``limit`` tenants that hold no item in any
        state; return how many. A later enqueue for such a tenant serves it as a new one."""
        ...

    async def stats(self) -> QueueStats:
        """Count the queue's items by state."""
        ...

    async def aclose(self) -> None:
        """Release the queue's resources."""
        ...


@runtime_checkable
class AsyncBatchedWorkQueue(AsyncWorkQueue, Protocol):
    """A WorkQueue that declares ``batched_operations``: each call is one round trip.

    Per-item outcomes come back in the order of the request: one stale token fails only its
    own item. An argument that is invalid anywhere in the batch raises InvalidArgumentError
    and nothing is written; a store error (QueueUnavailableError, StoreOutcomeUnknown) is
    raised for the whole call.
    """

    async def enqueue_many(self, tenant: str, items: Collection[NewItem]) -> list[WorkItem]:
        """Add every item, as ``enqueue`` would one by one (dedupe included), in order."""
        ...

    async def claim_many(self, worker: str, *, limit: int) -> list[Lease]:
        """Lease up to ``limit`` due items, tenants served in the same rotation as ``limit``
        single claims; an empty list when nothing is due."""
        ...

    async def heartbeat_many(self, leases: Collection[Lease]) -> list[Lease | RunyardError]:
        """Extend every lease: the renewed Lease, or the error ``heartbeat`` would raise
        (LeaseLostError, WorkItemNotFoundError) for that item."""
        ...

    async def complete_many(self, leases: Collection[Lease]) -> list[RunyardError | None]:
        """Finish every item: None, or the error ``complete`` would raise for that item."""
        ...

    async def release_many(self, leases: Collection[Lease]) -> list[RunyardError | None]:
        """Hand every leased item back to ready at once without counting the attempt (a
        worker shutting down): None, or the error a settle would raise for that item."""
        ...
