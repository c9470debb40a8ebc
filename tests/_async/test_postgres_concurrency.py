"""Claims under real concurrency on PostgreSQL: exclusive, and each item completed once."""

from __future__ import annotations

from collections import Counter
from functools import partial
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool
from runyard import Lease, QueuePolicy, RunKey
from runyard._flavours import async_gather
from runyard.postgres import AsyncPostgresStateStore, AsyncPostgresWorkQueue, StateTables

from tests._async.postgres_support import open_queue
from tests.support.postgres_plugin import PG_DSN, admin_connection


@pytest.mark.asyncio
async def test_ten_workers_claiming_at_once_take_ten_different_items(
    pg_tables: StateTables,
) -> None:
    queue = await open_queue(pg_tables, max_size=10)
    async with queue:
        for i in range(10):
            await queue.enqueue("acme", {"i": i})

        async def claim(worker: str) -> Lease | None:
            return await queue.claim(worker)

        leases = await async_gather([partial(claim, f"w{n}") for n in range(10)])
        claimed = [lease for lease in leases if lease is not None]
        assert len(claimed) == 10
        assert len({lease.item_id for lease in claimed}) == 10
        assert len({lease.token for lease in claimed}) == 10
        assert await queue.claim("late") is None


@pytest.mark.asyncio
async def test_sixteen_workers_complete_two_thousand_items_exactly_once(
    pg_tables: StateTables,
) -> None:
    queue = await open_queue(pg_tables, max_size=16)
    async with queue:
        for i in range(2_000):
            await queue.enqueue(f"tenant-{i % 13}", {"i": i})

        async def worker(q: AsyncPostgresWorkQueue, name: str) -> list[int]:
            done: list[int] = []
            while True:
                lease = await q.claim(name)
                if lease is None:
                    return done
                await q.complete(lease.tenant, lease.item_id, token=lease.token)
                done.append(lease.item.payload["i"])

        results = await async_gather([partial(worker, queue, f"w{n}") for n in range(16)])
        counts = Counter(i for done in results for i in done)
        assert sorted(counts) == list(range(2_000))
        assert set(counts.values()) == {1}
        stats = await queue.stats()
        assert (stats.ready, stats.leased, stats.dead) == (0, 0, 0)


@pytest.mark.asyncio
async def test_tenants_with_ready_work_stay_in_the_rotation_under_concurrent_writes(
    pg_tables: StateTables,
) -> None:
    # The claim walks only the rotation, so a tenant with ready work but no row there would be
    # hidden: enqueue, claim (which retires drained tenants) and fail race here, then every
    # tenant with a ready item must have its row.
    policy = QueuePolicy(max_attempts=5, backoff_base=0.001, backoff_cap=0.001)
    queue = await open_queue(pg_tables, policy=policy, max_size=12)
    async with queue:

        async def producer(q: AsyncPostgresWorkQueue, n: int) -> list[int]:
            for i in range(100):
                await q.enqueue(f"tenant-{i % 3}", {"i": i}, item_id=f"p{n}-{i}")
            return []

        async def worker(q: AsyncPostgresWorkQueue, name: str) -> list[int]:
            idle = 0
            while idle < 20:
                lease = await q.claim(name)
                if lease is None:
                    idle += 1
                    continue
                idle = 0
                if lease.item.attempts < 2:
                    await q.fail(lease.tenant, lease.item_id, token=lease.token)
                else:
                    await q.complete(lease.tenant, lease.item_id, token=lease.token)
            return []

        await async_gather(
            [partial(producer, queue, n) for n in range(4)]
            + [partial(worker, queue, f"w{n}") for n in range(8)]
        )
    work, turns = pg_tables.qualified(pg_tables.work), pg_tables.qualified(pg_tables.turns)
    with admin_connection() as conn:
        hidden = conn.execute(
            f"""SELECT DISTINCT w.tenant FROM {work} w WHERE w.state = 'ready'
                AND NOT EXISTS (SELECT 1 FROM {turns} t WHERE t.tenant = w.tenant)"""
        ).fetchall()
    assert hidden == []


async def _warm_store(tables: StateTables) -> AsyncPostgresStateStore:
    """A state store on a pool with 16 connections already open: 16 sends really race."""
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        PG_DSN, min_size=16, max_size=16, open=False
    )
    await pool.open(wait=True)
    return await AsyncPostgresStateStore.open(pool, tables=tables, close_source=True)


@pytest.mark.asyncio
async def test_sixteen_sends_of_one_event_id_store_one_event_and_all_return_it(
    pg_tables: StateTables,
) -> None:
    store = await _warm_store(pg_tables)
    async with store:
        for round_ in range(8):
            key = RunKey("acme", f"raced-{round_}")
            await store.put_run(key, {}, expected_version=0)
            sent = await async_gather(
                [partial(store.append_event, key, "tool", {"n": 1}, event_id="e-1")] * 16
            )
            stored = await store.read_events(key)
            assert [(e.seq, e.event_id) for e in stored] == [(1, "e-1")]
            assert sent == stored * 16


@pytest.mark.asyncio
async def test_sixteen_sends_of_one_finalize_all_return_the_finalized_run(
    pg_tables: StateTables,
) -> None:
    store = await _warm_store(pg_tables)
    async with store:
        for round_ in range(8):
            key = RunKey("acme", f"ended-{round_}")
            await store.put_run(key, {}, expected_version=0)
            finalize = partial(
                store.finalize,
                key,
                status="completed",
                event_type="done",
                event_data={},
                event_id="fin-1",
            )
            sent = await async_gather([finalize] * 16)
            assert {(run.status, run.version) for run in sent} == {("completed", 2)}
            stored = await store.read_events(key)
            assert [(e.event_id, e.terminal) for e in stored] == [("fin-1", True)]
