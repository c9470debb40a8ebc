"""The memory queue's state and the transitions every operation shares (ready, retry, kill).

``MemoryQueueCore`` (runyard.memory.queue) builds the protocol on it; pure and single-threaded.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from runyard.clock import Clock
from runyard.models import DeadLetter, Lease, WorkItem
from runyard.policy import QueuePolicy

__all__ = ["MemoryQueueBase"]


@dataclass
class _Tenant:
    turn: int
    # (-priority, available_at, seq, item_id): highest priority, then first due, then readiness.
    ready: list[tuple[int, float, int, str]] = field(default_factory=list)


class MemoryQueueBase:
    """Items, leases, dead letters and the tenant rotation, in dictionaries and heaps."""

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
        # (expires_at, token, tenant, id) of every lease stored; an entry whose lease was settled,
        # renewed or taken over is stale and skipped, so finding lapsed leases costs O(log n).
        self._expiries: list[tuple[float, int, str, str]] = []
        self._seq = 0
        self._token = 0
        self._turns = 0

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

    def _hold(self, lease: Lease) -> Lease:
        """Store ``lease`` (and its item) as the item's current lease."""
        key = (lease.tenant, lease.item_id)
        self._items[key] = lease.item
        self._leases[key] = lease
        heapq.heappush(self._expiries, (lease.expires_at, lease.token, *key))
        return lease

    def _forget(self, item: WorkItem) -> None:
        """Delete the item in any state but leased, as a completion would: its dedupe key, its
        dead letter and its place in line (left stale in the heaps) go with it."""
        key = (item.tenant, item.item_id)
        self._items.pop(key, None)
        self._leases.pop(key, None)
        self._dead.pop(key, None)
        self._ready_seq.pop(key, None)
        dedupe = (item.tenant, item.dedupe_key) if item.dedupe_key is not None else None
        if dedupe is not None and self._dedupe.get(dedupe) == item.item_id:
            del self._dedupe[dedupe]

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

    def _recover(self, now: float, limit: int) -> list[WorkItem]:
        """Take back up to ``limit`` lapsed leases (``now`` past their expiry), oldest expiry
        first: each counts its attempt and is retried after the policy's backoff, or dead."""
        out: list[WorkItem] = []
        while self._expiries and len(out) < limit:
            expires, token, tenant, item_id = self._expiries[0]
            lease = self._leases.get((tenant, item_id))
            current = lease is not None and (lease.token, lease.expires_at) == (token, expires)
            if current and not now > expires:
                break  # the earliest current expiry is still live: so is every other lease
            heapq.heappop(self._expiries)
            if not current:
                continue
            item = self._items[(tenant, item_id)]
            decision = self.policy.on_lapse(item.attempts, now, max_attempts=item.max_attempts)
            if decision.outcome == "dead" or decision.retry_at is None:
                out.append(self._kill(item, decision.reason, "lease lapsed"))
            else:
                out.append(self._retry(item, decision.retry_at, "lease lapsed"))
        return out
