"""The PostgreSQL queue's contract additions on the real server: run_at, per-item max_attempts,
cancel, purge_dead, prune, fresh tokens on adopt, reclaim inside claims, batched calls."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from runyard import ManualClock, QueuePolicy
from runyard._async.postgres.queue_core import RECLAIM_EVERY_SECONDS
from runyard.errors import ItemLeasedError, LeaseLostError
from runyard.models import NewItem
from runyard.policy import RECLAIM_PER_CLAIM
from runyard.postgres import AsyncPostgresWorkQueue, AsyncPsycopgExecutor, StateTables
from runyard.postgres.statements import statements
from runyard.postgres.statements.queue import claim_name
from runyard.postgres.statements.queue_batched import CLAIM_MANY_LITERAL_UP_TO, claim_many_name

from tests._async.postgres_support import CountingExecutor, open_pool, open_queue
from tests.support.postgres_plugin import admin_connection

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


@pytest.mark.asyncio
async def test_run_at_in_the_future_delays_and_in_the_past_is_due(
    queue: AsyncPostgresWorkQueue, clock: ManualClock
) -> None:
    later = await queue.enqueue("acme", {"n": 1}, run_at=clock.now() + 60)
    now = await queue.enqueue("acme", {"n": 2}, run_at=clock.now() - 60)
    assert later.available_at == clock.now() + 60 and now.available_at == clock.now()
    lease = await queue.claim("w1")
    assert lease is not None and lease.item_id == now.item_id
    assert await queue.claim("w1") is None
    clock.advance(60)
    lease = await queue.claim("w1")
    assert lease is not None and lease.item_id == later.item_id


@pytest.mark.asyncio
async def test_an_items_own_max_attempts_decides_its_dead_letter(
    queue: AsyncPostgresWorkQueue, clock: ManualClock
) -> None:
    item = await queue.enqueue("acme", {}, max_attempts=1)
    assert item.max_attempts == 1
    lease = await queue.claim("w1")
    assert lease is not None and lease.item.max_attempts == 1
    failed = await queue.fail(lease, error="boom")
    assert failed.state == "dead"
    (letter,) = await queue.dead_letters("acme")
    assert letter.reason == "failed 1 of 1 attempts" and letter.item.max_attempts == 1


@pytest.mark.asyncio
async def test_cancel_removes_ready_delayed_and_dead_items_and_refuses_a_leased_one(
    queue: AsyncPostgresWorkQueue,
) -> None:
    ready = await queue.enqueue("acme", {}, dedupe_key="k")
    delayed = await queue.enqueue("acme", {}, delay_seconds=60)
    assert await queue.cancel("acme", ready.item_id) is True
    assert await queue.cancel("acme", delayed.item_id) is True
    assert await queue.cancel("acme", ready.item_id) is False
    again = await queue.enqueue("acme", {}, dedupe_key="k")  # the key was freed
    assert again.item_id != ready.item_id
    lease = await queue.claim("w1")
    assert lease is not None
    with pytest.raises(ItemLeasedError):
        await queue.cancel("acme", lease.item_id)
    assert (await queue.get_item("acme", lease.item_id)) is not None
    await queue.fail(lease, retryable=False)
    assert await queue.cancel("acme", lease.item_id) is True
    assert await queue.dead_letters("acme") == []
    assert (await queue.stats()).dead == 0


@pytest.mark.asyncio
async def test_purge_dead_deletes_the_oldest_old_enough_letters_up_to_the_limit(
    queue: AsyncPostgresWorkQueue, clock: ManualClock
) -> None:
    for n in range(3):
        await queue.enqueue("acme", {"n": n})
        lease = await queue.claim("w1")
        assert lease is not None
        await queue.fail(lease, retryable=False)
        clock.advance(10)
    assert await queue.purge_dead("acme", older_than=25) == 1  # only the first died 30 s ago
    assert await queue.purge_dead("acme", limit=1) == 1
    (left,) = await queue.dead_letters("acme")
    assert left.item.payload == {"n": 2}
    assert await queue.purge_dead("other") == 0


@pytest.mark.asyncio
async def test_prune_forgets_empty_tenants_and_a_later_enqueue_serves_them_again(
    queue: AsyncPostgresWorkQueue, pg_tables: StateTables
) -> None:
    await queue.enqueue("busy", {})
    await queue.enqueue("gone", {}, item_id="g1")
    assert await queue.cancel("gone", "g1")  # cancel leaves the rotation row behind
    turns = pg_tables.qualified(pg_tables.turns)
    with admin_connection() as conn:
        before = {r[0] for r in conn.execute(f"SELECT tenant FROM {turns}")}
    assert before == {"busy", "gone"}
    assert await queue.prune(limit=10) == 1
    assert await queue.prune(limit=10) == 0
    with admin_connection() as conn:
        after = {r[0] for r in conn.execute(f"SELECT tenant FROM {turns}")}
    assert after == {"busy"}
    await queue.enqueue("gone", {}, item_id="g2")
    leases = [await queue.claim("w1"), await queue.claim("w1")]
    assert sorted(lease.tenant for lease in leases if lease) == ["busy", "gone"]


@pytest.mark.asyncio
async def test_a_busy_claimer_takes_back_a_lapse_within_the_reclaim_interval(
    queue: AsyncPostgresWorkQueue, clock: ManualClock
) -> None:
    """Claims between the periodic looks skip the reclaim, yet a lease that lapses while
    claims keep finding work is taken back no later than RECLAIM_EVERY_SECONDS after."""
    await queue.enqueue("acme", {}, item_id="crashed")
    crashed = await queue.claim("crashed-worker")
    assert crashed is not None
    for n in range(400):
        await queue.enqueue("busy", {}, item_id=f"b{n}")
    step = RECLAIM_EVERY_SECONDS / 5
    clock.advance(crashed.expires_at - crashed.claimed_at - 1)
    while True:
        clock.advance(step)
        lease = await queue.claim("w1")
        assert lease is not None and lease.tenant == "busy"  # claims keep finding work
        await queue.complete(lease)
        item = await queue.get_item("acme", "crashed")
        assert item is not None
        if item.state == "ready":
            break
    assert crashed.expires_at < clock.now() <= crashed.expires_at + RECLAIM_EVERY_SECONDS + step
    assert item.attempts == 1 and item.worker is None


@pytest.mark.asyncio
async def test_a_claim_after_a_full_reclaim_batch_looks_again_at_once(
    queue: AsyncPostgresWorkQueue, clock: ManualClock
) -> None:
    held = RECLAIM_PER_CLAIM + 2
    for n in range(held):
        await queue.enqueue("acme", {}, item_id=f"i{n}")
        assert await queue.claim("crashed-worker") is not None
    await queue.enqueue("busy", {}, item_id="b1")
    await queue.enqueue("busy", {}, item_id="b2")
    clock.advance(POLICY.lease_seconds + 1)
    first = await queue.claim("w1")  # takes back a full batch and serves b1
    assert first is not None and first.item_id == "b1"
    assert (await queue.stats()).leased == 2 + 1
    second = await queue.claim("w1")  # same instant: looks again, takes back the other 2
    assert second is not None and second.item_id == "b2"
    assert (await queue.stats()).leased == 2


def _rotation(tables: StateTables) -> set[str]:
    with admin_connection() as conn:
        return {
            str(r[0]) for r in conn.execute(f"SELECT tenant FROM {tables.qualified(tables.turns)}")
        }


@pytest.mark.asyncio
async def test_a_drained_tenant_leaves_the_rotation_in_the_next_claim_statement(
    pg_tables: StateTables, clock: ManualClock
) -> None:
    """No second round trip: the claim that drains a tenant notes it, the next claim (even
    one that finds nothing due) retires it; a noted tenant that got new work stays."""
    executor = CountingExecutor(AsyncPsycopgExecutor(await open_pool()))
    queue = AsyncPostgresWorkQueue(executor, tables=pg_tables, clock=clock, policy=POLICY)
    try:
        await queue.enqueue("z", {}, item_id="z1")
        sent = executor.sent
        first = await queue.claim("w1")
        assert first is not None and first.item_id == "z1"
        assert executor.sent == sent + 1
        assert _rotation(pg_tables) == {"z"}  # noted, not yet retired
        await queue.enqueue("b", {}, item_id="b1")  # same turn as z: served first by name
        await queue.enqueue("z", {}, item_id="z2")  # z has ready work again
        sent = executor.sent
        second = await queue.claim("w1")
        assert second is not None and second.item_id == "b1"
        assert executor.sent == sent + 1
        assert _rotation(pg_tables) == {"b", "z"}  # z kept its row: it has z2
        third = await queue.claim("w1")
        assert third is not None and third.item_id == "z2"
        assert _rotation(pg_tables) == {"z"}  # b retired by this claim
        sent = executor.sent
        assert await queue.claim("w1") is None
        assert executor.sent == sent + 1
        assert _rotation(pg_tables) == set()  # retired by a claim that found nothing due
        await queue.enqueue("z", {}, item_id="z3")  # joins the rotation again
        fourth = await queue.claim("w1")
        assert fourth is not None and fourth.item_id == "z3"
    finally:
        await executor.inner.aclose()


@pytest.mark.asyncio
async def test_a_claim_sends_the_reclaim_and_the_retire_only_when_it_has_them(
    pg_tables: StateTables, clock: ManualClock
) -> None:
    """Each claim statement sends the form (claim_name) with only the parts it can use: the
    reclaim on this queue's periodic look for lapses, the retire when earlier claims served
    tenants. A claim that passes over a tenant whose head is held sends its second statement
    with neither: its first one looked for lapses and carried the tenants to retire."""
    executor = CountingExecutor(AsyncPsycopgExecutor(await open_pool()))
    queue = AsyncPostgresWorkQueue(executor, tables=pg_tables, clock=clock, policy=POLICY)
    texts = statements(pg_tables)
    work = pg_tables.qualified(pg_tables.work)
    try:
        await queue.enqueue("a", {}, item_id="a1")  # same turn as b: served first by name
        await queue.enqueue("b", {}, item_id="b1")
        with admin_connection() as holder, holder.transaction():
            holder.execute(f"SELECT 1 FROM {work} WHERE item_id = 'a1' FOR UPDATE")
            sent = executor.sent
            first = await queue.claim("w1")  # passes over a (its head is held), serves b
            assert first is not None and first.item_id == "b1"
            second = await queue.claim("w1")  # retires b (drained); a is still held
            assert second is None
            forms = executor.statements[sent:]
        clock.advance(RECLAIM_EVERY_SECONDS)
        sent = executor.sent
        third = await queue.claim("w1")  # looks for lapses; nothing to retire
        assert third is not None and third.item_id == "a1"
        clock.advance(RECLAIM_EVERY_SECONDS)
        assert await queue.claim("w1") is None  # looks again and retires a
        forms += executor.statements[sent:]
        expected = [(True, False), (False, False), (False, True), (False, False)]
        expected += [(True, False), (True, True)]
        assert forms == [getattr(texts, claim_name(*parts)) for parts in expected]
        assert _rotation(pg_tables) == set()
    finally:
        await executor.inner.aclose()


@pytest.mark.asyncio
async def test_a_claim_many_sends_the_reclaim_only_when_it_looks_for_lapses(
    pg_tables: StateTables, clock: ManualClock
) -> None:
    """Each claim_many statement sends the form (claim_many_name) for its batch size with the
    reclaim only on this queue's periodic look for lapses, and the tenants to retire (its
    last argument) only when earlier claims served some, NULL otherwise; a batch larger than
    CLAIM_MANY_LITERAL_UP_TO sends the forms with the size as a parameter."""
    executor = CountingExecutor(AsyncPsycopgExecutor(await open_pool()))
    queue = AsyncPostgresWorkQueue(executor, tables=pg_tables, clock=clock, policy=POLICY)
    texts = statements(pg_tables)
    work = pg_tables.qualified(pg_tables.work)
    beyond = CLAIM_MANY_LITERAL_UP_TO + 1
    try:
        await queue.enqueue("a", {}, item_id="a1")  # same turn as b: picked first by name
        await queue.enqueue("b", {}, item_id="b1")
        with admin_connection() as holder, holder.transaction():
            holder.execute(f"SELECT 1 FROM {work} WHERE item_id = 'a1' FOR UPDATE")
            sent = executor.sent
            first = await queue.claim_many("w1", limit=2)  # looks; a's head is held
            assert [lease.item_id for lease in first] == ["b1"]
            # retires b (drained), passes over a (still held), then finds nothing
            assert await queue.claim_many("w1", limit=2) == []
        clock.advance(RECLAIM_EVERY_SECONDS)
        third = await queue.claim_many("w1", limit=2)  # looks; nothing to retire
        assert [lease.item_id for lease in third] == ["a1"]
        clock.advance(RECLAIM_EVERY_SECONDS)
        assert await queue.claim_many("w1", limit=2) == []  # looks and retires a
        forms, retired = executor.statements[sent:], executor.arguments[sent:]
        await queue.enqueue("c", {}, item_id="c1")
        sent = executor.sent
        fifth = await queue.claim_many("w1", limit=beyond)  # looks again: the last was idle
        assert [lease.item_id for lease in fifth] == ["c1"]
        assert await queue.claim_many("w1", limit=beyond) == []  # retires c
        forms += executor.statements[sent:]
        retired += executor.arguments[sent:]
        expected = [(2, True), (2, False), (2, False), (2, True), (2, True)]
        expected += [(beyond, True), (beyond, False)]
        assert forms == [getattr(texts, claim_many_name(*parts)) for parts in expected]
        assert [args[-2] for args in retired] == [None, ["b"], None, None, ["a"], None, ["c"]]
        assert {args[-1] for args in retired} == {True}  # an unbound claim parks
        assert _rotation(pg_tables) == set()
    finally:
        await executor.inner.aclose()


@pytest.mark.asyncio
async def test_a_bound_claim_retires_its_drained_tenant_in_the_callers_transaction(
    queue: AsyncPostgresWorkQueue, pg_tables: StateTables
) -> None:
    await queue.enqueue("solo", {}, item_id="s1")
    pool = await open_pool(1)
    try:
        async with pool.connection() as conn, conn.transaction():
            lease = await queue.bound(conn).claim("w1")
            assert lease is not None and lease.item_id == "s1"
        assert _rotation(pg_tables) == set()
    finally:
        await pool.close()


@pytest.mark.asyncio
async def test_adopt_mints_a_new_token_and_the_old_one_is_refused(
    queue: AsyncPostgresWorkQueue,
) -> None:
    await queue.enqueue("acme", {})
    old = await queue.claim("w1")
    assert old is not None
    (adopted,) = await queue.adopt("w1")
    assert adopted.token > old.token
    with pytest.raises(LeaseLostError) as lost:
        await queue.complete(old)
    assert lost.value.reason == "taken"
    await queue.complete(adopted)


@pytest.mark.asyncio
async def test_a_claim_reclaims_lapsed_leases_and_retries_them_after_the_backoff(
    queue: AsyncPostgresWorkQueue, clock: ManualClock
) -> None:
    for n in range(RECLAIM_PER_CLAIM + 2):
        await queue.enqueue("crashed", {"n": n})
    lapsed = [await queue.claim("dead-worker") for _ in range(RECLAIM_PER_CLAIM + 2)]
    assert all(lapsed)
    clock.advance(31)
    await queue.enqueue("live", {})
    lease = await queue.claim("w1")  # reclaims 8, serves the live tenant
    assert lease is not None and lease.tenant == "live"
    stats = await queue.stats()
    assert (stats.leased, stats.delayed) == (3, RECLAIM_PER_CLAIM)  # w1's lease + 2 lapsed
    item = await queue.get_item("crashed", lapsed[0].item_id)  # type: ignore[union-attr]
    assert item is not None and item.state == "ready" and item.attempts == 1
    assert item.available_at == clock.now() + POLICY.backoff(1)  # 0.5 s: half of base 1 s
    clock.advance(POLICY.backoff(1))
    again = await queue.claim_many("w2", limit=RECLAIM_PER_CLAIM + 2)
    # The 8 are due again; this call reclaims the other 2, which wait out their own backoff.
    assert len(again) == RECLAIM_PER_CLAIM
    assert {lease.item.attempts for lease in again} == {2}
    assert (await queue.stats()).delayed == 2


@pytest.mark.asyncio
async def test_reap_retries_a_lapse_after_the_backoff(
    queue: AsyncPostgresWorkQueue, clock: ManualClock
) -> None:
    await queue.enqueue("acme", {})
    assert await queue.claim("w1") is not None
    clock.advance(31)
    (reaped,) = await queue.reap()
    assert reaped.state == "ready" and reaped.available_at == clock.now() + 0.5
    assert await queue.claim("w2") is None
    clock.advance(0.5)
    assert await queue.claim("w2") is not None


@pytest.mark.asyncio
async def test_enqueue_many_returns_stored_items_for_repeats_across_calls(
    queue: AsyncPostgresWorkQueue,
) -> None:
    first = await queue.enqueue_many(
        "acme", [NewItem(payload=1, item_id="a"), NewItem(payload=2, dedupe_key="k")]
    )
    again = await queue.enqueue_many(
        "acme",
        [
            NewItem(payload=9, dedupe_key="k"),
            NewItem(payload=3, item_id="b", max_attempts=2, run_at=0.0),
            NewItem(payload=9, item_id="a"),
        ],
    )
    assert [i.payload for i in again] == [2, 3, 1]
    assert again[0].item_id == first[1].item_id and again[1].max_attempts == 2
    assert (await queue.stats()).ready == 3
