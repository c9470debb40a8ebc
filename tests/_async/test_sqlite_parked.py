"""SQLite queue version 4: the tenants a claim steps over (no due work: their items delayed,
leased or dead, or none left) are parked out of the rotation with their turns, up to 64 a
claim; a claim first puts back those whose first due time came (a bounded round a transaction),
an item becoming ready earlier puts its tenant back at once, and prune forgets parked tenants
without items. The order of service is the memory backend's. (Other versions and other
tables: test_sqlite_parked_versions.py.)"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from runyard import AsyncMemoryWorkQueue, ManualClock, QueuePolicy
from runyard.sqlite import AsyncSqliteWorkQueue
from runyard.sqlite.queue_transactions import UNPARK_PER_CLAIM

T0 = 1_700_000_000.0
PARK_PER_CLAIM = 64  # the schema's park trigger: LIMIT 64
POLICY = QueuePolicy(
    lease_seconds=30, max_attempts=3, backoff_base=5.0, backoff_cap=5.0, random=lambda: 1.0
)


def tables_of(path: Path) -> tuple[dict[str, int], dict[str, tuple[int, float | None]]]:
    """{tenant: turn} of the rotation and {tenant: (turn, due_at)} of the parked."""
    with closing(sqlite3.connect(path)) as conn:
        turns = dict(conn.execute("SELECT tenant, turn FROM runyard_tenant_turns").fetchall())
        parked = {
            tenant: (turn, due)
            for tenant, turn, due in conn.execute(
                "SELECT tenant, turn, due_at FROM runyard_tenant_turns_parked"
            )
        }
    return turns, parked


async def open_queue(path: Path, clock: ManualClock) -> AsyncSqliteWorkQueue:
    return await AsyncSqliteWorkQueue.open(path, create_schema=True, clock=clock, policy=POLICY)


async def _served_as_memory(path: Path, script: Any) -> list[tuple[str, Any]]:
    """Run ``script(queue, clock)`` on the memory backend and on a SQLite queue on ``path``:
    both must return the same; return it (the file stays for the caller to inspect)."""
    mem_clock = ManualClock(T0)
    expected = await script(AsyncMemoryWorkQueue(clock=mem_clock, policy=POLICY), mem_clock)
    clock = ManualClock(T0)
    queue = await open_queue(path, clock)
    try:
        got: list[tuple[str, Any]] = await script(queue, clock)
    finally:
        await queue.aclose()
    assert got == expected
    return got


async def drain(queue: Any, n: int | None = None) -> list[tuple[str, Any]]:
    """Claim and complete until nothing is due (or ``n`` claims): (tenant, payload) served."""
    served: list[tuple[str, Any]] = []
    while n is None or len(served) < n:
        lease = await queue.claim("w")
        if lease is None:
            break
        served.append((lease.tenant, lease.item.payload))
        await queue.complete(lease)
    return served


@pytest.mark.asyncio
async def test_claims_park_the_tenants_they_step_over_and_serve_them_in_turn_when_due(
    tmp_path: Path,
) -> None:
    async def script(queue: Any, clock: ManualClock) -> list[tuple[str, Any]]:
        for k in range(100):  # 100 tenants ahead of "zz" (same turn, names sort first)
            await queue.enqueue(f"idle-{k:03d}", {"k": k}, delay_seconds=60 + k % 7)
        for n in range(4):
            await queue.enqueue("zz", {"n": n})
        served = await drain(queue, 2)
        clock.advance(70)
        return served + await drain(queue)

    got = await _served_as_memory(tmp_path / "q.db", script)
    assert got[:2] == [("zz", {"n": 0}), ("zz", {"n": 1})]
    assert got[2] == ("idle-000", {"k": 0}) and len(got) == 104


@pytest.mark.asyncio
async def test_a_claim_parks_64_tenants_with_their_turns_and_first_due_times(
    tmp_path: Path,
) -> None:
    path, clock = tmp_path / "q.db", ManualClock(T0)
    queue = await open_queue(path, clock)
    try:
        for k in range(100):
            await queue.enqueue(f"idle-{k:03d}", {"k": k}, delay_seconds=60 + k)
            await queue.enqueue(f"idle-{k:03d}", {"k": k}, delay_seconds=600)  # not the first
        await queue.enqueue("zz", {"n": 0})
        await queue.enqueue("zz", {"n": 1})
        turns_before, _ = tables_of(path)
        first = await queue.claim("w")
        assert first is not None and first.tenant == "zz"
        turns, parked = tables_of(path)
        assert sorted(parked) == [f"idle-{k:03d}" for k in range(PARK_PER_CLAIM)]
        for tenant, (turn, due) in parked.items():
            k = int(tenant.removeprefix("idle-"))
            assert (turn, due) == (turns_before[tenant], T0 + 60 + k)
        assert set(turns) == {f"idle-{k:03d}" for k in range(PARK_PER_CLAIM, 100)} | {"zz"}
        await queue.complete(first)
        second = await queue.claim("w")  # steps over the other 36
        assert second is not None and second.tenant == "zz"
        turns, parked = tables_of(path)
        assert set(turns) == {"zz"} and len(parked) == 100
    finally:
        await queue.aclose()


@pytest.mark.asyncio
async def test_more_tenants_due_at_once_than_one_round_puts_back_are_served_in_turn_order(
    tmp_path: Path,
) -> None:
    tenants = UNPARK_PER_CLAIM + 44

    async def script(queue: Any, clock: ManualClock) -> list[tuple[str, Any]]:
        for k in range(tenants):  # due in reverse name order: put back in due order
            await queue.enqueue(f"idle-{k:03d}", {"k": k}, delay_seconds=600 - k)
        await queue.enqueue("zz", {"n": 0})
        await queue.enqueue("zz", {"n": 1})
        served = await drain(queue, 1)  # parks 64 a claim: 5 claims park them all
        for n in range(2, 8):
            await queue.enqueue("zz", {"n": n})
        served += await drain(queue, 6)
        clock.advance(601)
        leases = await queue.claim_many("w", limit=5)  # several rounds of put-backs, one call
        for lease in leases:
            await queue.complete(lease)
        return served + [(lease.tenant, lease.item.payload) for lease in leases]

    path = tmp_path / "q.db"
    got = await _served_as_memory(path, script)
    assert [tenant for tenant, _ in got[7:]] == [f"idle-{k:03d}" for k in range(5)]
    turns, parked = tables_of(path)
    assert parked == {} and len(turns) == tenants + 1


@pytest.mark.asyncio
async def test_an_item_ready_before_the_parked_due_time_puts_the_tenant_back_with_its_turn(
    tmp_path: Path,
) -> None:
    async def script(queue: Any, clock: ManualClock) -> list[tuple[str, Any]]:
        await queue.enqueue("a", {"a": "later"}, delay_seconds=600)
        await queue.enqueue("b", {"b": "later"}, delay_seconds=600)
        for n in range(3):
            await queue.enqueue("zz", {"n": n})
        served = await drain(queue, 1)  # parks a and b
        await queue.enqueue("a", {"a": "now"})  # due now: a is back, ahead of zz
        await queue.enqueue("b", {"b": "even later"}, delay_seconds=900)  # b stays parked
        served += await drain(queue)
        clock.advance(600)
        return served + await drain(queue)

    got = await _served_as_memory(tmp_path / "q.db", script)
    assert got[:4] == [("zz", {"n": 0}), ("a", {"a": "now"}), ("zz", {"n": 1}), ("zz", {"n": 2})]
    assert got[4:] == [("b", {"b": "later"}), ("a", {"a": "later"})]  # a's turn is newer


@pytest.mark.asyncio
async def test_a_parked_enqueue_due_no_earlier_leaves_the_tenant_parked(tmp_path: Path) -> None:
    path, clock = tmp_path / "q.db", ManualClock(T0)
    queue = await open_queue(path, clock)
    try:
        await queue.enqueue("a", {"n": 0}, delay_seconds=60)
        await queue.enqueue("zz", {"n": 0})
        assert await queue.claim("w") is not None
        _, parked = tables_of(path)
        await queue.enqueue("a", {"n": 1}, delay_seconds=60)  # due with the first: no change
        await queue.enqueue("a", {"n": 2}, delay_seconds=90)
        assert tables_of(path)[1] == parked == {"a": (parked["a"][0], T0 + 60)}
        await queue.enqueue("a", {"n": 3}, delay_seconds=30)  # earlier: back in the rotation
        turns, after = tables_of(path)
        assert after == {} and turns["a"] == parked["a"][0]
    finally:
        await queue.aclose()


@pytest.mark.asyncio
async def test_tenants_parked_with_only_leased_work_come_back_with_their_turns(
    tmp_path: Path,
) -> None:
    """A tenant whose items are all leased (or dead) is parked with no due time; a lapsed lease
    reclaimed for a retry, or a requeued dead letter, puts it back with its turn."""

    async def script(queue: Any, clock: ManualClock) -> list[tuple[str, Any]]:
        await queue.enqueue("a", {"a": 1})
        await queue.enqueue("b", {"b": 1})
        held = await queue.claim("crashed")  # a, then b
        dead = await queue.claim("w")
        assert held is not None and dead is not None
        await queue.fail(dead, error="no", retryable=False)
        for n in range(3):
            await queue.enqueue("zz", {"n": n})
        served = await drain(queue, 1)
        await queue.enqueue("c", {"c": 1})
        served += await drain(queue, 1)  # c (a newer turn than zz's first claim)
        await queue.requeue("b", dead.item_id)
        served += await drain(queue, 1)  # b: its old turn is older than zz's
        clock.advance(31)  # a's lease lapsed: retried after the backoff
        assert [item.tenant for item in await queue.reap()] == ["a"]
        clock.advance(5)
        return served + await drain(queue)  # a's turn (its claim) is older than zz's

    got = await _served_as_memory(tmp_path / "q.db", script)
    assert [tenant for tenant, _ in got] == ["zz", "c", "b", "a", "zz", "zz"]


@pytest.mark.asyncio
async def test_prune_forgets_parked_tenants_without_items_and_keeps_the_others(
    tmp_path: Path,
) -> None:
    path, clock = tmp_path / "q.db", ManualClock(T0)
    queue = await open_queue(path, clock)
    try:
        for k in range(10):  # drained tenants (their turns wait for prune)
            await queue.enqueue(f"done-{k}", {"k": k})
        assert len(await drain(queue)) == 10
        await queue.enqueue("delayed", {"n": 0}, delay_seconds=60)
        for n in range(2):
            await queue.enqueue("zz", {"n": n})
        assert len(await drain(queue, 1)) == 1  # parks the drained tenants and "delayed"
        turns, parked = tables_of(path)
        assert len(parked) >= 10 and "delayed" in parked
        assert await queue.prune(limit=100) == 10
        turns, parked = tables_of(path)
        assert set(parked) | set(turns) == {"delayed", "zz"}
        clock.advance(60)
        assert [tenant for tenant, _ in await drain(queue)] == ["delayed", "zz"]
    finally:
        await queue.aclose()


@pytest.mark.asyncio
async def test_a_claim_that_finds_nothing_due_parks_the_front_of_the_rotation(
    tmp_path: Path,
) -> None:
    """An idle worker's polls park the tenants without due work too (64 a poll), so a poll
    does not probe them all again each time."""
    path, clock = tmp_path / "q.db", ManualClock(T0)
    queue = await open_queue(path, clock)
    try:
        for k in range(150):
            await queue.enqueue(f"idle-{k:03d}", {"k": k}, delay_seconds=60)
        assert await queue.claim("w") is None
        turns, parked = tables_of(path)
        assert sorted(parked) == [f"idle-{k:03d}" for k in range(PARK_PER_CLAIM)]
        assert await queue.claim_many("w", limit=3) == []
        assert await queue.claim("w") is None
        turns, parked = tables_of(path)
        assert turns == {} and len(parked) == 150
        clock.advance(60)
        served = await drain(queue)
        assert [tenant for tenant, _ in served] == [f"idle-{k:03d}" for k in range(150)]
    finally:
        await queue.aclose()


@pytest.mark.asyncio
async def test_a_retry_due_before_the_parked_due_time_puts_the_tenant_back(
    tmp_path: Path,
) -> None:
    """A tenant parked until its delayed item's time comes back with its turn when a failed
    attempt of another of its items is retried sooner."""

    async def script(queue: Any, clock: ManualClock) -> list[tuple[str, Any]]:
        await queue.enqueue("a", {"a": "now"})
        await queue.enqueue("a", {"a": "later"}, delay_seconds=600)
        held = await queue.claim("w")  # a's only due item: a holds only a delayed one now
        for n in range(4):
            await queue.enqueue("zz", {"n": n})
        served = await drain(queue, 1)  # steps over a: parked until 600 s
        await queue.fail(held, error="flaky", retryable=True)  # retried after 5 s
        clock.advance(5)
        return served + await drain(queue)

    got = await _served_as_memory(tmp_path / "q.db", script)
    assert [tenant for tenant, _ in got] == ["zz", "a", "zz", "zz", "zz"]


@pytest.mark.asyncio
async def test_a_call_with_several_put_back_rounds_reclaims_as_one_claim(tmp_path: Path) -> None:
    """A claim takes back RECLAIM_PER_CLAIM lapsed leases once per call, however many rounds
    of put-backs it needs (it took them back in every round)."""
    tenants = UNPARK_PER_CLAIM + 44

    async def script(queue: Any, clock: ManualClock) -> list[tuple[str, Any]]:
        for k in range(20):
            await queue.enqueue("held", {"k": k})
        for _ in range(20):
            assert await queue.claim("crashed") is not None
        for k in range(tenants):
            await queue.enqueue(f"idle-{k:03d}", {"k": k}, delay_seconds=60)
        for n in range(6):
            await queue.enqueue("zz", {"n": n})
        await drain(queue, 6)  # the claims step over the idle tenants: 64 parked a claim
        clock.advance(61)  # the 20 leases lapsed, the idle tenants are due
        lease = await queue.claim("w")
        stats = await queue.stats()
        return [(lease.tenant, lease.item.payload), ("stats", stats)]

    got = await _served_as_memory(tmp_path / "q.db", script)
    assert got[0] == ("idle-000", {"k": 0}) and got[1][1].leased == 13  # 8 of 20 reclaimed
