"""The work queue's transactions, each run whole on the driver's thread (shared by both twins).

Each ``*_body`` is the body of one ``BEGIN IMMEDIATE`` transaction (``flavours.in_transaction``):
it sends its statements on the ``sqlite3`` connection ``raw``, which lives on aiosqlite's thread
in the async twin, so a batch, or a claim that first reclaims lapsed leases, is one trip to the
driver. ``now`` is the injected clock's time, or None: the database's, read by each statement
(``COALESCE(:now, julianday(...))``), or pinned once by ``_pin`` where statements must agree.
A body raises runyard's errors for the whole call (the transaction is rolled back) and returns
per-item outcomes for batches.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runyard._sql import decode_item, decode_lease, settle_refusal
from runyard.errors import ItemLeasedError, LeaseLostError, RunyardError, WorkItemNotFoundError
from runyard.models import Lease, WorkItem
from runyard.policy import RECLAIM_PER_CLAIM, FailureDecision, QueuePolicy
from runyard.queue_args import CheckedItem
from runyard.sqlite.flavours import Row
from runyard.sqlite.rows import due_at, entered_item
from runyard.sqlite.schema import DATABASE_NOW

__all__ = [
    "MAX_UNPARK_ROUNDS",
    "PRUNE_SCAN_PER_LIMIT",
    "START",
    "UNPARK_PER_CLAIM",
    "Cursor",
    "QueuePlan",
    "Target",
    "adopt_body",
    "cancel_body",
    "claim_body",
    "enqueue_body",
    "fail_body",
    "heartbeat_body",
    "prune_body",
    "purge_dead_body",
    "reap_body",
    "requeue_body",
    "select_body",
    "settle_body",
]

# prune looks at most this many tenants' turns per tenant it may remove.
PRUNE_SCAN_PER_LIMIT = 10
# A claim puts back at most this many parked tenants whose due time came (one round).
UNPARK_PER_CLAIM = 256
# A claim call sends at most this many rounds of put-backs before it claims anyway.
MAX_UNPARK_ROUNDS = 1000

Target = tuple[str, str, int]  # (tenant, item_id, token) of a settle


@dataclass(frozen=True)
class QueuePlan:
    """What every body needs besides its arguments: the statements and the policy."""

    sql: Mapping[str, str]
    policy: QueuePolicy

    @property
    def lease(self) -> dict[str, float]:
        """The lease lengths the claim, heartbeat and settle statements bind."""
        return {
            "lease_seconds": float(self.policy.lease_seconds),
            "max_lease": float(self.policy.max_lease_seconds),
        }


def _rows(raw: sqlite3.Connection, sql: str, params: Mapping[str, Any]) -> list[Row]:
    return raw.execute(sql, params).fetchall()


def _pin(raw: sqlite3.Connection, now: float | None) -> float:
    """``now``, or the database's time read once, for statements that must agree on it."""
    if now is not None:
        return now
    return float(raw.execute(f"SELECT {DATABASE_NOW}").fetchone()[0])


def select_body(raw: sqlite3.Connection, sql: str, params: Mapping[str, Any]) -> list[Row]:
    """A read: the rows of one statement."""
    return _rows(raw, sql, params)


# -- enqueue -----------------------------------------------------------------------------------
def enqueue_body(
    raw: sqlite3.Connection,
    plan: QueuePlan,
    now: float | None,
    tenant: str,
    items: Sequence[CheckedItem],
) -> list[WorkItem]:
    """Insert each item in order; a repeated id or live dedupe key returns the stored item.

    The time is pinned first (one small read) so that a new item is known without reading it
    back: the insert returns nothing and its change count says whether it was new.
    """
    now = _pin(raw, now)
    sql = plan.sql["enqueue"]
    out = []
    for item in items:
        params = item._asdict()
        params["tenant"], params["now"] = tenant, now
        params["available_at"] = due = due_at(item, now)
        if raw.execute(sql, params).rowcount:
            out.append(entered_item(tenant, item, now, due))
        else:
            out.append(decode_item(_rows(raw, plan.sql["find_item"], params)[0]))
    return out


# -- claim, lapses and failures ----------------------------------------------------------------
def _decide(
    raw: sqlite3.Connection,
    plan: QueuePlan,
    target: Target,
    decision: FailureDecision,
    error: str | None,
    now: float,
) -> WorkItem:
    tenant, item_id, token = target
    ids = {"tenant": tenant, "item_id": item_id, "token": token, "error": error}
    if decision.outcome == "dead" or decision.retry_at is None:
        rows = _rows(raw, plan.sql["kill"], {**ids, "reason": decision.reason, "now": now})
    else:
        rows = _rows(raw, plan.sql["retry"], {**ids, "retry_at": decision.retry_at})
    return decode_item(rows[0])


def _reclaim(
    raw: sqlite3.Connection, plan: QueuePlan, now: float | None, limit: int
) -> tuple[list[WorkItem], float | None]:
    """Decide up to ``limit`` lapsed leases as the policy says; return them and the time used."""
    lapsed = _rows(raw, plan.sql["lapsed"], {"now": now, "limit": limit})
    if not lapsed:
        return [], now
    now = _pin(raw, now)
    out = []
    for tenant, item_id, token, attempts, max_attempts in lapsed:
        decision = plan.policy.on_lapse(int(attempts), now, max_attempts=max_attempts)
        out.append(_decide(raw, plan, (tenant, item_id, token), decision, "lease lapsed", now))
    return out, now


def reap_body(
    raw: sqlite3.Connection, plan: QueuePlan, now: float | None, limit: int
) -> list[WorkItem]:
    """Decide up to ``limit`` lapsed leases, oldest expiry first."""
    return _reclaim(raw, plan, now, limit)[0]


def _unpark(raw: sqlite3.Connection, plan: QueuePlan, now: float | None) -> tuple[float, int]:
    """Put back, with their turns, up to UNPARK_PER_CLAIM parked tenants whose first due time
    came, oldest due first; return the time that judged it (``now``, or the database's, read
    by the same statement) and how many were put back."""
    rows = _rows(raw, plan.sql["parked_due"], {"now": now, "limit": UNPARK_PER_CLAIM})
    due = [{"tenant": tenant, "turn": turn} for _, tenant, turn in rows if tenant is not None]
    if due:
        raw.executemany(plan.sql["unpark"], due)
    return float(rows[0][0]), len(due)


def claim_body(
    raw: sqlite3.Connection,
    plan: QueuePlan,
    now: float | None,
    worker: str,
    limit: int,
    round_: int = 0,
) -> list[Lease] | None:
    """Reclaim up to RECLAIM_PER_CLAIM lapsed leases (in a call's first round only), put back
    the parked tenants whose due time came, then claim up to ``limit`` due items, one claim
    statement each (the rotation of single claims). Each claim parks up to 64 tenants it
    stepped over (the schema's trigger); one that finds nothing due parks the first 64 of the
    rotation, none of which has due work.

    Returns None, having claimed nothing, when a whole round of UNPARK_PER_CLAIM tenants was
    put back and more may be due (unless ``round_`` is MAX_UNPARK_ROUNDS): the caller commits
    and calls again with the next round, so no transaction holds the write lock for more than
    one bounded round, and (short of that last round) a tenant still parked never loses its
    turn to a later one."""
    if round_ == 0:
        _, now = _reclaim(raw, plan, now, RECLAIM_PER_CLAIM)
    # The put-back pins the time: it and every claim of this call agree on what is due.
    pinned, woken = _unpark(raw, plan, now)
    if woken == UNPARK_PER_CLAIM and round_ < MAX_UNPARK_ROUNDS:
        return None
    params = {"worker": worker, "now": pinned, **plan.lease}
    leases: list[Lease] = []
    while len(leases) < limit:
        rows = _rows(raw, plan.sql["claim"], params)
        if not rows:
            raw.execute(plan.sql["park_front"])
            break
        leases.append(decode_lease(rows[0]))
    return leases


def fail_body(
    raw: sqlite3.Connection,
    plan: QueuePlan,
    now: float | None,
    target: Target,
    error: str | None,
    retryable: bool,
) -> WorkItem:
    """Record a failed attempt of a live lease: retried after backoff, or dead-lettered."""
    now = _pin(raw, now)
    tenant, item_id, token = target
    rows = _rows(raw, plan.sql["probe_item"], {"tenant": tenant, "item_id": item_id})
    probe = rows[0] if rows else None
    refusal = settle_refusal(tenant, item_id, token, probe, now, plan.policy)
    if refusal is not None or probe is None:
        raise refusal or LeaseLostError(item_id, "taken")
    decision = plan.policy.on_failure(
        int(probe[4]), now, retryable=retryable, max_attempts=probe[5]
    )
    return _decide(raw, plan, target, decision, error, now)


# -- settles -----------------------------------------------------------------------------------
def _refusal(
    raw: sqlite3.Connection, plan: QueuePlan, target: Target, now: float | None
) -> RunyardError:
    tenant, item_id, token = target
    rows = _rows(raw, plan.sql["probe_item"], {"tenant": tenant, "item_id": item_id})
    probe = rows[0] if rows else None
    refusal = settle_refusal(tenant, item_id, token, probe, _pin(raw, now), plan.policy)
    return refusal or LeaseLostError(item_id, "taken")


def _target(target: Target, now: float | None) -> dict[str, Any]:
    return {"tenant": target[0], "item_id": target[1], "token": target[2], "now": now}


def heartbeat_body(
    raw: sqlite3.Connection, plan: QueuePlan, now: float | None, targets: Sequence[Target]
) -> list[Lease | RunyardError]:
    """Extend each live lease; a refused one gets the error ``heartbeat`` would raise."""
    out: list[Lease | RunyardError] = []
    for target in targets:
        rows = _rows(raw, plan.sql["heartbeat"], {**_target(target, now), **plan.lease})
        out.append(decode_lease(rows[0]) if rows else _refusal(raw, plan, target, now))
    return out


def settle_body(
    raw: sqlite3.Connection,
    plan: QueuePlan,
    now: float | None,
    targets: Sequence[Target],
    statement: str,
) -> list[RunyardError | None]:
    """Complete (``statement="complete"``) or release each live lease: None, or the error."""
    out: list[RunyardError | None] = []
    for target in targets:
        rows = _rows(raw, plan.sql[statement], {**_target(target, now), **plan.lease})
        out.append(None if rows else _refusal(raw, plan, target, now))
    return out


# -- recovery and retention --------------------------------------------------------------------
def adopt_body(
    raw: sqlite3.Connection, plan: QueuePlan, now: float | None, worker: str, limit: int
) -> list[Lease]:
    """Extend the worker's live leases, in claim order, each under a fresh fencing token: the
    token it held before is refused from now on."""
    now = _pin(raw, now)
    held = _rows(
        raw, plan.sql["held"], {"worker": worker, "now": now, "limit": limit, **plan.lease}
    )
    leases = []
    for tenant, item_id, token in held:
        new_token = _rows(raw, plan.sql["mint"], {})[0][0]
        renew = {**_target((tenant, item_id, token), now), **plan.lease, "new_token": new_token}
        leases.append(decode_lease(_rows(raw, plan.sql["adopt"], renew)[0]))
    return leases


def requeue_body(
    raw: sqlite3.Connection, plan: QueuePlan, now: float | None, tenant: str, item_id: str
) -> WorkItem:
    """Move a dead-lettered item back to ready. Raises WorkItemNotFoundError."""
    params = {"tenant": tenant, "item_id": item_id, "now": now}
    rows = _rows(raw, plan.sql["requeue"], params)
    if not rows:
        raise WorkItemNotFoundError(f"no dead-lettered item {item_id!r} in tenant {tenant!r}")
    return decode_item(rows[0])


def cancel_body(
    raw: sqlite3.Connection, plan: QueuePlan, now: float | None, tenant: str, item_id: str
) -> bool:
    """Delete a ready, delayed or dead item: True; False when there is none. Raises
    ItemLeasedError for a leased item (nothing changes)."""
    ids = {"tenant": tenant, "item_id": item_id}
    if _rows(raw, plan.sql["cancel"], ids):
        return True
    probe = _rows(raw, plan.sql["probe_item"], ids)
    if probe and probe[0][1] == "leased":
        raise ItemLeasedError(item_id, probe[0][6])
    return False


def purge_dead_body(
    raw: sqlite3.Connection,
    plan: QueuePlan,
    now: float | None,
    tenant: str,
    older_than: float,
    limit: int,
) -> int:
    """Delete up to ``limit`` of the tenant's dead letters dead for ``older_than`` seconds or
    more, oldest first; return how many."""
    params = {"tenant": tenant, "older_than": older_than, "limit": limit, "now": now}
    return len(_rows(raw, plan.sql["purge_dead"], params))


Cursor = tuple[int, str]  # (turn, tenant): where prune's walk over the turns stopped
START: Cursor = (-1, "")


def prune_body(
    raw: sqlite3.Connection, plan: QueuePlan, now: float | None, after: Cursor, limit: int
) -> tuple[int, Cursor]:
    """Forget the turns of up to ``limit`` tenants without items, least recently served first,
    looking at no more than ``PRUNE_SCAN_PER_LIMIT * limit`` tenants from the cursor ``after``
    (wrapping around); return how many were forgotten and the cursor for the next call."""
    scan = PRUNE_SCAN_PER_LIMIT * limit
    sql = plan.sql["turns_after"]
    turns = _rows(raw, sql, {"turn": after[0], "tenant": after[1], "scan": scan})
    if after != START and len(turns) < scan:
        rest = _rows(raw, sql, {"turn": START[0], "tenant": START[1], "scan": scan - len(turns)})
        turns += [row for row in rest if tuple(row) <= after]
    removed, cursor = 0, START
    for turn, tenant in turns:
        cursor = (int(turn), str(tenant))
        ids = {"tenant": tenant}
        if _rows(raw, plan.sql["forget_idle"], ids) or _rows(
            raw, plan.sql["forget_idle_parked"], ids
        ):
            removed += 1
            if removed == limit:
                break
    return removed, cursor
