"""The SQLite work queue's claim reads its head in index order: the query plans of the claim
statements that claim and claim_many send, taken from the connection (statements shared by both
twins), hold whatever statistics the file has."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from runyard import ManualClock
from runyard.sqlite import SqliteWorkQueue


def _claim_plans(path: Path, sent: list[str]) -> list[list[str]]:
    """The query plan of every claim statement in ``sent`` (bound values expanded)."""
    claims = [sql for sql in sent if sql.startswith("UPDATE") and "SET state = 'leased'" in sql]
    with sqlite3.connect(path) as conn:
        return [
            [str(row[3]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")] for sql in claims
        ]


def test_claim_and_claim_many_read_the_head_in_index_order_without_a_sort(
    tmp_path: Path,
) -> None:
    path = tmp_path / "q.db"
    clock = ManualClock(1_000.0)
    queue = SqliteWorkQueue.open(path, create_schema=True, clock=clock)
    sent: list[str] = []
    try:
        for n in range(60):  # one tenant: every priority, due and not yet due
            queue.enqueue("acme", {"n": n}, priority=n % 5, delay_seconds=(n % 2) * 600)
        queue.enqueue("other", {"n": 0})
        with sqlite3.connect(path) as conn:  # statistics that could tempt the planner elsewhere
            conn.execute("ANALYZE")
        queue.connection.raw.set_trace_callback(sent.append)
        single = queue.claim("w1")
        sent_by_claim = len(sent)
        many = queue.claim_many("w2", limit=3)
    finally:
        queue.close()
    assert single is not None and single.item.payload == {"n": 4}  # highest priority, due
    assert len(many) == 3
    by_claim = _claim_plans(path, sent[:sent_by_claim])
    by_claim_many = _claim_plans(path, sent[sent_by_claim:])
    assert by_claim and len(by_claim_many) >= 3
    for plan in by_claim + by_claim_many:
        assert not [step for step in plan if "TEMP B-TREE" in step], plan
        assert "SEARCH w USING INDEX runyard_work_items_ready (tenant=?)" in plan, plan
        assert "SEARCH d USING INDEX runyard_work_items_due (tenant=? AND available_at<?)" in plan


def _claim_steps(path: Path, tenants: int) -> int:
    """SQLite virtual-machine steps (in tens) of one claim + complete of a busy tenant once
    ``tenants`` tenants with one item each, delayed by a day, sat in front of it in the
    rotation and the claims before it parked them."""
    clock = ManualClock(1_000.0)
    queue = SqliteWorkQueue.open(path, create_schema=True, clock=clock, durable=False)
    try:
        for k in range(tenants):
            queue.enqueue(f"idle-{k:05d}", {"k": k}, delay_seconds=86_400)
        for n in range(tenants // 64 + 3):
            queue.enqueue("zz-busy", {"n": n})
        for _ in range(tenants // 64 + 2):  # parks 64 a claim
            lease = queue.claim("w")
            assert lease is not None and lease.tenant == "zz-busy"
            queue.complete(lease)
        steps = [0]

        def count() -> int:
            steps[0] += 1
            return 0

        queue.connection.raw.set_progress_handler(count, 10)
        lease = queue.claim("w")
        assert lease is not None and lease.tenant == "zz-busy"
        queue.complete(lease)
        queue.connection.raw.set_progress_handler(None, 10)
        return steps[0]
    finally:
        queue.close()


def test_a_claim_behind_thousands_of_parked_tenants_costs_what_it_costs_alone(
    tmp_path: Path,
) -> None:
    """Queue version 4: the claims that step over tenants without due work park them, so a
    later claim does not probe them again. Before, each claim probed every one of them (5,000
    tenants: about 2,000 times the steps of a claim with none in front)."""
    alone = _claim_steps(tmp_path / "alone.db", 0)
    behind = _claim_steps(tmp_path / "behind.db", 5_000)
    assert behind <= 1.5 * alone + 20, (alone, behind)


def _poll_steps(path: Path, tenants: int) -> int:
    """Virtual-machine steps (in tens) of an idle worker's poll, a claim that finds nothing due,
    once ``tenants`` tenants holding one item delayed by a day each were polled over."""
    clock = ManualClock(1_000.0)
    queue = SqliteWorkQueue.open(path, create_schema=True, clock=clock, durable=False)
    try:
        for k in range(tenants):
            queue.enqueue(f"idle-{k:05d}", {"k": k}, delay_seconds=86_400)
        for _ in range(tenants // 64 + 2):  # each poll parks 64
            assert queue.claim("w") is None
        steps = [0]

        def count() -> int:
            steps[0] += 1
            return 0

        queue.connection.raw.set_progress_handler(count, 10)
        assert queue.claim("w") is None
        queue.connection.raw.set_progress_handler(None, 10)
        return steps[0]
    finally:
        queue.close()


def test_an_idle_poll_over_thousands_of_parked_tenants_costs_what_it_costs_alone(
    tmp_path: Path,
) -> None:
    """A claim that finds nothing due parks the front of the rotation, so an idle worker's
    later polls do not probe those tenants again (5,000 tenants: about 80,000 steps a poll
    before, 90 after)."""
    alone = _poll_steps(tmp_path / "alone.db", 0)
    behind = _poll_steps(tmp_path / "behind.db", 5_000)
    assert behind <= 1.5 * alone + 20, (alone, behind)
