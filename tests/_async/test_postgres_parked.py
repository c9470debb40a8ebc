"""PostgreSQL queue version 5: tenants whose ready items are all delayed are parked out of the
rotation by the claims that step over them, keep their turns, and are put back when their
first item is due (by a claim, sent again until it sees them) or when an item becomes ready for
them (by the enqueue); a database at queue version 4 is refused until docs/postgres.md's
migration has run."""

from __future__ import annotations

from typing import Any

import pytest
from psycopg import AsyncConnection, IsolationLevel
from runyard import AsyncMemoryWorkQueue, ConfigurationError, ManualClock, QueuePolicy
from runyard.models import NewItem
from runyard.postgres import AsyncPostgresWorkQueue, StateTables
from runyard.postgres.statements.queue_rotation import PARK_PER_CLAIM, UNPARK_PER_CLAIM

from tests._async.postgres_support import open_pool, open_queue
from tests.support.postgres_migrations import migration_sql, undo_queue_5
from tests.support.postgres_plugin import PG_DSN, admin_connection

T0 = 1_700_000_000.0


def _rotation(t: StateTables) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(tenant, turn) of the rotation and (tenant, turn, due_at) of the parked, by tenant."""
    with admin_connection() as conn:
        turns = conn.execute(
            f"SELECT tenant, turn FROM {t.qualified(t.turns)} ORDER BY tenant"
        ).fetchall()
        parked = conn.execute(
            f"SELECT tenant, turn, due_at FROM {t.qualified(t.turns_parked)} ORDER BY tenant"
        ).fetchall()
    return turns, parked


async def _idle_tenants(queue: AsyncPostgresWorkQueue, n: int, delay: float) -> list[str]:
    """``n`` tenants (named before "zz") holding one item each, delayed by ``delay``."""
    names = [f"idle-{k:04d}" for k in range(n)]
    for name in names:
        await queue.enqueue(name, {"t": name}, delay_seconds=delay)
    return names


@pytest.mark.asyncio
async def test_claims_park_tenants_without_due_work_and_keep_their_turns(
    pg_tables: StateTables,
) -> None:
    t, clock = pg_tables, ManualClock(T0)
    queue = await open_queue(t, clock)
    try:
        idle = await _idle_tenants(queue, 100, 60)
        await queue.enqueue_many("zz", [NewItem(payload={"n": n}) for n in range(5)])
        # Every tenant joined with turn 0; "zz" sorts last, so the 100 idle tenants are ahead of
        # it. The first claim steps over them all and parks PARK_PER_CLAIM; the second the rest.
        first = await queue.claim("w")
        assert first is not None and first.tenant == "zz"
        turns, parked = _rotation(t)
        assert len(parked) == PARK_PER_CLAIM
        assert len(turns) == 101 - PARK_PER_CLAIM
        second = await queue.claim("w")
        assert second is not None and second.tenant == "zz"
        turns, parked = _rotation(t)
        assert [name for name, _ in turns] == ["zz"]
        assert parked == [(name, 0, T0 + 60) for name in idle]
        # An item due now for a parked tenant puts it back at once, with its turn: it is served
        # ahead of "zz", whose turn its claims advanced.
        await queue.enqueue("idle-0042", {"t": "now"})
        turns, parked = _rotation(t)
        assert ("idle-0042", 0) in turns and len(parked) == 99
        third = await queue.claim("w")
        assert third is not None and third.item.payload == {"t": "now"}
        stats = await queue.stats()
        assert (stats.ready, stats.delayed, stats.tenants) == (3, 100, 1)
    finally:
        await queue.aclose()


@pytest.mark.asyncio
async def test_more_tenants_due_at_once_than_one_round_puts_back_are_served_in_turn_order(
    pg_tables: StateTables,
) -> None:
    t, clock = pg_tables, ManualClock(T0)
    queue = await open_queue(t, clock)
    try:
        n = UNPARK_PER_CLAIM + 44
        idle = await _idle_tenants(queue, n, 10)
        await queue.enqueue_many("zz", [NewItem(payload={"n": k}) for k in range(10)])
        while len(_rotation(t)[1]) < n:  # claims on "zz" park the idle tenants
            assert (await queue.claim("w")) is not None
        clock.advance(10)
        assert (await queue.stats()).tenants == n + 1
        # One call: two rounds put every parked tenant back, then the claim serves the one
        # with the oldest turn, first by name, as the memory backend would.
        lease = await queue.claim("w")
        assert lease is not None and lease.tenant == idle[0]
        turns, parked = _rotation(t)
        assert parked == [] and len(turns) == n + 1
        batch = await queue.claim_many("w", limit=3)
        assert [lease.tenant for lease in batch] == idle[1:4]
    finally:
        await queue.aclose()


@pytest.mark.asyncio
async def test_claim_many_parks_and_is_sent_again_after_putting_tenants_back(
    pg_tables: StateTables,
) -> None:
    t, clock = pg_tables, ManualClock(T0)
    queue = await open_queue(t, clock)
    try:
        idle = await _idle_tenants(queue, 10, 5)
        await queue.enqueue_many("zz", [NewItem(payload={"n": k}) for k in range(4)])
        assert [lease.tenant for lease in await queue.claim_many("w", limit=2)] == ["zz"] * 2
        assert [name for name, _ in _rotation(t)[0]] == ["zz"]
        clock.advance(5)
        served = await queue.claim_many("w", limit=4)
        assert [lease.tenant for lease in served] == idle[:4]
    finally:
        await queue.aclose()


@pytest.mark.asyncio
async def test_a_queue_4_database_migrated_as_documented_parks_tenants(
    pg_tables: StateTables,
) -> None:
    t = pg_tables
    with admin_connection() as conn:
        undo_queue_5(conn, t)
        conn.execute(
            f"UPDATE {t.qualified(t.schema_table)} SET version = 4 WHERE component = 'queue'"
        )
    with pytest.raises(ConfigurationError) as refused:
        await open_queue(t)
    assert "'queue' is at schema version 4" in str(refused.value)
    assert "written for version 5: migrate the schema" in str(refused.value)
    with admin_connection() as conn:
        conn.execute(f'SET search_path TO "{t.schema}"')
        conn.execute(migration_sql("Queue version 5"))
    queue = await open_queue(t, ManualClock(T0))
    try:
        await _idle_tenants(queue, 3, 60)
        await queue.enqueue("zz", {})
        assert (await queue.claim("w")) is not None
        assert [name for name, *_ in _rotation(t)[1]] == ["idle-0000", "idle-0001", "idle-0002"]
        await queue.enqueue("idle-0001", {"t": "now"})  # back, with its turn (the rejoin)
        turns, parked = _rotation(t)
        assert ("idle-0001", 0) in turns and len(parked) == 2
    finally:
        await queue.aclose()


@pytest.mark.asyncio
async def test_a_bound_claim_parks_nothing_but_puts_back(pg_tables: StateTables) -> None:
    # Inside the caller's transaction the rotation rows a park locks would be held until it
    # ends, and enqueues for those tenants would wait for it: a bound claim parks nothing. It
    # puts due tenants back (in that transaction, as it retires drained ones there), so a
    # deployment whose claims are all bound still serves work an earlier claim parked.
    t, clock = pg_tables, ManualClock(T0)
    queue = await open_queue(t, clock)
    try:
        await _idle_tenants(queue, 5, 60)
        await queue.enqueue_many("zz", [NewItem(payload={"n": k}) for k in range(4)])
        async with await AsyncConnection.connect(PG_DSN) as conn, conn.transaction():
            lease = await queue.bound(conn).claim("w")
            assert lease is not None and lease.tenant == "zz"
            batch = await queue.bound(conn).claim_many("w", limit=1)
            assert [lease.tenant for lease in batch] == ["zz"]
        assert _rotation(t)[1] == []  # nothing parked
        assert (await queue.claim("w")) is not None  # an unbound claim parks them
        assert len(_rotation(t)[1]) == 5
        clock.advance(60)
        served: list[str] = []
        async with await AsyncConnection.connect(PG_DSN) as conn:
            try:
                async with conn.transaction():
                    lease = await queue.bound(conn).claim("w")
                    batch = await queue.bound(conn).claim_many("w", limit=2)
                    served = [lease.tenant for lease in ([lease] if lease else []) + batch]
                    raise Boom
            except Boom:
                pass
        assert served == ["idle-0000", "idle-0001", "idle-0002"]
        # The put-back rolled back with the caller's transaction: a later claim puts back.
        assert len(_rotation(t)[1]) == 5
        async with await AsyncConnection.connect(PG_DSN) as conn, conn.transaction():
            lease = await queue.bound(conn).claim("w")
            assert lease is not None and lease.tenant == "idle-0000"
        turns, parked = _rotation(t)
        # idle-0000 was drained, and retired at once (bound); the others are back.
        assert parked == [] and {f"idle-{k:04d}" for k in range(1, 5)} <= {n for n, _ in turns}
    finally:
        await queue.aclose()


class Boom(Exception):
    pass


async def _reclaim_while_parking(queue: Any, clock: ManualClock) -> list[str | None]:
    """ "A" is served first (and its lease lost), then "B", "C", "D" and "Z": "A" has the oldest
    turn. Once the lease lapsed (30 s), the claim that takes it back (its item ready again
    after a backoff of at most 1 s) finds "A" ahead of the tenant it serves with nothing due:
    what is served, in order (each completed but A's first)."""
    await queue.enqueue("A", {"n": "a1"})
    await queue.enqueue("A", {"n": "a2"}, delay_seconds=1000)
    for tenant in ("B", "C", "D", "Z"):
        await queue.enqueue_many(tenant, [NewItem(payload={"n": f"{tenant}{k}"}) for k in range(4)])
    served: list[str | None] = []
    for step in range(12):
        if step == 5:
            clock.advance(31)  # A's lease lapses: this claim takes it back
        if step == 6:
            clock.advance(5)  # the reclaimed a1 is due
        lease = await queue.claim("w")
        served.append(None if lease is None else lease.item.payload["n"])
        if lease is not None and step > 0:
            await queue.complete(lease)
    return served


@pytest.mark.asyncio
async def test_a_claim_that_reclaims_a_tenants_lease_keeps_its_turn(
    pg_tables: StateTables,
) -> None:
    # Parked in the statement that took its lease back, "a" was given a new turn by the
    # rotation join after it (the back of the rotation): served after "b" and "c" again.
    clock, policy = ManualClock(T0), QueuePolicy(lease_seconds=30)
    queue = await open_queue(pg_tables, clock, policy)
    try:
        served = await _reclaim_while_parking(queue, clock)
    finally:
        await queue.aclose()
    memory_clock = ManualClock(T0)
    memory = AsyncMemoryWorkQueue(clock=memory_clock, policy=policy)
    expected = await _reclaim_while_parking(memory, memory_clock)
    assert served == expected
    assert served[:7] == ["a1", "B0", "C0", "D0", "Z0", "B1", "a1"]


@pytest.mark.asyncio
async def test_a_parked_tenant_whose_ready_items_are_cancelled_leaves_the_parked_table(
    pg_tables: StateTables,
) -> None:
    # As a drained tenant leaves the rotation: its next enqueue joins at the back, and
    # prune() does not miss it (as the memory backend forgets a tenant without items).
    t, clock = pg_tables, ManualClock(T0)
    queue = await open_queue(t, clock)
    try:
        await queue.enqueue("a", {"n": "a-later"}, item_id="later", delay_seconds=3600)
        await queue.enqueue_many("zz", [NewItem(payload={"n": k}) for k in range(2)])
        assert (await queue.claim("w")) is not None  # parks "a"
        assert [name for name, *_ in _rotation(t)[1]] == ["a"]
        assert await queue.cancel("a", "later")
        assert _rotation(t)[1] == []
        await queue.enqueue("a", {"n": "a-now"})
        turns = dict(_rotation(t)[0])
        assert turns["a"] >= turns["zz"]  # the back of the rotation, not its old turn 0
    finally:
        await queue.aclose()


async def _impatient(t: StateTables, clock: ManualClock) -> AsyncPostgresWorkQueue:
    """A second queue whose connections set lock_timeout: a call that waited on any lock
    fails (55P03, retried, then raised) instead of returning."""
    pool = await open_pool(2, kwargs={"options": "-c statement_timeout=30s -c lock_timeout=200ms"})
    return await AsyncPostgresWorkQueue.open(pool, tables=t, clock=clock, close_source=True)


@pytest.mark.asyncio
async def test_an_open_transaction_that_enqueued_for_a_parked_tenant_delays_no_claim(
    pg_tables: StateTables,
) -> None:
    # Tenant "p" is parked (its one item is delayed) and "q" too, due by the time the claims
    # run. A caller's transaction enqueues for "p" (putting it back: its parked row deleted, its
    # rotation row inserted, both uncommitted) and stays open while claims run on connections
    # with lock_timeout set: a claim that waited on any lock would fail instead of serving
    # "q" (put back by the claim) and "zz".
    t, clock = pg_tables, ManualClock(T0)
    queue = await open_queue(t, clock)
    claimers = await _impatient(t, clock)
    try:
        await queue.enqueue("p", {"n": "p-later"}, delay_seconds=60)
        await queue.enqueue("q", {"n": "q-later"}, delay_seconds=10)
        await queue.enqueue_many("zz", [NewItem(payload={"n": f"zz{k}"}) for k in range(3)])
        assert (await queue.claim("w")) is not None  # parks "p" and "q"
        assert [name for name, *_ in _rotation(t)[1]] == ["p", "q"]
        clock.advance(10)
        async with await AsyncConnection.connect(PG_DSN) as conn, conn.transaction():
            await queue.bound(conn).enqueue("p", {"n": "p-now"})
            served = [await claimers.claim(f"w{k}") for k in range(3)]
            payloads = [lease.item.payload["n"] for lease in served if lease is not None]
            assert payloads == ["q-later", "zz1", "zz2"]
        lease = await claimers.claim("w-after")
        assert lease is not None and lease.item.payload == {"n": "p-now"}
    finally:
        await queue.aclose()
        await claimers.aclose()


@pytest.mark.asyncio
async def test_cancel_of_a_parked_tenants_item_waits_on_no_open_transaction(
    pg_tables: StateTables,
) -> None:
    # A caller's transaction enqueued for parked "t" (taking its parked row) and stays open:
    # cancelling t's delayed item (its last ready one, as the cancel sees it), on a connection
    # with lock_timeout set, neither waits for that transaction nor fails. Inside a REPEATABLE
    # READ transaction, cancelling parked "u"'s item after another session put "u" back does
    # not fail either (locking the row that session deleted would).
    t, clock = pg_tables, ManualClock(T0)
    queue = await open_queue(t, clock)
    impatient = await _impatient(t, clock)
    try:
        await queue.enqueue("t", {"n": "t0"}, item_id="t0", delay_seconds=60)
        await queue.enqueue("u", {"n": "u0"}, item_id="u0", delay_seconds=60)
        await queue.enqueue_many("zz", [NewItem(payload={"n": k}) for k in range(2)])
        assert (await queue.claim("w")) is not None  # parks "t" and "u"
        assert [name for name, *_ in _rotation(t)[1]] == ["t", "u"]
        async with await AsyncConnection.connect(PG_DSN) as conn, conn.transaction():
            await queue.bound(conn).enqueue("t", {"n": "t-now"})
            assert await impatient.cancel("t", "t0")
        async with await AsyncConnection.connect(PG_DSN) as conn:
            await conn.set_isolation_level(IsolationLevel.REPEATABLE_READ)
            async with conn.transaction():
                assert await queue.bound(conn).get_item("u", "u0") is not None  # the snapshot
                await impatient.enqueue("u", {"n": "u-now"})  # puts "u" back, committed
                assert await queue.bound(conn).cancel("u", "u0")
        served = [lease.item.payload["n"] for lease in await queue.claim_many("w", limit=2)]
        assert served == ["t-now", "u-now"]
    finally:
        await queue.aclose()
        await impatient.aclose()


async def _lapses_behind_a_put_back(queue: Any, clock: ManualClock, many: bool) -> list[int]:
    """12 leases lapse while a parked tenant's item falls due; then one claim call, whose
    first statement puts the tenant back (and is sent again): what is leased and delayed."""
    for n in range(12):
        await queue.enqueue("busy", {"n": n})
    await queue.enqueue("late", {"n": 0}, delay_seconds=30)
    for _ in range(12):  # the second claim steps over "late" (turn 0, nothing due): parked
        assert await queue.claim("w1") is not None
    clock.advance(31)  # every lease lapsed (10 s); "late" is due
    got = await queue.claim_many("w2", limit=1) if many else [await queue.claim("w2")]
    stats = await queue.stats()
    return [len(got), stats.leased, stats.delayed, stats.ready]


@pytest.mark.asyncio
@pytest.mark.parametrize("many", [False, True], ids=["claim", "claim_many"])
async def test_a_claim_sent_again_after_a_put_back_takes_back_one_batch_of_lapses(
    pg_tables: StateTables, many: bool
) -> None:
    """A claim call takes back at most RECLAIM_PER_CLAIM lapsed leases, as on every backend,
    however many statements it sends: the statement sent again after a put-back round does
    not look for lapses again (it looked again after a full batch, taking back 12 here)."""
    policy = QueuePolicy(lease_seconds=10, max_attempts=5, backoff_base=1, random=lambda: 0.5)
    memory_clock = ManualClock(T0)
    memory = AsyncMemoryWorkQueue(clock=memory_clock, policy=policy)
    expected = await _lapses_behind_a_put_back(memory, memory_clock, many)
    assert expected == [1, 1 + 12 - 8, 8, 0]
    clock = ManualClock(T0)
    queue = await open_queue(pg_tables, clock, policy)
    try:
        assert await _lapses_behind_a_put_back(queue, clock, many) == expected
    finally:
        await queue.aclose()
