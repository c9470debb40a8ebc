"""prune and prune_processed for the PostgreSQL stores: one bounded statement each."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from runyard.validation import check_limit, check_older_than
from runyard.writes import TOMBSTONE_SECONDS

__all__ = ["AsyncPostgresExecutionRetention", "AsyncPostgresStateRetention"]


class _Fetching:
    if TYPE_CHECKING:  # provided by the adapter base

        def _now(self) -> float: ...

        async def _fetch(
            self, name: str, *args: Any, idempotent: bool = True
        ) -> Sequence[Sequence[Any]]: ...


class AsyncPostgresStateRetention(_Fetching):
    """Mixin for AsyncPostgresStateStore: ``prune`` of run lease rows that are not live and of
    tombstones past their retention."""

    async def prune(self, *, limit: int = 100) -> int:
        """Delete up to ``limit`` rows in all: lease rows that were released or lapsed, then
        tombstones of deleted runs and sessions older than runyard.writes.TOMBSTONE_SECONDS,
        oldest first; return how many.

        Epochs come from a sequence that never repeats a value, so the next lease of a pruned
        run gets a higher epoch and a late writer with the old one stays fenced. PostgreSQL
        keeps no session index sets. Re-sent when the reply is lost (deleting a lease that is
        not live, or an old tombstone, is safe to repeat; the count is then that of the
        repeat). Raises InvalidArgumentError.
        """
        check_limit(limit)
        now = self._now()
        pruned = len(await self._fetch("prune_leases", now, limit))
        if pruned < limit:
            cutoff = now - TOMBSTONE_SECONDS
            pruned += len(await self._fetch("prune_tombstones", cutoff, limit - pruned))
        return pruned


class AsyncPostgresExecutionRetention(_Fetching):
    """Mixin for AsyncPostgresExecutionStore: ``prune_processed``."""

    async def prune_processed(self, *, older_than: float, limit: int = 100) -> int:
        """Delete up to ``limit`` processed marks recorded at least ``older_than`` seconds ago,
        oldest first; return how many. A redelivery of such an event is processed again.
        Raises InvalidArgumentError."""
        age = check_older_than(older_than)
        check_limit(limit)
        rows = await self._fetch("prune_processed", self._now() - age, limit)
        return len(rows)
