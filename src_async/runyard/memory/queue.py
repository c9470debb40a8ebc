"""The memory queue core: tenant-fair work items with fenced leases, pure and single-threaded.

The twins wrap it in their lock; it is the reference model property tests compare against.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from runyard._json import copy_json
from runyard.clock import Clock
from runyard.errors import LeaseLostError, RunyardError, WorkItemNotFoundError
from runyard.keys import validate_identifier
from runyard.memory._copies import detached
from runyard.models import (
    DeadLetter,
    Lease,
    NewItem,
    QueueStats,
    WorkItem,
)
from runyard.policy import QueuePolicy
from runyard.validation import (
    check_delay,
    check_error_text,
    check_limit,
    check_priority,
    item_id_or_new,
)

__all__ = ["MemoryQueueCore"]


@dataclass
class _Tenant:
    turn: int
    # (-priority, available_at, seq, item_id): highest priority, then first due, then readiness.
    ready: list[tuple[int, float, int, str]] = field(default_factory=list)


class MemoryQueueCore:
    """Tenant-fair work items with fenced leases, in dictionaries and heaps."""

    def __init__(self, clock: Clock, policy: QueuePolicy, max_value_bytes: int) -> None:
        self.clock = clock
        self.policy = policy
        self.max_value_bytes = max_value_bytes
        self._items: dict[tuple[str, str], WorkItem] = {}
        self._leases: dict[tuple[str, str], Lease] = {}
        self._dedupe: dict[tuple[str, str], str] = {}
        self._dead: dict[tuple[str, str], DeadLetter] = {}
        self._tenants: dict[str, _Tenant] = {}
        self._delayed: list[tuple[float, int, str, str]] = []  # (available_at, seq, tenant, id)
        self._ready_seq: dict[tuple[str, str], int] = {}  # the seq an item was last made ready with
        self._seq = 0
        self._token = 0
        self._turns = 0

    # -- helpers ---------------------------------------------------------------------------
    def _tenant(self, tenant: str) -> _Tenant:
        state = self._tenants.get(tenant)
        if state is None:
            state = self._tenants[tenant] = _Tenant(turn=self._turns)
        return state

    def _make_ready(self, item: WorkItem, now: float) -> None:
        self._seq += 1
        self._ready_seq[(item.tenant, item.item_id)] = self._seq
        if item.available_at > now:
            heapq.heappush(self._delayed, (item.available_at, self._seq, item.tenant, item.item_id))
        else:
            self._enter_line(item, self._seq)

    def _enter_line(self, item: WorkItem, seq: int) -> None:
        entry = (-item.priority, item.available_at, seq, item.item_id)
        heapq.heappush(self._tenant(item.tenant).ready, entry)

    def _current(self, tenant: str, item_id: str, seq: int) -> WorkItem | None:
        """The item if it is ready and ``seq`` is the one it was last made ready with."""
        item = self._items.get((tenant, item_id))
        if item is None or item.state != "ready":
            return None
        return item if self._ready_seq.get((tenant, item_id)) == seq else None

    def _promote_due(self, now: float) -> None:
        while self._delayed and self._delayed[0][0] <= now:
            _, seq, tenant, item_id = heapq.heappop(self._delayed)
            item = self._current(tenant, item_id, seq)
            if item is not None:
                self._enter_line(item, seq)

    def _head(self, tenant: str, state: _Tenant) -> str | None:
        while state.ready:
            _, _, seq, item_id = state.ready[0]
            if self._current(tenant, item_id, seq) is not None:
                return item_id
            heapq.heappop(state.ready)
        return None

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

    def _release(self, item: WorkItem) -> None:
        key = (item.tenant, item.item_id)
        self._leases.pop(key, None)
        if item.dedupe_key is not None:
            self._dedupe.pop((item.tenant, item.dedupe_key), None)

    def _kill(self, item: WorkItem, reason: str, error: str | None) -> WorkItem:
        now = self.clock.now()
        dead = item.model_copy(
            update={
                "state": "dead",
                "worker": None,
                "lease_expires_at": None,
                "last_error": error if error is not None else item.last_error,
            }
        )
        key = (item.tenant, item.item_id)
        self._leases.pop(key, None)
        self._items[key] = dead
        self._dead[key] = DeadLetter(item=dead, reason=reason, dead_at=now)
        return dead

    def _retry(self, item: WorkItem, at: float, error: str | None) -> WorkItem:
        ready = item.model_copy(
            update={
                "state": "ready",
                "available_at": at,
                "worker": None,
                "lease_expires_at": None,
                "last_error": error if error is not None else item.last_error,
            }
        )
        self._leases.pop((item.tenant, item.item_id), None)
        self._items[(item.tenant, item.item_id)] = ready
        self._make_ready(ready, self.clock.now())
        return ready

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
    ) -> WorkItem:
        validate_identifier(tenant, "tenant")
        item_id, _ = item_id_or_new(item_id)
        if dedupe_key is not None:
            validate_identifier(dedupe_key, "dedupe_key")
        priority = check_priority(priority)
        delay_seconds = check_delay(delay_seconds)
        stored = copy_json(payload, self.max_value_bytes, "payload")
        existing = self._items.get((tenant, item_id))
        if existing is not None:
            return existing
        if dedupe_key is not None and (tenant, dedupe_key) in self._dedupe:
            return self._items[(tenant, self._dedupe[(tenant, dedupe_key)])]
        now = self.clock.now()
        item = WorkItem(
            tenant=tenant,
            item_id=item_id,
            payload=stored,
            priority=priority,
            state="ready",
            available_at=now + delay_seconds,
            enqueued_at=now,
            dedupe_key=dedupe_key,
        )
        self._items[(tenant, item_id)] = item
        if dedupe_key is not None:
            self._dedupe[(tenant, dedupe_key)] = item_id
        self._tenant(tenant)
        self._make_ready(item, now)
        return item

    @detached
    def claim(self, worker: str) -> Lease | None:
        validate_identifier(worker, "worker")
        now = self.clock.now()
        self._promote_due(now)
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
        self._items[(tenant, item_id)] = leased
        lease = Lease(
            item=leased, token=self._token, worker=worker, claimed_at=now, expires_at=expires
        )
        self._leases[(tenant, item_id)] = lease
        return lease

    @detached
    def heartbeat(self, tenant: str, item_id: str, *, token: int) -> Lease:
        lease = self._leased(tenant, item_id, token)
        expires = self.policy.lease_expiry(self.clock.now(), lease.claimed_at)
        item = self._items[(tenant, item_id)].model_copy(update={"lease_expires_at": expires})
        self._items[(tenant, item_id)] = item
        renewed = lease.model_copy(update={"item": item, "expires_at": expires})
        self._leases[(tenant, item_id)] = renewed
        return renewed

    @detached
    def complete(self, tenant: str, item_id: str, *, token: int) -> None:
        self._leased(tenant, item_id, token)
        item = self._items.pop((tenant, item_id))
        self._ready_seq.pop((tenant, item_id), None)
        self._release(item)

    @detached
    def fail(
        self, tenant: str, item_id: str, *, token: int, error: str | None, retryable: bool
    ) -> WorkItem:
        check_error_text(error)
        self._leased(tenant, item_id, token)
        item = self._items[(tenant, item_id)]
        decision = self.policy.on_failure(item.attempts, self.clock.now(), retryable=retryable)
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
    def enqueue_many(self, tenant: str, items: Sequence[NewItem]) -> list[WorkItem]:
        validate_identifier(tenant, "tenant")
        for spec in items:  # every item is checked before the first is written
            item_id_or_new(spec.item_id)
            if spec.dedupe_key is not None:
                validate_identifier(spec.dedupe_key, "dedupe_key")
            check_priority(spec.priority)
            check_delay(spec.delay_seconds)
            copy_json(spec.payload, self.max_value_bytes, "payload")
        return [
            self.enqueue(
                tenant,
                spec.payload,
                item_id=spec.item_id,
                dedupe_key=spec.dedupe_key,
                priority=spec.priority,
                delay_seconds=spec.delay_seconds,
            )
            for spec in items
        ]

    def claim_many(self, worker: str, *, limit: int) -> list[Lease]:
        validate_identifier(worker, "worker")
        check_limit(limit)
        leases: list[Lease] = []
        while len(leases) < limit and (lease := self.claim(worker)) is not None:
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

    @detached
    def reap(self, *, limit: int) -> list[WorkItem]:
        check_limit(limit)
        now = self.clock.now()
        lapsed = sorted(
            (lease for lease in self._leases.values() if now > lease.expires_at),
            key=lambda lease: (lease.expires_at, lease.token),
        )[:limit]
        out = []
        for lease in lapsed:
            item = self._items[(lease.tenant, lease.item_id)]
            decision = self.policy.on_lapse(item.attempts, now)
            if decision.outcome == "dead" or decision.retry_at is None:
                out.append(self._kill(item, decision.reason, "lease lapsed"))
            else:
                out.append(self._retry(item, decision.retry_at, "lease lapsed"))
        return out

    @detached
    def adopt(self, worker: str, *, limit: int) -> list[Lease]:
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
        return [self.heartbeat(lease.tenant, lease.item_id, token=lease.token) for lease in held]

    @detached
    def dead_letters(self, tenant: str, *, limit: int) -> list[DeadLetter]:
        validate_identifier(tenant, "tenant")
        check_limit(limit)
        letters = sorted(
            (d for (t, _), d in self._dead.items() if t == tenant),
            key=lambda d: (d.dead_at, d.item.item_id),
        )
        return letters[:limit]

    @detached
    def requeue(self, tenant: str, item_id: str) -> WorkItem:
        validate_identifier(tenant, "tenant")
        validate_identifier(item_id, "item_id")
        if self._dead.pop((tenant, item_id), None) is None:
            raise WorkItemNotFoundError(f"no dead-lettered item {item_id!r} in tenant {tenant!r}")
        item = self._items[(tenant, item_id)]
        now = self.clock.now()
        ready = item.model_copy(update={"state": "ready", "attempts": 0, "available_at": now})
        self._items[(tenant, item_id)] = ready
        self._make_ready(ready, now)
        return ready

    @detached
    def get_item(self, tenant: str, item_id: str) -> WorkItem | None:
        validate_identifier(tenant, "tenant")
        validate_identifier(item_id, "item_id")
        return self._items.get((tenant, item_id))

    @detached
    def stats(self) -> QueueStats:
        now = self.clock.now()
        ready = delayed = leased = dead = 0
        tenants = set()
        for item in self._items.values():
            if item.state == "leased":
                leased += 1
            elif item.state == "dead":
                dead += 1
            elif item.available_at > now:
                delayed += 1
            else:
                ready += 1
                tenants.add(item.tenant)
        return QueueStats(
            ready=ready, delayed=delayed, leased=leased, dead=dead, tenants=len(tenants)
        )
