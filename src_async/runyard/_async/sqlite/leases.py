"""Fenced run leases for AsyncSqliteStateStore: acquire, renew, release and read, each one
transaction."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runyard.errors import LeaseLostError, RunLeaseHeldError
from runyard.keys import validate_identifier
from runyard.models import RunKey, RunLease
from runyard.sqlite.rows import decode_run_lease
from runyard.validation import check_run_lease, check_ttl

if TYPE_CHECKING:
    from runyard._async.sqlite._adapter import _AsyncTransaction

__all__ = ["AsyncSqliteRunLeases"]


class AsyncSqliteRunLeases:
    """Mixin for AsyncSqliteStateStore: its run leases (epochs above the tenant's lease floor,
    see AsyncSqliteStateRetention)."""

    if TYPE_CHECKING:  # provided by the adapter base and the retention mixin

        def _write(self) -> _AsyncTransaction: ...

        def _read(self) -> _AsyncTransaction: ...

        async def _lease_floor(self, tx: _AsyncTransaction, tenant: str) -> int: ...

    async def acquire_lease(self, key: RunKey, holder: str, *, ttl_seconds: float) -> RunLease:
        """Lease the run to ``holder``: a new epoch unless ``holder`` still holds it.

        Raises RunLeaseHeldError naming the live holder.
        """
        validate_identifier(holder, "holder")
        ttl = check_ttl(ttl_seconds)
        async with self._write() as tx:
            now = await tx.now()
            ids = {"tenant": key.tenant, "run_id": key.run_id}
            rows = await tx.fetch("get_lease", **ids)
            current = rows[0] if rows else None
            if current is not None and current[2] is not None and float(current[4]) >= now:
                if current[2] != holder:
                    raise RunLeaseHeldError(current[2], int(current[3]), float(current[4]))
                epoch = int(current[3])
            else:
                # Above the run's last epoch and above any epoch prune() removed.
                last = int(current[3]) if current is not None else 0
                epoch = max(last, await self._lease_floor(tx, key.tenant)) + 1
            written = await tx.fetch(
                "put_lease", holder=holder, epoch=epoch, expires_at=now + ttl, **ids
            )
            return decode_run_lease(written[0])

    async def renew_lease(self, lease: RunLease, *, ttl_seconds: float) -> RunLease:
        """Extend a live lease, keeping its epoch. Raises LeaseLostError ("taken", "expired")."""
        check_run_lease(lease)
        ttl = check_ttl(ttl_seconds)
        async with self._write() as tx:
            now = await tx.now()
            ids = {"tenant": lease.tenant, "run_id": lease.run_id}
            rows = await tx.fetch("get_lease", **ids)
            if not rows or rows[0][2] is None or int(rows[0][3]) != lease.epoch:
                raise LeaseLostError(lease.run_id, "taken")
            if float(rows[0][4]) < now:
                raise LeaseLostError(lease.run_id, "expired")
            renewed = await tx.fetch("renew_lease", epoch=lease.epoch, expires_at=now + ttl, **ids)
            return decode_run_lease(renewed[0])

    async def release_lease(self, lease: RunLease) -> bool:
        """Release the lease if it is still current; a stale release changes nothing."""
        check_run_lease(lease)
        async with self._write() as tx:
            rows = await tx.fetch(
                "release_lease", tenant=lease.tenant, run_id=lease.run_id, epoch=lease.epoch
            )
        return bool(rows)

    async def get_lease(self, key: RunKey) -> RunLease | None:
        """Return the live lease on the run, or None."""
        async with self._read() as tx:
            rows = await tx.fetch("get_lease", tenant=key.tenant, run_id=key.run_id)
            now = await tx.now()
        if not rows or rows[0][2] is None or float(rows[0][4]) < now:
            return None
        return decode_run_lease(rows[0])
