"""prune and prune_processed for the SQLite stores: bounded deletes, one transaction each."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runyard.validation import check_limit, check_older_than

if TYPE_CHECKING:
    from runyard._async.sqlite._adapter import _AsyncTransaction

__all__ = ["AsyncSqliteExecutionRetention", "AsyncSqliteStateRetention"]


class AsyncSqliteStateRetention:
    """Mixin for AsyncSqliteStateStore: ``prune`` of run leases that are not live."""

    if TYPE_CHECKING:  # provided by the adapter base

        def _write(self) -> _AsyncTransaction: ...

    async def prune(self, *, limit: int = 100) -> int:
        """Remove up to ``limit`` lapsed or released run leases; return how many.

        Each tenant keeps the highest epoch pruned (its lease floor), so the next lease of a
        pruned run gets a higher epoch and a late writer with the old one stays fenced. The
        SQLite store keeps no session index sets. Raises InvalidArgumentError.
        """
        check_limit(limit)
        async with self._write() as tx:
            now = await tx.now()
            rows = await tx.fetch("prunable_leases", now=now, limit=limit)
            removed = 0
            for tenant, run_id, epoch in rows:
                await tx.fetch("raise_lease_floor", tenant=tenant, epoch=int(epoch))
                gone = await tx.fetch("delete_lease", tenant=tenant, run_id=run_id, now=now)
                removed += len(gone)
        return removed

    async def _lease_floor(self, tx: _AsyncTransaction, tenant: str) -> int:
        rows = await tx.fetch("lease_floor", tenant=tenant)
        return int(rows[0][0]) if rows else 0


class AsyncSqliteExecutionRetention:
    """Mixin for AsyncSqliteStore: ``prune_processed``."""

    if TYPE_CHECKING:  # provided by the adapter base

        def _write(self) -> _AsyncTransaction: ...

    async def prune_processed(self, *, older_than: float, limit: int = 100) -> int:
        """Delete up to ``limit`` processed marks recorded at least ``older_than`` seconds ago,
        oldest first; return how many. A redelivery of such an event is processed again.
        Raises InvalidArgumentError."""
        age = check_older_than(older_than)
        check_limit(limit)
        async with self._write() as tx:
            now = await tx.now()
            rows = await tx.fetch("prune_processed", cutoff=now - age, limit=limit)
        return len(rows)
