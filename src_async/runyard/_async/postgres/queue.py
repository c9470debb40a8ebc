"""AsyncPostgresWorkQueue: tenant-fair work items with fenced leases in PostgreSQL."""

from __future__ import annotations

from runyard._async.postgres.queue_batched import _AsyncPostgresBatchedQueue
from runyard._async.postgres.wakeup import AsyncPostgresWakeup
from runyard.capabilities import StoreCapabilities
from runyard.errors import ItemLeasedError, WorkItemNotFoundError
from runyard.keys import validate_identifier
from runyard.models import DeadLetter, Lease, QueueStats, WorkItem
from runyard.postgres.rows import (
    PruneCursor,
    decode_dead_letter,
    decode_item,
    decode_lease,
    item_state,
)
from runyard.postgres.wake import listen_dsn
from runyard.validation import check_limit, check_older_than

__all__ = ["AsyncPostgresWorkQueue"]

# How many rotation rows one prune() call looks at (it resumes after the last one next time).
PRUNE_WINDOW = 1_000


class AsyncPostgresWorkQueue(_AsyncPostgresBatchedQueue):
    """A WorkQueue in PostgreSQL: the claim is one statement, every settle is fenced.

    Build it on a psycopg ``AsyncConnectionPool``/``AsyncConnection`` or any executor;
    ``open()`` and ``from_settings()`` also run verify(). ``bound(connection)`` joins the
    caller's transaction, so work is enqueued atomically with the caller's own writes (and
    idle workers are woken when that transaction commits).
    """

    async def open_wakeup(self) -> AsyncPostgresWakeup | None:
        """The wake-up an idle worker of this queue waits on: a LISTEN connection of its own
        on the work table's channel, made with the DSN this queue was opened with (settings
        or URL) or its pool's conninfo and connection keywords; None when it has neither (a
        connection or an executor given as the source, a pool whose conninfo is a function).
        A worker given no ``wakeup`` opens it when it starts. Raises psycopg.Error when the
        connection cannot be made (or the pool's keywords make no conninfo)."""
        dsn = listen_dsn(self._secret, getattr(self._executor, "source", None))
        if dsn is None:
            return None
        return await AsyncPostgresWakeup.connect(dsn, tables=self.tables)

    capabilities = StoreCapabilities(
        version=1,
        fenced_writes=True,
        retry_ids=True,
        transactional=True,
        atomic_settle=True,
        recovery=True,
        batched_operations=True,
        deployment="multi_server",
    )

    # -- recovery ----------------------------------------------------------------------------
    async def reap(self, *, limit: int = 100) -> list[WorkItem]:
        """Return lapsed leases to ready after the policy's backoff (or to the dead letter, out
        of attempts), at most ``limit``, oldest expiry first.

        Candidates are read first, then applied in one statement that skips rows another
        session holds (``SKIP LOCKED``) and repeats every lapse predicate.
        """
        check_limit(limit)
        now = self._now()
        lapsed = await self._fetch("lapsed", now, limit)
        if not lapsed:
            return []
        decisions = [self.policy.on_lapse(int(row[3]), now, max_attempts=row[4]) for row in lapsed]
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
        """Return (and extend) the live leases ``worker`` holds, in claim order, each under a
        NEW token: the old one is refused from then on (LeaseLostError "taken"), so a paused
        incarnation of the worker cannot settle what its successor adopted."""
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
            idempotent=False,
        )
        return [decode_lease(row[1:]) for row in sorted(rows, key=lambda row: int(row[0]))]

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

    async def cancel(self, tenant: str, item_id: str) -> bool:
        """Delete a ready, delayed or dead item (freeing its dedupe key): True; False when the
        item is unknown or already completed. One statement.

        Raises ItemLeasedError (nothing changes) when the item is leased.
        """
        validate_identifier(tenant, "tenant")
        validate_identifier(item_id, "item_id")
        while True:
            rows = await self._fetch("cancel", tenant, item_id, self._now(), idempotent=False)
            if not rows:
                return False
            state, worker, deleted = rows[0]
            if deleted:
                return True
            if state == "leased":
                raise ItemLeasedError(item_id, worker)
            # Claimed or settled by another session after this statement's snapshot: look again.

    async def purge_dead(self, tenant: str, *, older_than: float = 0.0, limit: int = 100) -> int:
        """Delete up to ``limit`` of the tenant's dead letters that died at least
        ``older_than`` seconds ago, oldest first; return how many. One statement. Raises
        StoreOutcomeUnknown when its reply is lost (a resend would count only what it
        deleted itself): call it again, as on Redis."""
        validate_identifier(tenant, "tenant")
        older_than = check_older_than(older_than)
        check_limit(limit)
        rows = await self._fetch(
            "purge_dead", tenant, self._now() - older_than, limit, idempotent=False
        )
        return int(rows[0][0])

    async def prune(self, *, limit: int = 100) -> int:
        """Remove the rotation rows of up to ``limit`` tenants that hold no item in any state,
        least recently served first; return how many. Bounded: one call looks at PRUNE_WINDOW
        rotation rows in turn order, resuming where the last one stopped; a pass over the
        rotation covers the turns up to the highest one at its start, so it ends. A later
        enqueue for such a tenant joins the rotation as new. Up to 1,000 rows of the delays
        ledger that no longer count (due in the past) go too. Raises StoreOutcomeUnknown when
        its reply is lost, as on Redis."""
        check_limit(limit)
        turn, tenant, bound = self._prune_after.args()
        rows = await self._fetch(
            "prune", turn, PRUNE_WINDOW, limit, self._now(), tenant, bound, idempotent=False
        )
        self._prune_after, removed = PruneCursor.after(rows[0])
        return removed

    async def stats(self) -> QueueStats:
        """Count the queue's items by state, from the counts every state change maintains (the
        work table's rows are never read). Not bounded: delayed sums the delays ledger's rows
        due after now (one per delayed item), tenants probes each rotation row (one index
        entry each); see docs/postgres.md, "What stats() costs"."""
        rows = await self._fetch("stats", self._now())
        ready, delayed, leased, dead, tenants = (int(v) for v in rows[0])
        return QueueStats(ready=ready, delayed=delayed, leased=leased, dead=dead, tenants=tenants)
