"""AsyncPostgresRunLeases: the fenced run leases of AsyncPostgresStateStore."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from runyard.errors import (
    LeaseLostError,
    RunLeaseHeldError,
    StatePersistenceError,
    StoreOutcomeUnknown,
)
from runyard.keys import validate_identifier
from runyard.models import RunKey, RunLease
from runyard.postgres.rows import (
    decode_run_lease,
)
from runyard.validation import check_run_lease, check_ttl

__all__ = ["AsyncPostgresRunLeases"]


class AsyncPostgresRunLeases:
    """Mixin for AsyncPostgresStateStore: run leases with a fencing epoch, one statement each."""

    _bound: bool

    if TYPE_CHECKING:  # provided by the adapter base

        def _now(self) -> float: ...

        async def _fetch(
            self, name: str, *args: Any, idempotent: bool = True
        ) -> Sequence[Sequence[Any]]: ...

    # -- run leases --------------------------------------------------------------------------
    async def acquire_lease(self, key: RunKey, holder: str, *, ttl_seconds: float) -> RunLease:
        """Lease the run to ``holder``: a new epoch unless ``holder`` still holds it.

        Raises RunLeaseHeldError naming the live holder.
        """
        validate_identifier(holder, "holder")
        ttl = check_ttl(ttl_seconds)
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
        check_run_lease(lease)
        ttl = check_ttl(ttl_seconds)
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
        """Release the lease if it is still current; a stale release changes nothing.

        Raises StoreOutcomeUnknown when the reply was lost and reading back cannot settle it
        (the lease row shows a later epoch: whether this release landed first is unknown).
        """
        check_run_lease(lease)
        try:
            return await self._release(lease)
        except StoreOutcomeUnknown:
            if self._bound:
                raise
            # The epoch is the release's identity: read the lease row back.
            rows = await self._fetch("get_lease", lease.tenant, lease.run_id)
            if not rows:
                return False  # there was never a lease to release
            holder, epoch = rows[0][2], int(rows[0][3])
            if epoch == lease.epoch:
                if holder is None:
                    return True  # released: by this call
                return await self._release(lease)  # not applied: release it now
            raise

    async def _release(self, lease: RunLease) -> bool:
        rows = await self._fetch(
            "release_lease", lease.tenant, lease.run_id, lease.epoch, idempotent=False
        )
        return bool(rows)

    async def get_lease(self, key: RunKey) -> RunLease | None:
        """Return the live lease on the run, or None."""
        rows = await self._fetch("get_lease", key.tenant, key.run_id)
        if not rows or rows[0][2] is None or float(rows[0][4]) < self._now():
            return None
        return decode_run_lease(rows[0])
