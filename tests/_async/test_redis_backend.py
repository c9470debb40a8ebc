"""Redis backend behaviour beyond the kit: round trips, limits, hostile identifiers, bounded
batches. Lost replies, redis-py's retries and failovers: test_redis_failures.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from runyard import CounterDelta, ManualClock, QueuePolicy, RunKey
from runyard._async.redis import queue_reads as queue_module
from runyard.errors import (
    StatePersistenceError,
)
from runyard.redis import AsyncRedisStateStore, AsyncRedisWorkQueue, RedisStoreSettings
from runyard.redis.keys import StateKeys

from tests._async.redis_support import fresh_settings, state_store_on
from tests.support.redis_commands import counting_commands
from tests.support.redis_plugin import AsyncClients, RedisTarget

HOSTILE = ["a:b", "{a}", "}{", "*", "?[x]\\", "ünï:cødé ✓", "日本語{タグ}", "a b\n"]


@pytest_asyncio.fixture
async def store(dedicated_redis_target: RedisTarget) -> AsyncIterator[AsyncRedisStateStore]:
    async with state_store_on(dedicated_redis_target) as store:
        yield store


@pytest_asyncio.fixture
async def queue(dedicated_redis_target: RedisTarget) -> AsyncIterator[AsyncRedisWorkQueue]:
    client = AsyncClients.for_target(dedicated_redis_target)
    queue = AsyncRedisWorkQueue(
        client, clock=ManualClock(), settings=fresh_settings(), owns_client=True
    )
    yield queue
    await queue.aclose()


# -- round trips ------------------------------------------------------------------------------
def _port(target: RedisTarget) -> int:
    return target.port


@pytest.mark.asyncio
async def test_put_run_sends_exactly_one_command(
    store: AsyncRedisStateStore, dedicated_redis_target: RedisTarget
) -> None:
    await store.put_run(RunKey("acme", "warm"), {}, expected_version=0)  # loads the script
    with counting_commands(_port(dedicated_redis_target)) as counted:
        await store.put_run(RunKey("acme", "r"), {"step": 1}, expected_version=0)
    assert counted.sent == ["evalsha"] and counted.stats["evalsha"] == 1


@pytest.mark.asyncio
async def test_patch_run_sends_exactly_one_command(
    store: AsyncRedisStateStore, dedicated_redis_target: RedisTarget
) -> None:
    key = RunKey("acme", "r")
    await store.put_run(key, {}, expected_version=0)
    await store.patch_run(key, CounterDelta(iterations=1))
    with counting_commands(_port(dedicated_redis_target)) as counted:
        record = await store.patch_run(key, CounterDelta(input_tokens=5, iterations=1))
    assert counted.sent == ["evalsha"] and counted.stats["evalsha"] == 1
    assert (record.input_tokens, record.iterations, record.version) == (5, 2, 3)


@pytest.mark.asyncio
async def test_get_run_sends_exactly_one_command(
    store: AsyncRedisStateStore, dedicated_redis_target: RedisTarget
) -> None:
    key = RunKey("acme", "r")
    await store.put_run(key, {"a": 1}, expected_version=0)
    await store.patch_run(key, CounterDelta(cost_micros=7))
    with counting_commands(_port(dedicated_redis_target)) as counted:
        record = await store.get_run(key)
    assert counted.sent == ["hgetall"]
    assert record is not None and (record.blob, record.cost_micros) == ({"a": 1}, 7)


@pytest.mark.asyncio
async def test_claim_heartbeat_and_complete_send_exactly_one_command_each(
    queue: AsyncRedisWorkQueue, dedicated_redis_target: RedisTarget
) -> None:
    port = _port(dedicated_redis_target)
    await queue.enqueue("acme", {"warm": True})
    warm = await queue.claim("w0")
    assert warm is not None
    warm = await queue.heartbeat(warm.tenant, warm.item_id, token=warm.token)
    await queue.complete(warm.tenant, warm.item_id, token=warm.token)
    await queue.enqueue("acme", {"n": 1})
    with counting_commands(port) as claimed:
        lease = await queue.claim("w1")
    assert lease is not None
    with counting_commands(port) as beat:
        lease = await queue.heartbeat(lease.tenant, lease.item_id, token=lease.token)
    with counting_commands(port) as completed:
        await queue.complete(lease.tenant, lease.item_id, token=lease.token)
    for counted in (claimed, beat, completed):
        assert counted.sent == ["evalsha"] and counted.stats["evalsha"] == 1


@pytest.mark.asyncio
async def test_append_event_sends_exactly_one_command_with_or_without_an_event_id(
    store: AsyncRedisStateStore, dedicated_redis_target: RedisTarget
) -> None:
    port = _port(dedicated_redis_target)
    key = RunKey("acme", "r")
    await store.put_run(key, {}, expected_version=0)
    await store.append_event(key, "warm", {})  # loads the script
    with counting_commands(port) as plain:
        first = await store.append_event(key, "step", {"n": 1})
    with counting_commands(port) as named:
        second = await store.append_event(key, "step", {"n": 2}, event_id="e2")
    with counting_commands(port) as retried:  # same event_id, same content: the stored event
        again = await store.append_event(key, "step", {"n": 2}, event_id="e2")
    for counted in (plain, named, retried):
        assert counted.sent == ["evalsha"] and counted.stats["evalsha"] == 1
    assert (first.seq, second.seq) == (2, 3)
    assert again == second
    assert [(e.seq, e.event_id) for e in await store.read_events(key)] == [
        (1, None),
        (2, None),
        (3, "e2"),
    ]


@pytest.mark.asyncio
async def test_finalize_sends_exactly_one_command(
    store: AsyncRedisStateStore, dedicated_redis_target: RedisTarget
) -> None:
    warm, key = RunKey("acme", "warm"), RunKey("acme", "r")
    for k in (warm, key):
        await store.put_run(k, {}, expected_version=0)
    await store.finalize(warm, status="completed", event_type="done", event_data={})  # loads it
    await store.append_event(key, "step", {})
    with counting_commands(_port(dedicated_redis_target)) as counted:
        record = await store.finalize(
            key, status="error", event_type="crashed", event_data={"e": 1}, event_id="end"
        )
    assert counted.sent == ["evalsha"] and counted.stats["evalsha"] == 1
    assert (record.status, record.version) == ("error", 2)
    events = await store.read_events(key)
    assert [(e.seq, e.type, e.event_id, e.terminal) for e in events] == [
        (1, "step", None, False),
        (2, "crashed", "end", True),
    ]


@pytest.mark.asyncio
async def test_a_value_over_the_limit_is_refused_before_sending(
    dedicated_redis_target: RedisTarget,
) -> None:
    client = AsyncClients.for_target(dedicated_redis_target)
    settings = fresh_settings(max_value_bytes=1024)
    async with AsyncRedisStateStore(client, settings=settings, owns_client=True) as store:
        await store.put_run(RunKey("acme", "warm"), {}, expected_version=0)
        port = _port(dedicated_redis_target)
        with counting_commands(port) as counted, pytest.raises(StatePersistenceError) as caught:
            await store.put_run(RunKey("acme", "big"), {"x": "y" * 2000}, expected_version=0)
        assert caught.value.reason == "too_large" and caught.value.retryable is False
        assert counted.sent == []
        assert await store.get_run(RunKey("acme", "big")) is None


@pytest.mark.asyncio
async def test_a_payload_over_the_limit_is_refused_before_sending(
    dedicated_redis_target: RedisTarget,
) -> None:
    client = AsyncClients.for_target(dedicated_redis_target)
    settings = fresh_settings(max_value_bytes=1024)
    async with AsyncRedisWorkQueue(client, settings=settings, owns_client=True) as queue:
        port = _port(dedicated_redis_target)
        with counting_commands(port) as counted, pytest.raises(StatePersistenceError) as caught:
            await queue.enqueue("acme", ["z" * 2000])
        assert caught.value.reason == "too_large" and counted.sent == []


# -- hostile identifiers ----------------------------------------------------------------------
@pytest.mark.asyncio
async def test_hostile_tenants_and_ids_stay_isolated(store: AsyncRedisStateStore) -> None:
    for tenant in HOSTILE:
        for run_id in HOSTILE:
            await store.put_run(RunKey(tenant, run_id), [tenant, run_id], expected_version=0)
    for tenant in HOSTILE:
        page = await store.list_runs(tenant)
        assert [r.run_id for r in page.items] == HOSTILE
        assert all(r.blob == [tenant, r.run_id] for r in page.items)
    assert (await store.list_runs("a")).items == []


@pytest.mark.asyncio
async def test_hostile_tenants_and_ids_stay_isolated_in_the_queue(
    queue: AsyncRedisWorkQueue,
) -> None:
    for tenant in HOSTILE:
        for item_id in HOSTILE:
            await queue.enqueue(tenant, [tenant, item_id], item_id=item_id, dedupe_key=item_id)
    seen = []
    while (lease := await queue.claim("w")) is not None:
        assert lease.item.payload == [lease.tenant, lease.item_id]
        seen.append((lease.tenant, lease.item_id))
        await queue.complete(lease.tenant, lease.item_id, token=lease.token)
    assert sorted(seen) == sorted((t, i) for t in HOSTILE for i in HOSTILE)


def test_state_keys_are_length_prefixed_and_tagged_by_tenant() -> None:
    keys = StateKeys("ns", "acme")
    assert keys.run("run_1") == "ns:state:{4:acme}:run:5:run_1"
    assert StateKeys("ns", "a:b").run("c") != StateKeys("ns", "a").run("b:c")


# -- bounded batches --------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_adopt_reads_the_worker_index_in_pages_of_limit_and_skips_lapsed_leases(
    dedicated_redis_target: RedisTarget,
) -> None:
    clock = ManualClock()
    policy = QueuePolicy(lease_seconds=10, max_lease_seconds=1000)
    client = AsyncClients.for_target(dedicated_redis_target)
    async with AsyncRedisWorkQueue(
        client, policy=policy, clock=clock, settings=fresh_settings(), owns_client=True
    ) as queue:
        for n in range(6):
            await queue.enqueue("acme", {"n": n}, item_id=f"i{n}")
        leases = [await queue.claim("w1") for _ in range(6)]
        clock.advance(9)
        for lease in leases[3:]:
            assert lease is not None
            await queue.heartbeat(lease)
        clock.advance(2)  # the first three leases lapse (not reaped: still indexed)
        with counting_commands(dedicated_redis_target.port) as counted:
            adopted = await queue.adopt("w1", limit=2)
        assert [lease.item_id for lease in adopted] == ["i3", "i4"]
        ranges = [c for c in counted.scripted if c.upper().startswith("ZRANGEBYLEX")]
        # Pages of at most `limit`, each starting after the last member seen (no offsets).
        assert ranges and all(c.endswith((" LIMIT 0 2", " LIMIT 0 1")) for c in ranges)
        assert all(" (2:w1" in c for c in ranges[1:])
        # In token order: adopt gave i3 and i4 fresh tokens, after i5's.
        assert [x.item_id for x in await queue.adopt("w1", limit=10)] == ["i5", "i3", "i4"]


@pytest.mark.asyncio
async def test_stats_counts_due_items_without_reading_them_all(
    dedicated_redis_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_module, "STATS_SCAN", 2)
    clock = ManualClock()
    client = AsyncClients.for_target(dedicated_redis_target)
    async with AsyncRedisWorkQueue(
        client, clock=clock, settings=fresh_settings(), owns_client=True
    ) as queue:
        for n in range(5):
            await queue.enqueue("acme", {"n": n}, delay_seconds=5)
        await queue.enqueue("beta", {}, delay_seconds=60)
        clock.advance(10)  # five items due, none promoted yet (no claim ran)
        with counting_commands(dedicated_redis_target.port) as counted:
            stats = await queue.stats()
        assert (stats.ready, stats.delayed, stats.tenants) == (5, 1, 1)
        scripted = [c.upper() for c in counted.scripted]
        assert any(c.startswith("ZCOUNT") for c in scripted)
        reads = [c for c in scripted if c.startswith("ZRANGEBYSCORE")]
        assert reads and all(c.endswith("LIMIT 0 2") for c in reads)


@pytest.mark.asyncio
async def test_stats_tenants_is_low_only_past_the_scan_of_due_items(
    dedicated_redis_target: RedisTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    # docs/redis.md, "Round trips": tenants counts the rotation plus the tenants of the first
    # STATS_SCAN due unpromoted items; a claim promotes them and the count is exact again.
    monkeypatch.setattr(queue_module, "STATS_SCAN", 2)
    clock = ManualClock()
    client = AsyncClients.for_target(dedicated_redis_target)
    async with AsyncRedisWorkQueue(
        client, clock=clock, settings=fresh_settings(), owns_client=True
    ) as queue:
        await queue.enqueue("acme", {}, item_id="a1", delay_seconds=5)
        await queue.enqueue("acme", {}, item_id="a2", delay_seconds=6)
        await queue.enqueue("beta", {}, item_id="b1", delay_seconds=7)
        clock.advance(10)  # three due items, none promoted; beta's is behind the scan
        stats = await queue.stats()
        assert (stats.ready, stats.tenants) == (3, 1)
        lease = await queue.claim("w1")  # promotes all three, serves acme
        assert lease is not None and lease.item_id == "a1"
        stats = await queue.stats()
        assert (stats.ready, stats.leased, stats.tenants) == (2, 1, 2)


# -- hostile identifiers on the cluster lane --------------------------------------------------
@pytest_asyncio.fixture
async def cluster_settings(cluster_redis_target: RedisTarget) -> AsyncIterator[RedisStoreSettings]:
    settings = fresh_settings()
    yield settings
    cluster_redis_target.purge(settings.namespace)


@pytest.mark.slow
@pytest.mark.asyncio
async def test_hostile_tenants_and_ids_stay_isolated_on_the_cluster(
    cluster_redis_target: RedisTarget, cluster_settings: RedisStoreSettings
) -> None:
    client = AsyncClients.for_target(cluster_redis_target)
    async with AsyncRedisStateStore(
        client, clock=ManualClock(), settings=cluster_settings, owns_client=True
    ) as store:
        await test_hostile_tenants_and_ids_stay_isolated(store)


@pytest.mark.slow
@pytest.mark.asyncio
async def test_hostile_tenants_and_ids_stay_isolated_in_the_queue_on_the_cluster(
    cluster_redis_target: RedisTarget, cluster_settings: RedisStoreSettings
) -> None:
    client = AsyncClients.for_target(cluster_redis_target)
    async with AsyncRedisWorkQueue(
        client, clock=ManualClock(), settings=cluster_settings, owns_client=True
    ) as queue:
        await test_hostile_tenants_and_ids_stay_isolated_in_the_queue(queue)
