"""The PostgreSQL queue's maintained counts on the real server: stats() agrees with the items
after a mixed sequence, and a statement adds its changes to a count row no other session
holds (its backend's own, another free one, or a new one) without waiting, so the count rows
are never more than the most held at once."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from psycopg import AsyncConnection
from runyard import ManualClock, QueuePolicy
from runyard.models import NewItem
from runyard.postgres import AsyncPostgresWorkQueue, StateTables

from tests._async.postgres_support import open_pool, open_queue
from tests.support.postgres_plugin import PG_DSN, admin_connection

# Backoff of exactly half the ceiling: retries are due at a known time.
POLICY = QueuePolicy(lease_seconds=30, max_attempts=3, random=lambda: 0.5)


@pytest_asyncio.fixture
async def clock() -> ManualClock:
    return ManualClock(1_000_000.0)


@pytest_asyncio.fixture
async def queue(
    pg_tables: StateTables, clock: ManualClock
) -> AsyncIterator[AsyncPostgresWorkQueue]:
    opened = await open_queue(pg_tables, clock, POLICY)
    yield opened
    await opened.aclose()


def _counted(tables: StateTables, now: float) -> tuple[int, int, int, int, int]:
    """What stats must say, counted from the work table's rows."""
    with admin_connection() as conn:
        row = conn.execute(
            f"""SELECT count(*) FILTER (WHERE state = 'ready' AND available_at <= %(now)s),
                       count(*) FILTER (WHERE state = 'ready' AND available_at > %(now)s),
                       count(*) FILTER (WHERE state = 'leased'),
                       count(*) FILTER (WHERE state = 'dead'),
                       count(DISTINCT tenant)
                           FILTER (WHERE state = 'ready' AND available_at <= %(now)s)
                FROM {tables.qualified(tables.work)}""",
            {"now": now},
        ).fetchone()
    assert row is not None
    ready, delayed, leased, dead, tenants = (int(str(v)) for v in row)
    return ready, delayed, leased, dead, tenants


@pytest.mark.asyncio
async def test_stats_from_maintained_counts_agree_with_the_items_after_a_mixed_sequence(
    queue: AsyncPostgresWorkQueue, clock: ManualClock, pg_tables: StateTables
) -> None:
    async def agree() -> None:
        stats = await queue.stats()
        got = (stats.ready, stats.delayed, stats.leased, stats.dead, stats.tenants)
        assert got == _counted(pg_tables, clock.now())

    await queue.enqueue_many("a", [NewItem(payload=n, delay_seconds=5 * (n % 2)) for n in range(6)])
    await queue.enqueue("b", {}, dedupe_key="k")
    await queue.enqueue("b", {}, dedupe_key="k")  # a repeat changes nothing
    await queue.enqueue("c", {}, run_at=clock.now() + 50, item_id="later")
    await agree()
    leases = await queue.claim_many("w1", limit=3)
    single = await queue.claim("w1")
    assert single is not None
    await agree()
    await queue.complete_many(leases[:1])
    await queue.fail(leases[1], error="retry")  # ready after a backoff of 0.5 s
    await queue.fail(leases[2], retryable=False)  # dead
    await queue.release_many([single])
    await agree()
    assert await queue.cancel("c", "later")  # a delayed item
    await agree()
    clock.advance(5)  # the delayed items of "a" are due
    await agree()
    more = await queue.claim_many("w2", limit=4)
    assert len(more) == 4
    clock.advance(31)  # w2's leases lapse
    await agree()
    await queue.reap(limit=2)
    assert await queue.claim("w3") is not None  # reclaims the other 2 lapsed leases
    await agree()
    (letter,) = await queue.dead_letters("a")
    await queue.requeue("a", letter.item.item_id)
    await agree()
    lease = await queue.claim("w4")
    assert lease is not None
    await queue.fail(lease, retryable=False)
    assert await queue.purge_dead(lease.tenant) == 1
    await agree()
    clock.advance(60)
    assert await queue.prune() >= 0  # sweeps the delays ledger's past rows
    await agree()


@pytest.mark.asyncio
async def test_counts_go_to_a_free_row_or_a_new_one_and_never_wait(
    clock: ManualClock, pg_tables: StateTables
) -> None:
    # Each statement adds its changes to a count row no other session holds: its backend's
    # own row, else the first free one, else a new row. Another session holds rows here (as
    # an open bound() transaction would): the queue's one connection's own row and all but
    # one other, then every row. Every call returns, the changes land where they must, and
    # stats stay exact.
    counts = pg_tables.qualified(pg_tables.counts)
    pool = await open_pool(max_size=1)  # one connection: its own row is known
    holder = admin_connection()
    try:
        async with pool.connection() as conn:
            row = await (await conn.execute("SELECT pg_backend_pid() % 16")).fetchone()
        assert row is not None
        own = int(row[0])
        free = (own + 1) % 16
        queue = await AsyncPostgresWorkQueue.open(
            pool, tables=pg_tables, clock=clock, policy=POLICY
        )
        holder.autocommit = False
        for held in ([s for s in range(16) if s != free], list(range(16))):
            holder.execute(f"SELECT 1 FROM {counts} WHERE shard = ANY(%s) FOR UPDATE", (held,))
            await queue.enqueue("a", {"held": len(held)})
            lease = await queue.claim("w")
            assert lease is not None
            await queue.enqueue("a", {"left": True})
            await queue.complete(lease)
            stats = await queue.stats()
            ready, _, leased, _, _ = _counted(pg_tables, clock.now())
            assert (stats.ready, stats.leased) == (ready, leased) == (len(held) - 14, 0)
            holder.rollback()
            with admin_connection() as admin:
                rows = admin.execute(
                    f"SELECT shard, ready, leased FROM {counts} WHERE ready <> 0 OR leased <> 0"
                ).fetchall()
            if len(held) == 15:  # the one free row took every change (the fallback branch)
                assert [tuple(int(str(v)) for v in r) for r in rows] == [(free, 1, 0)]
            else:  # all held: new rows took this round's changes
                assert any(int(str(r[0])) >= 16 for r in rows)
    finally:
        holder.close()
        await pool.close()


def _count_rows(tables: StateTables) -> int:
    with admin_connection() as admin:
        row = admin.execute(f"SELECT count(*) FROM {tables.qualified(tables.counts)}").fetchone()
    assert row is not None
    return int(str(row[0]))


@pytest.mark.asyncio
async def test_count_rows_grow_to_the_most_held_at_once_and_no_further(
    clock: ManualClock, pg_tables: StateTables, queue: AsyncPostgresWorkQueue
) -> None:
    # 48 sessions each enqueue (a tenant of its own) in a transaction they keep open, so 48
    # count rows are held at once: the first 16 take the 16 rows, each later one finds every
    # row held and adds one (48 rows). A second round of 48 open transactions finds a free
    # row each: the table stays at the most rows ever held at once. stats() stays exact.
    sessions = 48
    for round_ in range(2):
        conns = [await AsyncConnection.connect(PG_DSN) for _ in range(sessions)]
        try:
            for n, conn in enumerate(conns):
                await queue.bound(conn).enqueue(f"t{n}", {"round": round_})
            for conn in conns:
                await conn.commit()
        finally:
            for conn in conns:
                await conn.close()
        assert _count_rows(pg_tables) == sessions
        assert (await queue.stats()).ready == sessions * (round_ + 1)
    await queue.enqueue("a", {"after": True})  # no row held: its own or a free one
    assert _count_rows(pg_tables) == sessions
    assert (await queue.stats()).ready == 2 * sessions + 1


@pytest.mark.asyncio
async def test_stats_never_count_below_zero_when_clients_clocks_differ_by_a_few_ms(
    pg_tables: StateTables, clock: ManualClock
) -> None:
    # Each client judges "delayed?" by its own estimate of the server's time: an item due
    # between two such estimates, enqueued by the one ahead (due: not in the delays ledger) and
    # cancelled by the one behind (delayed: -1 in the ledger), left stats at delayed=-1 and
    # ready=1 with no item at all; the other way round, at ready=-1 and delayed=1.
    ahead_clock = ManualClock(clock.now() + 0.010)
    behind = await open_queue(pg_tables, clock, POLICY)
    ahead = await open_queue(pg_tables, ahead_clock, POLICY)
    try:
        due_between = clock.now() + 0.005
        for enqueuer, canceller in ((ahead, behind), (behind, ahead)):
            item = await enqueuer.enqueue("a", {}, run_at=due_between)
            await canceller.cancel("a", item.item_id)
            for looker in (behind, ahead):
                stats = await looker.stats()
                assert (stats.ready, stats.delayed, stats.leased, stats.dead) == (0, 0, 0, 0)
        # What stays exact: an item delayed for both, and one due for both.
        await ahead.enqueue("a", {}, run_at=clock.now() + 60)
        await behind.enqueue("b", {})
        for looker in (behind, ahead):
            stats = await looker.stats()
            assert (stats.ready, stats.delayed) == (1, 1)
    finally:
        await ahead.aclose()
        await behind.aclose()
