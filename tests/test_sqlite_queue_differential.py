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

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from runyard import ManualClock, MemoryWorkQueue
from runyard.sqlite import SqliteWorkQueue, queue_transactions
from runyard.sqlite.queue_transactions import QueuePlan

from tests.support.queue_differential import POLICY, run_script


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
    mem_clock, sql_clock = ManualClock(1_000.0), ManualClock(1_000.0)
    memory = MemoryWorkQueue(clock=mem_clock, policy=POLICY)
    store = SqliteWorkQueue.open(
        path, create_schema=True, clock=sql_clock, policy=POLICY, durable=False
    )
    if park is not None:
        _park_at_most(store, path, park)

    def rotation_kept(op: str, where: Any) -> None:
        assert _broken_rotation(path) == [], where
        if op in ("claim", "claim_many"):
            assert _parked_with_due_work(path, sql_clock.now()) == [], where

    try:
        run_script(
            memory,
            store,
            mem_clock,
            sql_clock,
            seed=seed,
            steps=steps,
            tenants=tenants,
            after=rotation_kept,
        )
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
