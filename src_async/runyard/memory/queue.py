"""The memory queue core: tenant-fair work items with fenced leases, pure and single-threaded.

The twins wrap it in their lock; it is the reference model property tests compare against. Its
state and shared transitions live in ``queue_base``, its maintenance calls in ``queue_admin``.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Sequence
from typing import Any

from runyard._json import load_json
from runyard.errors import LeaseLostError, RunyardError, WorkItemNotFoundError
from runyard.keys import validate_identifier
from runyard.memory._copies import detached
from runyard.memory.queue_admin import MemoryQueueAdmin
from runyard.models import Lease, NewItem, WorkItem
from runyard.policy import RECLAIM_PER_CLAIM
from runyard.queue_args import CheckedItem, check_item, check_items
from runyard.validation import check_failure, check_limit

__all__ = ["MemoryQueueCore"]


class MemoryQueueCore(MemoryQueueAdmin):
    """Tenant-fair work items with fenced leases, in dictionaries and heaps."""

    def _leased(self, tenant: str, item_id: str, token: int) -> Lease:
        validate_identifier(tenant, "tenant")
        validate_identifier(item_id, "item_id")
        item = self._items.get((tenant, item_id))
        if item is None:
            raise WorkItemNotFoundError(f"no work item {item_id!r} in tenant {tenant!r}")
        lease = self._leases.get((tenant, item_id))
        if lease is None or lease.token != token:
            raise LeaseLostError(item_id, "taken")
        now = self.clock.now()
        if self.policy.renewal_capped(now, lease.claimed_at):
            raise LeaseLostError(item_id, "capped")
        if now > lease.expires_at:
            raise LeaseLostError(item_id, "expired")
        return lease

    # -- protocol --------------------------------------------------------------------------
    @detached
    def enqueue(
        self,
        tenant: str,
        payload: Any,
        *,
        item_id: str | None,
        dedupe_key: str | None,
        priority: int,
        delay_seconds: float,
        run_at: float | None = None,
        max_attempts: int | None = None,
    ) -> WorkItem:
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
        return self._add(tenant, checked)

    def _add(self, tenant: str, checked: CheckedItem) -> WorkItem:
        """Store one checked item; a repeated id or live dedupe key returns the stored one."""
        item_id, dedupe_key = checked.item_id, checked.dedupe_key
        existing = self._items.get((tenant, item_id))
        if existing is not None:
            return existing
        if dedupe_key is not None and (tenant, dedupe_key) in self._dedupe:
            return self._items[(tenant, self._dedupe[(tenant, dedupe_key)])]
        now = self.clock.now()
        item = WorkItem(
            tenant=tenant,
            item_id=item_id,
            payload=load_json(checked.payload),
            priority=checked.priority,
            state="ready",
            available_at=checked.due_at(now),
            enqueued_at=now,
            dedupe_key=dedupe_key,
            max_attempts=checked.max_attempts,
        )
        self._items[(tenant, item_id)] = item
        if dedupe_key is not None:
            self._dedupe[(tenant, dedupe_key)] = item_id
        self._tenant(tenant)
        self._make_ready(item, now)
        return item

    def _claim_due(self, worker: str, now: float) -> Lease | None:
        """Lease the head of the tenant whose turn it is (lowest turn, ties by name)."""
        best: tuple[int, str] | None = None
        for name, state in self._tenants.items():
            if self._head(name, state) is not None and (best is None or (state.turn, name) < best):
                best = (state.turn, name)
        if best is None:
            return None
        tenant = best[1]
        state = self._tenants[tenant]
        _, _, _, item_id = heapq.heappop(state.ready)
        self._turns += 1
        state.turn = self._turns
        self._token += 1
        item = self._items[(tenant, item_id)]
        expires = self.policy.lease_expiry(now, now)
        leased = item.model_copy(
            update={
                "state": "leased",
                "attempts": item.attempts + 1,
                "worker": worker,
                "lease_expires_at": expires,
            }
        )
        return self._hold(
            Lease(item=leased, token=self._token, worker=worker, claimed_at=now, expires_at=expires)
        )

    @detached
    def claim(self, worker: str) -> Lease | None:
        leases = self._claim_many(worker, 1)
        return leases[0] if leases else None

    @detached
    def heartbeat(self, tenant: str, item_id: str, *, token: int) -> Lease:
        lease = self._leased(tenant, item_id, token)
        expires = self.policy.lease_expiry(self.clock.now(), lease.claimed_at)
        item = self._items[(tenant, item_id)].model_copy(update={"lease_expires_at": expires})
        return self._hold(lease.model_copy(update={"item": item, "expires_at": expires}))

    @detached
    def complete(self, tenant: str, item_id: str, *, token: int) -> None:
        self._leased(tenant, item_id, token)
        self._forget(self._items[(tenant, item_id)])

    @detached
    def fail(
        self, tenant: str, item_id: str, *, token: int, error: str | None, retryable: bool
    ) -> WorkItem:
        check_failure(error, retryable)
        self._leased(tenant, item_id, token)
        item = self._items[(tenant, item_id)]
        decision = self.policy.on_failure(
            item.attempts, self.clock.now(), retryable=retryable, max_attempts=item.max_attempts
        )
        if decision.outcome == "dead" or decision.retry_at is None:
            return self._kill(item, decision.reason, error)
        return self._retry(item, decision.retry_at, error)

    @detached
    def release(self, tenant: str, item_id: str, *, token: int) -> WorkItem:
        self._leased(tenant, item_id, token)
        item = self._items[(tenant, item_id)]
        unburned = item.model_copy(update={"attempts": max(item.attempts - 1, 0)})
        return self._retry(unburned, self.clock.now(), None)

    # -- batched (one call each, per-item outcomes) ----------------------------------------
    @detached
    def enqueue_many(self, tenant: str, items: Collection[NewItem]) -> list[WorkItem]:
        checked = check_items(tenant, items, self.max_value_bytes)  # all before the first write
        return [self._add(tenant, spec) for spec in checked]

    @detached
    def claim_many(self, worker: str, *, limit: int) -> list[Lease]:
        return self._claim_many(worker, limit)

    def _claim_many(self, worker: str, limit: int) -> list[Lease]:
        """Take back up to RECLAIM_PER_CLAIM lapsed leases (as ``reap``), then lease up to
        ``limit`` due items in the rotation single claims follow."""
        validate_identifier(worker, "worker")
        check_limit(limit)
        now = self.clock.now()
        self._recover(now, RECLAIM_PER_CLAIM)
        self._promote_due(now)
        leases: list[Lease] = []
        while len(leases) < limit and (lease := self._claim_due(worker, now)) is not None:
            leases.append(lease)
        return leases

    def heartbeat_many(self, targets: Sequence[tuple[str, str, int]]) -> list[Lease | RunyardError]:
        out: list[Lease | RunyardError] = []
        for tenant, item_id, token in targets:
            try:
                out.append(self.heartbeat(tenant, item_id, token=token))
            except (LeaseLostError, WorkItemNotFoundError) as exc:
                out.append(exc)
        return out

    def settle_many(
        self, targets: Sequence[tuple[str, str, int]], *, release: bool
    ) -> list[RunyardError | None]:
        """Complete (or, with ``release``, hand back) every target; per-item errors."""
        out: list[RunyardError | None] = []
        for tenant, item_id, token in targets:
            try:
                if release:
                    self.release(tenant, item_id, token=token)
                else:
                    self.complete(tenant, item_id, token=token)
                out.append(None)
            except (LeaseLostError, WorkItemNotFoundError) as exc:
                out.append(exc)
        return out

    # -- recovery --------------------------------------------------------------------------
    @detached
    def reap(self, *, limit: int) -> list[WorkItem]:
        check_limit(limit)
        return self._recover(self.clock.now(), limit)

    @detached
    def adopt(self, worker: str, *, limit: int) -> list[Lease]:
        """The live leases ``worker`` held, each extended under a NEW token (the old one is
        refused from now on: fencing by incarnation)."""
        validate_identifier(worker, "worker")
        check_limit(limit)
        now = self.clock.now()
        held = sorted(
            (
                lease
                for lease in self._leases.values()
                if lease.worker == worker
                and now <= lease.expires_at
                and not self.policy.renewal_capped(now, lease.claimed_at)
            ),
            key=lambda lease: lease.token,
        )[:limit]
        adopted = []
        for lease in held:
            self._token += 1
            expires = self.policy.lease_expiry(now, lease.claimed_at)
            item = lease.item.model_copy(update={"lease_expires_at": expires})
            update = {"item": item, "token": self._token, "expires_at": expires}
            adopted.append(self._hold(lease.model_copy(update=update)))
        return adopted
