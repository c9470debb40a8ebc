"""The memory backend's logic, pure and single-threaded; the twins wrap it in their lock.

It is also the reference model that property tests compare other backends against.
"""

from __future__ import annotations

import copy
import functools
import heapq
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from runyard._json import dump_json, load_json
from runyard.clock import Clock
from runyard.errors import (
    LeaseLostError,
    RunLeaseHeldError,
    StateConflictError,
    StateInUseError,
    StateNotFoundError,
    WorkItemNotFoundError,
)
from runyard.keys import decode_cursor, encode_cursor, validate_identifier
from runyard.models import (
    CounterDelta,
    DeadLetter,
    Lease,
    QueueStats,
    RunKey,
    RunLease,
    RunPage,
    RunRecord,
    SessionRecord,
    WorkItem,
)
from runyard.policy import QueuePolicy

__all__ = [
    "DEFAULT_MAX_VALUE_BYTES",
    "DEFAULT_STATUS",
    "MemoryQueueCore",
    "MemoryStateCore",
    "check_limit",
    "check_ttl",
]

DEFAULT_MAX_VALUE_BYTES = 262_144
DEFAULT_STATUS = "running"


def check_limit(limit: int, what: str = "limit") -> int:
    """Return ``limit`` if it is a positive page size of at most 10,000; else raise ValueError."""
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 10_000:
        raise ValueError(f"{what} must be an int between 1 and 10000, not {limit!r}")
    return limit


def _copy(value: Any, max_bytes: int | None, what: str) -> Any:
    return load_json(dump_json(value, max_bytes=max_bytes, what=what))


P = ParamSpec("P")
T = TypeVar("T")


def _fresh(value: Any) -> Any:
    return copy.deepcopy(value) if isinstance(value, (dict, list)) else value


def _detach(value: Any) -> Any:
    """A copy of a returned record that shares no mutable JSON with the stored one.

    Only the JSON fields (blob, payload) can be mutated by a caller; the rest of each model is
    frozen and immutable, so a shallow copy with a fresh JSON field is enough (and several
    times cheaper than a deep model copy on this hot path).
    """
    if isinstance(value, (RunRecord, SessionRecord)):
        return value.model_copy(update={"blob": _fresh(value.blob)})
    if isinstance(value, WorkItem):
        return value.model_copy(update={"payload": _fresh(value.payload)})
    if isinstance(value, (Lease, DeadLetter)):
        return value.model_copy(update={"item": _detach(value.item)})
    if isinstance(value, RunPage):
        return value.model_copy(update={"items": [_detach(r) for r in value.items]})
    if isinstance(value, list):
        return [_detach(v) for v in value]
    return value


def detached(method: Callable[P, T]) -> Callable[P, T]:
    """Return deep copies of what ``method`` returns, so no caller can change stored state
    (what Redis and PostgreSQL give by construction)."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        return _detach(method(*args, **kwargs))  # type: ignore[no-any-return]

    return wrapper


class MemoryStateCore:
    """Runs, sessions and run leases in dictionaries."""

    def __init__(self, clock: Clock, max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES) -> None:
        self.clock = clock
        self.max_value_bytes = max_value_bytes
        self._runs: dict[tuple[str, str], RunRecord] = {}
        self._sessions: dict[tuple[str, str], SessionRecord] = {}
        self._leases: dict[tuple[str, str], RunLease] = {}
        self._epochs: dict[tuple[str, str], int] = {}
        self._seq = 0

    # -- fencing ---------------------------------------------------------------------------
    def _check_fence(self, key: RunKey, fence: int | None) -> None:
        if fence is None:
            return
        k = (key.tenant, key.run_id)
        if self._epochs.get(k, 0) != fence:
            raise LeaseLostError(key.run_id, "taken")
        lease = self._leases.get(k)
        if lease is None or lease.expires_at < self.clock.now():
            raise LeaseLostError(key.run_id, "expired")

    # -- runs ------------------------------------------------------------------------------
    @detached
    def put_run(
        self,
        key: RunKey,
        blob: Any,
        *,
        expected_version: int,
        status: str | None,
        session_id: str | None,
        fence: int | None,
    ) -> RunRecord:
        stored = _copy(blob, self.max_value_bytes, "run blob")
        if session_id is not None:
            validate_identifier(session_id, "session_id")
        k = (key.tenant, key.run_id)
        existing = self._runs.get(k)
        actual = existing.version if existing else 0
        if expected_version != actual:
            raise StateConflictError(expected_version, actual)
        self._check_fence(key, fence)
        now = self.clock.now()
        if existing is None:
            self._seq += 1
            record = RunRecord(
                tenant=key.tenant,
                run_id=key.run_id,
                blob=stored,
                version=1,
                status=status or DEFAULT_STATUS,
                session_id=session_id,
                created_at=now,
                updated_at=now,
                seq=self._seq,
            )
        else:
            record = existing.model_copy(
                update={
                    "blob": stored,
                    "version": actual + 1,
                    "status": status or existing.status,
                    "session_id": session_id if session_id is not None else existing.session_id,
                    "updated_at": now,
                }
            )
        self._runs[k] = record
        return record

    @detached
    def patch_run(
        self, key: RunKey, delta: CounterDelta, *, status: str | None, fence: int | None
    ) -> RunRecord:
        k = (key.tenant, key.run_id)
        existing = self._runs.get(k)
        if existing is None:
            raise StateNotFoundError(f"run {key.run_id!r} of tenant {key.tenant!r} does not exist")
        self._check_fence(key, fence)
        record = existing.model_copy(
            update={
                "input_tokens": existing.input_tokens + delta.input_tokens,
                "output_tokens": existing.output_tokens + delta.output_tokens,
                "cost_micros": existing.cost_micros + delta.cost_micros,
                "iterations": existing.iterations + delta.iterations,
                "cursor": existing.cursor + delta.cursor,
                "status": status or existing.status,
                "version": existing.version + 1,
                "updated_at": self.clock.now(),
            }
        )
        self._runs[k] = record
        return record

    @detached
    def get_run(self, key: RunKey) -> RunRecord | None:
        return self._runs.get((key.tenant, key.run_id))

    @detached
    def delete_run(self, key: RunKey, *, expected_version: int | None, fence: int | None) -> bool:
        k = (key.tenant, key.run_id)
        existing = self._runs.get(k)
        if existing is None:
            if expected_version:
                raise StateConflictError(expected_version, 0)
            return False
        if expected_version is not None and expected_version != existing.version:
            raise StateConflictError(expected_version, existing.version)
        self._check_fence(key, fence)
        del self._runs[k]
        return True

    @detached
    def list_runs(
        self,
        tenant: str,
        *,
        status: str | None,
        session_id: str | None,
        limit: int,
        cursor: str | None,
    ) -> RunPage:
        validate_identifier(tenant, "tenant")
        check_limit(limit)
        after = decode_cursor(cursor)
        matching = sorted(
            (
                r
                for (t, _), r in self._runs.items()
                if t == tenant
                and r.seq > after
                and (status is None or r.status == status)
                and (session_id is None or r.session_id == session_id)
            ),
            key=lambda r: r.seq,
        )
        page = matching[:limit]
        more = len(matching) > limit
        return RunPage(items=page, next_cursor=encode_cursor(page[-1].seq) if more else None)

    # -- sessions --------------------------------------------------------------------------
    @detached
    def put_session(
        self, tenant: str, session_id: str, blob: Any, *, expected_version: int
    ) -> SessionRecord:
        validate_identifier(tenant, "tenant")
        validate_identifier(session_id, "session_id")
        stored = _copy(blob, self.max_value_bytes, "session blob")
        k = (tenant, session_id)
        existing = self._sessions.get(k)
        actual = existing.version if existing else 0
        if expected_version != actual:
            raise StateConflictError(expected_version, actual, what="session")
        now = self.clock.now()
        record = SessionRecord(
            tenant=tenant,
            session_id=session_id,
            blob=stored,
            version=actual + 1,
            created_at=existing.created_at if existing else now,
            updated_at=now,
        )
        self._sessions[k] = record
        return record

    @detached
    def get_session(self, tenant: str, session_id: str) -> SessionRecord | None:
        validate_identifier(tenant, "tenant")
        validate_identifier(session_id, "session_id")
        return self._sessions.get((tenant, session_id))

    @detached
    def delete_session(self, tenant: str, session_id: str, *, cascade: bool) -> bool:
        validate_identifier(tenant, "tenant")
        validate_identifier(session_id, "session_id")
        runs = [k for k, r in self._runs.items() if k[0] == tenant and r.session_id == session_id]
        if runs and not cascade:
            raise StateInUseError(
                f"session {session_id!r} still has {len(runs)} run(s); "
                "delete them first or pass cascade=True"
            )
        for k in runs:
            del self._runs[k]
        return self._sessions.pop((tenant, session_id), None) is not None or bool(runs)

    # -- run leases ------------------------------------------------------------------------
    @detached
    def acquire_lease(self, key: RunKey, holder: str, *, ttl_seconds: float) -> RunLease:
        validate_identifier(holder, "holder")
        check_ttl(ttl_seconds)
        k = (key.tenant, key.run_id)
        now = self.clock.now()
        current = self._leases.get(k)
        if current is not None and current.expires_at >= now:
            if current.holder != holder:
                raise RunLeaseHeldError(current.holder, current.epoch, current.expires_at)
            epoch = current.epoch
        else:
            epoch = self._epochs.get(k, 0) + 1
            self._epochs[k] = epoch
        lease = RunLease(
            tenant=key.tenant,
            run_id=key.run_id,
            holder=holder,
            epoch=epoch,
            expires_at=now + ttl_seconds,
        )
        self._leases[k] = lease
        return lease

    @detached
    def renew_lease(self, lease: RunLease, *, ttl_seconds: float) -> RunLease:
        check_ttl(ttl_seconds)
        k = (lease.tenant, lease.run_id)
        now = self.clock.now()
        current = self._leases.get(k)
        if current is None or current.epoch != lease.epoch:
            raise LeaseLostError(lease.run_id, "taken")
        if current.expires_at < now:
            raise LeaseLostError(lease.run_id, "expired")
        renewed = current.model_copy(update={"expires_at": now + ttl_seconds})
        self._leases[k] = renewed
        return renewed

    @detached
    def release_lease(self, lease: RunLease) -> bool:
        k = (lease.tenant, lease.run_id)
        current = self._leases.get(k)
        if current is None or current.epoch != lease.epoch:
            return False
        del self._leases[k]
        return True

    @detached
    def get_lease(self, key: RunKey) -> RunLease | None:
        lease = self._leases.get((key.tenant, key.run_id))
        if lease is None or lease.expires_at < self.clock.now():
            return None
        return lease


def check_ttl(ttl_seconds: float) -> float:
    """Return ``ttl_seconds`` as a float if it is positive; else raise ValueError."""
    if not ttl_seconds > 0:
        raise ValueError(f"ttl_seconds must be positive, not {ttl_seconds!r}")
    return float(ttl_seconds)


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
        item_id = validate_identifier(item_id or uuid.uuid4().hex, "item_id")
        if dedupe_key is not None:
            validate_identifier(dedupe_key, "dedupe_key")
        if delay_seconds < 0:
            raise ValueError(f"delay_seconds must not be negative, not {delay_seconds!r}")
        stored = _copy(payload, self.max_value_bytes, "payload")
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
        self._leased(tenant, item_id, token)
        item = self._items[(tenant, item_id)]
        decision = self.policy.on_failure(item.attempts, self.clock.now(), retryable=retryable)
        if decision.outcome == "dead" or decision.retry_at is None:
            return self._kill(item, decision.reason, error)
        return self._retry(item, decision.retry_at, error)

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
