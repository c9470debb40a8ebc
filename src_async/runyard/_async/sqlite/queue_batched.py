"""The batched calls of the SQLite work queue: each is one transaction in one trip to the driver."""

from __future__ import annotations

from collections.abc import Collection

from runyard._async.sqlite._adapter import _AsyncSqliteAdapter
from runyard.errors import RunyardError
from runyard.keys import validate_identifier
from runyard.models import Lease, NewItem, WorkItem
from runyard.queue_args import check_items, check_leases
from runyard.sqlite.queue_transactions import (
    QueuePlan,
    claim_body,
    enqueue_body,
    heartbeat_body,
    settle_body,
)
from runyard.validation import check_limit

__all__ = ["_AsyncBatchedSqliteQueue"]


class _AsyncBatchedSqliteQueue(_AsyncSqliteAdapter):
    """``enqueue_many``, ``claim_many``, ``heartbeat_many``, ``complete_many`` and
    ``release_many``: one ``BEGIN IMMEDIATE`` transaction each, per-item outcomes in order."""

    _plan: QueuePlan

    async def enqueue_many(self, tenant: str, items: Collection[NewItem]) -> list[WorkItem]:
        """Add every item, as ``enqueue`` would one by one (dedupe included), in order.

        Every item is checked before any is written: InvalidArgumentError (or
        StatePersistenceError for a payload that is not storable JSON) and nothing is added.
        """
        checked = check_items(tenant, items, self.max_value_bytes)
        if not checked:
            return []
        return await self._transact(enqueue_body, self._plan, self._now(), tenant, checked)

    async def claim_many(self, worker: str, *, limit: int) -> list[Lease]:
        """Lease up to ``limit`` due items, tenants served in the rotation of ``limit`` single
        claims (after reclaiming a few lapsed leases, as ``claim`` does); [] when none is due."""
        validate_identifier(worker, "worker")
        check_limit(limit)
        return await self._claim(worker, limit)

    async def _claim(self, worker: str, limit: int) -> list[Lease]:
        """claim_body's transactions: another one after each whole round of put-back parked
        tenants (each round commits, so no transaction holds the write lock for more)."""
        leases: list[Lease] | None = None
        round_ = 0
        while leases is None:  # round MAX_UNPARK_ROUNDS claims whatever it put back
            leases = await self._transact(
                claim_body, self._plan, self._now(), worker, limit, round_
            )
            round_ += 1
        return leases

    async def heartbeat_many(self, leases: Collection[Lease]) -> list[Lease | RunyardError]:
        """Extend every lease: the renewed Lease, or the error ``heartbeat`` would raise
        (LeaseLostError, WorkItemNotFoundError) for that item."""
        targets = check_leases(leases)
        if not targets:
            return []
        return await self._transact(heartbeat_body, self._plan, self._now(), targets)

    async def complete_many(self, leases: Collection[Lease]) -> list[RunyardError | None]:
        """Finish every item: None, or the error ``complete`` would raise for that item."""
        return await self._settle_many(leases, "complete")

    async def release_many(self, leases: Collection[Lease]) -> list[RunyardError | None]:
        """Hand every leased item back to ready at once, its attempt not counted (a worker
        shutting down): None, or the error a settle would raise for that item."""
        return await self._settle_many(leases, "release")

    async def _settle_many(
        self, leases: Collection[Lease], statement: str
    ) -> list[RunyardError | None]:
        targets = check_leases(leases)
        if not targets:
            return []
        return await self._transact(settle_body, self._plan, self._now(), targets, statement)
