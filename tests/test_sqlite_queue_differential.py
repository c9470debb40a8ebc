"""The SQLite queue against the memory backend, fed the same seeded scripts of operations:
enqueue and enqueue_many (delays, run_at, priorities), claim and claim_many, complete, fail,
release, heartbeat, reap, adopt, requeue, cancel, purge_dead, prune, stats and clock ticks.
Every call must give the same result, and after every call no tenant with an item is missing
from both the rotation and the parked tenants, none is in both, and none with a ready item is
parked past it; after a claim call no parked tenant has due work.

One lane runs the store's own constants; the other parks 2 tenants a claim and puts back 2 a
round (the park trigger and the put-back round shrunk), so that partial parking, several rounds
of put-backs and the lapses reclaimed beside them come up in short scripts. ``adopt`` is in
since queue version 5 (before it, its fresh tokens moved the turn a tenant joining later got).
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable
from contextlib import closing
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from runyard import ManualClock, MemoryWorkQueue, RunyardError
from runyard.models import Lease, NewItem, WorkItem
from runyard.sqlite import SqliteWorkQueue, queue_transactions
from runyard.sqlite.queue_transactions import QueuePlan

from tests.support.queue_machine import MACHINE_POLICY

POLICY = MACHINE_POLICY
OPERATIONS = [
    "enqueue",
    "enqueue_many",
    "claim",
    "claim_many",
    "complete",
    "fail",
    "release",
    "heartbeat",
    "reap",
    "adopt",
    "requeue",
    "cancel",
    "purge",
    "prune",
    "tick",
    "stats",
]


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return _plain(call())
    except RunyardError as exc:
        return _plain(exc)


def _plain(value: Any) -> Any:
    """What the two backends must agree on (tokens differ: each store mints its own)."""
    if isinstance(value, Lease):
        return ("lease", value.tenant, value.item_id, value.item.attempts, value.expires_at)
    if isinstance(value, WorkItem):
        return (
            "item",
            value.tenant,
            value.item_id,
            value.state,
            value.available_at,
            value.attempts,
        )
    if isinstance(value, RunyardError):
        return ("error", type(value).__name__, getattr(value, "reason", None))
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _broken_rotation(path: Path) -> list[Any]:
    with closing(sqlite3.connect(path)) as conn:
        hidden = conn.execute(
            "SELECT DISTINCT w.tenant FROM runyard_work_items w WHERE w.state = 'ready'"
            " AND NOT EXISTS (SELECT 1 FROM runyard_tenant_turns t WHERE t.tenant = w.tenant)"
            " AND NOT EXISTS (SELECT 1 FROM runyard_tenant_turns_parked p"
            " WHERE p.tenant = w.tenant AND p.due_at <= w.available_at)"
        ).fetchall()
        twice = conn.execute(
            "SELECT tenant FROM runyard_tenant_turns"
            " INTERSECT SELECT tenant FROM runyard_tenant_turns_parked"
        ).fetchall()
        neither = conn.execute(
            "SELECT DISTINCT tenant FROM runyard_work_items w"
            " WHERE NOT EXISTS (SELECT 1 FROM runyard_tenant_turns t WHERE t.tenant = w.tenant)"
            " AND NOT EXISTS (SELECT 1 FROM runyard_tenant_turns_parked p"
            " WHERE p.tenant = w.tenant)"
        ).fetchall()
    return [rows for rows in (hidden, twice, neither) if rows]


def _parked_with_due_work(path: Path, now: float) -> list[Any]:
    """Parked tenants holding a ready item due at ``now`` (a claim call leaves none)."""
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(
            "SELECT DISTINCT p.tenant FROM runyard_tenant_turns_parked p"
            " JOIN runyard_work_items w ON w.tenant = p.tenant"
            " WHERE w.state = 'ready' AND w.available_at <= ?",
            (now,),
        ).fetchall()


def _park_at_most(queue: SqliteWorkQueue, path: Path, n: int) -> None:
    """Shrink what a claim parks to ``n`` tenants: the schema's trigger and this queue's
    statement for a claim that finds nothing due (the store's constant is 64)."""
    with sqlite3.connect(path) as conn:
        (text,) = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'runyard_work_items_parks'"
        ).fetchone()
        conn.execute("DROP TRIGGER runyard_work_items_parks")
        conn.execute(text.replace("LIMIT 64", f"LIMIT {n}"))
    sql = dict(queue._plan.sql)
    sql["park_front"] = sql["park_front"].replace("LIMIT 64", f"LIMIT {n}")
    queue._plan = QueuePlan(sql, queue._plan.policy)


def _run(seed: int, steps: int, tenants: int, path: Path, park: int | None) -> None:
    rng = random.Random(seed)
    names = [f"t{k}" for k in range(tenants)]
    mem_clock, sql_clock = ManualClock(1_000.0), ManualClock(1_000.0)
    memory = MemoryWorkQueue(clock=mem_clock, policy=POLICY)
    store = SqliteWorkQueue.open(
        path, create_schema=True, clock=sql_clock, policy=POLICY, durable=False
    )
    if park is not None:
        _park_at_most(store, path, park)
    held: dict[tuple[str, str], tuple[Lease, Lease]] = {}
    made = 0
    done: list[Any] = []
    try:
        for _ in range(steps):
            op = rng.choice(OPERATIONS)
            mine: Any = None
            theirs: Any = None
            if op == "enqueue":
                made += 1
                tenant = rng.choice(names)
                kw: dict[str, Any] = {"item_id": f"i{made}", "priority": rng.choice([0, 0, 1])}
                r = rng.random()
                if r < 0.4:
                    kw["delay_seconds"] = rng.choice([1.0, 5.0, 20.0, 100.0])
                elif r < 0.5:
                    kw["run_at"] = mem_clock.now() + rng.choice([-5.0, 3.0, 50.0])
                mine = _outcome(partial(memory.enqueue, tenant, {"n": made}, **kw))
                theirs = _outcome(partial(store.enqueue, tenant, {"n": made}, **kw))
            elif op == "enqueue_many":
                tenant = rng.choice(names)
                items = []
                for _ in range(rng.randint(1, 3)):
                    made += 1
                    items.append(
                        NewItem(
                            payload={"n": made},
                            item_id=f"i{made}",
                            delay_seconds=rng.choice([0.0, 0.0, 5.0, 50.0]),
                            priority=rng.choice([0, 1]),
                        )
                    )
                mine = _outcome(partial(memory.enqueue_many, tenant, items))
                theirs = _outcome(partial(store.enqueue_many, tenant, items))
            elif op in ("claim", "claim_many"):
                worker = rng.choice(["w1", "w2"])
                if op == "claim":
                    got_m = [x for x in [memory.claim(worker)] if x is not None]
                    got_s = [x for x in [store.claim(worker)] if x is not None]
                else:
                    limit = rng.randint(1, 4)
                    got_m = memory.claim_many(worker, limit=limit)
                    got_s = store.claim_many(worker, limit=limit)
                mine, theirs = _plain(got_m), _plain(got_s)
                for x, y in zip(got_m, got_s, strict=False):
                    held[(x.tenant, x.item_id)] = (x, y)
            elif op in ("complete", "fail", "release", "heartbeat"):
                if not held:
                    continue
                key = rng.choice(sorted(held))
                x, y = held[key]
                if op == "complete":
                    held.pop(key)
                    mine = _outcome(partial(memory.complete, x))
                    theirs = _outcome(partial(store.complete, y))
                elif op == "fail":
                    held.pop(key)
                    retry = rng.random() < 0.7
                    mine = _outcome(partial(memory.fail, x, error="e", retryable=retry))
                    theirs = _outcome(partial(store.fail, y, error="e", retryable=retry))
                elif op == "release":
                    held.pop(key)
                    mine = _outcome(partial(memory.release_many, [x]))
                    theirs = _outcome(partial(store.release_many, [y]))
                else:
                    renewed_m, renewed_s = memory.heartbeat_many([x]), store.heartbeat_many([y])
                    mine, theirs = _plain(renewed_m), _plain(renewed_s)
                    if isinstance(renewed_m[0], Lease) and isinstance(renewed_s[0], Lease):
                        held[key] = (renewed_m[0], renewed_s[0])
            elif op == "reap":
                mine = sorted(_plain(memory.reap(limit=100)))
                theirs = sorted(_plain(store.reap(limit=100)))
            elif op == "adopt":
                worker = rng.choice(["w1", "w2"])
                got_m, got_s = memory.adopt(worker), store.adopt(worker)
                mine, theirs = _plain(got_m), _plain(got_s)
                for x, y in zip(got_m, got_s, strict=False):
                    held[(x.tenant, x.item_id)] = (x, y)
            elif op == "requeue":
                tenant = rng.choice(names)
                letters = memory.dead_letters(tenant, limit=100)
                if not letters:
                    continue
                item_id = letters[0].item.item_id
                mine = _outcome(partial(memory.requeue, tenant, item_id))
                theirs = _outcome(partial(store.requeue, tenant, item_id))
            elif op == "cancel":
                tenant, item_id = rng.choice(names), f"i{rng.randint(1, max(made, 1))}"
                mine = _outcome(partial(memory.cancel, tenant, item_id))
                theirs = _outcome(partial(store.cancel, tenant, item_id))
            elif op == "purge":
                tenant = rng.choice(names)
                mine = memory.purge_dead(tenant, older_than=0.0, limit=100)
                theirs = store.purge_dead(tenant, older_than=0.0, limit=100)
            elif op == "prune":
                mine, theirs = memory.prune(limit=1000), store.prune(limit=1000)
            elif op == "tick":
                seconds = rng.choice([1.0, 3.0, 6.0, 11.0, 30.0])
                mem_clock.advance(seconds)
                sql_clock.advance(seconds)
                continue
            else:
                mine, theirs = memory.stats(), store.stats()
            done.append(op)
            assert theirs == mine, (seed, len(done), done[-5:])
            assert _broken_rotation(path) == [], (seed, len(done), done[-5:])
            if op in ("claim", "claim_many"):
                assert _parked_with_due_work(path, sql_clock.now()) == [], (seed, len(done))
    finally:
        store.close()


@pytest.mark.parametrize("seed", range(25))
def test_sqlite_serves_as_the_memory_backend_does(tmp_path: Path, seed: int) -> None:
    _run(seed, steps=200, tenants=6, path=tmp_path / "q.db", park=None)


@pytest.mark.parametrize("seed", range(25))
def test_sqlite_with_parking_shrunk_serves_as_the_memory_backend_does(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_transactions, "UNPARK_PER_CLAIM", 2)
    _run(100 + seed, steps=300, tenants=12, path=tmp_path / "q.db", park=2)
