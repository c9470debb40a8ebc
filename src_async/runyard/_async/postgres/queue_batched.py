"""The PostgreSQL work queue's batched calls (``*_many``): one statement each."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, TypeVar

from runyard._async.postgres.queue_core import (
    MAX_TENANTS_PASSED_OVER,
    MAX_UNPARK_ROUNDS,
    _AsyncPostgresQueueCore,
)
from runyard._sql import settle_refusal
from runyard.errors import LeaseLostError, QueueUnavailableError, RunyardError
from runyard.keys import validate_identifier
from runyard.models import Lease, NewItem, WorkItem
from runyard.postgres.batches import Wave, in_batch_order, lease_waves, pair_enqueued
from runyard.postgres.rows import decode_lease
from runyard.postgres.statements.queue_batched import claim_many_call
from runyard.queue_args import check_items
from runyard.validation import check_limit

__all__: list[str] = []

T = TypeVar("T")


async def _in_waves(
    leases: Collection[Lease], send: Callable[[Wave], Awaitable[list[T]]]
) -> list[T]:
    """``send`` each wave of ``leases`` (``lease_waves``: one, unless the batch names an item
    twice) in turn; the outcomes in batch order."""
    waves = lease_waves(leases)
    if len(waves) == 1:
        return await send(waves[0])  # the usual batch: its own order already
    return in_batch_order([(wave, await send(wave)) for wave in waves], len(leases))


class _AsyncPostgresBatchedQueue(_AsyncPostgresQueueCore):
    """The ``batched_operations`` of AsyncPostgresWorkQueue: per-item outcomes, in order."""

    async def enqueue_many(self, tenant: str, items: Collection[NewItem]) -> list[WorkItem]:
        """Add every item, as ``enqueue`` would one by one (dedupe included), in order.

        One statement, which wakes idle workers at its commit; every item is checked before
        anything is sent (InvalidArgumentError, StatePersistenceError for a payload).
        """
        checked = check_items(tenant, items, self.max_value_bytes)
        if not checked:
            return []
        ids = [item.item_id for item in checked]
        texts = [item.payload for item in checked]
        priorities = [item.priority for item in checked]
        keys = [item.dedupe_key for item in checked]
        limits = [item.max_attempts for item in checked]
        for _ in range(3):
            now = self._now()
            due = [item.due_at(now) for item in checked]
            rows = await self._fetch(
                "enqueue_many",
                tenant,
                ids,
                texts,
                priorities,
                due,
                now,
                keys,
                limits,
                self._wake,
            )
            found = pair_enqueued(ids, keys, rows)
            if found is not None:
                return found
        raise QueueUnavailableError("the items kept changing while enqueuing; try again")

    async def claim_many(self, worker: str, *, limit: int) -> list[Lease]:
        """Lease up to ``limit`` due items, tenants served in the rotation ``limit`` single
        claims would follow; an empty list when nothing is due.

        One statement, waiting on no lock (another round trip only when every due head it
        found was locked by other claims, or it put parked tenants back, or took back a lapsed
        lease due at once: then it claimed nothing, and the next statement serves them).
        Raises StoreOutcomeUnknown when the reply was lost (adopt() recovers such leases).
        """
        validate_identifier(worker, "worker")
        check_limit(limit)
        leases: list[Lease] = []
        passed_over: list[str] = []
        woken = 0
        while (
            len(leases) < limit
            and len(passed_over) <= MAX_TENANTS_PASSED_OVER
            and woken <= MAX_UNPARK_ROUNDS
        ):
            now = self._now()
            expires = self.policy.lease_expiry(now, now)
            drained = self._take_drained()
            reclaim = self._reclaim_args(now, first=not (woken or passed_over))
            name, args = claim_many_call(
                (now, worker, expires, passed_over),
                limit - len(leases),
                reclaim,
                drained,
                parking=not self._bound,
            )
            rows = await self._send_claim(name, args, drained, worker, "each lease it took is")
            self._reclaimed(reclaim[0], int(rows[0][2]) if rows else None)
            if rows and rows[0][1] is None:  # parked tenants put back: send it again
                woken += 1
                continue
            claimed = [row for row in rows if row[0] is not None]
            leases += [decode_lease(row[3:]) for row in claimed]
            if claimed or not rows:
                break
            passed_over += [str(row[1]) for row in rows]
        await self._served(sorted({lease.tenant for lease in leases}))
        return leases

    def _refusals(
        self,
        tenants: list[str],
        ids: list[str],
        tokens: list[int],
        rows: Sequence[Sequence[Any]],
        now: float,
    ) -> list[RunyardError | None]:
        """Per item: None when the statement settled it, else why it was refused (from the
        probe columns at the end of its row)."""
        out: list[RunyardError | None] = []
        for tenant, item_id, token, row in zip(tenants, ids, tokens, rows, strict=True):
            if row[1]:
                out.append(None)
                continue
            probe = row[2:] if row[3] is not None else None
            refusal = settle_refusal(tenant, item_id, token, probe, now, self.policy)
            out.append(refusal or LeaseLostError(item_id, "taken"))
        return out

    async def heartbeat_many(self, leases: Collection[Lease]) -> list[Lease | RunyardError]:
        """Extend every lease: the renewed Lease, or the error ``heartbeat`` would raise
        (LeaseLostError, WorkItemNotFoundError) for that item. One statement (one more for
        each repeat of a lease in the batch)."""
        return await _in_waves(leases, self._heartbeat_wave)

    async def _heartbeat_wave(self, wave: Wave) -> list[Lease | RunyardError]:
        tenants, ids, tokens = wave.tenants, wave.ids, wave.tokens
        now = self._now()
        rows = await self._fetch(
            "heartbeat_many",
            tenants,
            ids,
            tokens,
            now,
            float(self.policy.max_lease_seconds),
            now + float(self.policy.lease_seconds),
        )
        width = len(rows[0]) - 5 if rows else 0
        out: list[Lease | RunyardError] = []
        for tenant, item_id, token, row in zip(tenants, ids, tokens, rows, strict=True):
            if row[1] is not None:
                out.append(decode_lease(row[1:width]))
                continue
            probe = row[width:] if row[width + 1] is not None else None
            refusal = settle_refusal(tenant, item_id, token, probe, now, self.policy)
            out.append(refusal or LeaseLostError(item_id, "taken"))
        return out

    async def complete_many(self, leases: Collection[Lease]) -> list[RunyardError | None]:
        """Finish every item: None, or the error ``complete`` would raise for that item.

        One statement. Raises StoreOutcomeUnknown when the reply was lost.
        """
        return await self._settle_many("complete_many", leases)

    async def release_many(self, leases: Collection[Lease]) -> list[RunyardError | None]:
        """Hand every leased item back to ready at once without counting the attempt (a
        worker shutting down): None, or the error a settle would raise for that item.

        One statement, which wakes idle workers at its commit. Raises StoreOutcomeUnknown when
        the reply was lost.
        """
        return await self._settle_many("release_many", leases, self._wake)

    async def _settle_many(
        self, name: str, leases: Collection[Lease], *extra: Any
    ) -> list[RunyardError | None]:
        """One statement per wave (``lease_waves``): one, unless the batch repeats an item."""
        return await _in_waves(leases, lambda wave: self._settle_wave(name, wave, *extra))

    async def _settle_wave(self, name: str, wave: Wave, *extra: Any) -> list[RunyardError | None]:
        tenants, ids, tokens = wave.tenants, wave.ids, wave.tokens
        now = self._now()
        rows = await self._fetch(
            name,
            tenants,
            ids,
            tokens,
            now,
            float(self.policy.max_lease_seconds),
            *extra,
            idempotent=False,
        )
        return self._refusals(tenants, ids, tokens, rows, now)
