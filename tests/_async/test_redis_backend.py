"""Redis backend behaviour beyond the kit: round trips, limits, hostile identifiers, failures."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from runyard import CounterDelta, ManualClock, QueuePolicy, RunKey
from runyard._async.redis import queue_reads as queue_module
from runyard.errors import (
    ConfigurationError,
    PoolExhaustedError,
    QueueUnavailableError,
    StatePersistenceError,
    StoreOutcomeUnknown,
)
from runyard.redis import AsyncRedisStateStore, AsyncRedisWorkQueue, RedisStoreSettings
from runyard.redis.flavours import AsyncRedis, AsyncRedisCluster, AsyncRetry, NoBackoff
from runyard.redis.keys import StateKeys

from tests._async.redis_support import fresh_settings, state_store_on
from tests.support.proxy import ReplyDroppingProxy, running_proxy
from tests.support.redis_commands import counting_commands
from tests.support.redis_plugin import AsyncClients, RedisTarget
from tests.support.servers import free_port

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


# -- failures ---------------------------------------------------------------------------------
@pytest_asyncio.fixture
async def proxy(dedicated_redis_target: RedisTarget) -> AsyncIterator[ReplyDroppingProxy]:
    with running_proxy(dedicated_redis_target.port) as proxy:
        yield proxy


def _through(proxy: ReplyDroppingProxy) -> RedisTarget:
    return RedisTarget("server", port=proxy.port)


@pytest.mark.asyncio
async def test_lost_reply_to_put_run_is_settled_by_reading_back(
    proxy: ReplyDroppingProxy,
) -> None:
    client = AsyncClients.for_target(_through(proxy))
    async with AsyncRedisStateStore(client, settings=fresh_settings(), owns_client=True) as store:
        key = RunKey("acme", "r")
        await store.put_run(key, {"v": 1}, expected_version=0)
        proxy.drop_next_reply()
        record = await store.put_run(key, {"v": 2}, expected_version=1)
        assert proxy.dropped == 1
        assert (record.version, record.blob) == (2, {"v": 2})
        stored = await store.get_run(key)
        assert stored is not None and stored.version == 2


@pytest.mark.asyncio
async def test_lost_reply_to_a_patch_is_settled_by_its_write_id_and_never_resent(
    proxy: ReplyDroppingProxy,
) -> None:
    client = AsyncClients.for_target(_through(proxy))
    async with AsyncRedisStateStore(client, settings=fresh_settings(), owns_client=True) as store:
        key = RunKey("acme", "r")
        await store.put_run(key, {}, expected_version=0)
        proxy.drop_next_reply()
        patched = await store.patch_run(key, CounterDelta(iterations=1))
        assert proxy.dropped == 1 and (patched.iterations, patched.version) == (1, 2)
        stored = await store.get_run(key)
        assert stored is not None and (stored.iterations, stored.version) == (1, 2)


@pytest.mark.asyncio
async def test_lost_reply_to_an_enqueue_with_a_caller_id_is_read_back(
    proxy: ReplyDroppingProxy,
) -> None:
    client = AsyncClients.for_target(_through(proxy))
    async with AsyncRedisWorkQueue(client, settings=fresh_settings(), owns_client=True) as queue:
        await queue.enqueue("acme", {"warm": True}, item_id="warm")
        proxy.drop_next_reply()
        item = await queue.enqueue("acme", {"job": 1}, item_id="job-1")
        assert proxy.dropped == 1 and (item.item_id, item.payload) == ("job-1", {"job": 1})
        assert (await queue.stats()).ready == 2


@pytest.mark.asyncio
async def test_lost_reply_to_an_anonymous_enqueue_is_outcome_unknown(
    proxy: ReplyDroppingProxy,
) -> None:
    client = AsyncClients.for_target(_through(proxy))
    async with AsyncRedisWorkQueue(client, settings=fresh_settings(), owns_client=True) as queue:
        await queue.enqueue("acme", {"warm": True})
        proxy.drop_next_reply()
        with pytest.raises(StoreOutcomeUnknown):
            await queue.enqueue("acme", {"job": 1})
        assert (await queue.stats()).ready == 2


@pytest.mark.asyncio
async def test_lost_reply_to_a_claim_is_outcome_unknown(proxy: ReplyDroppingProxy) -> None:
    client = AsyncClients.for_target(_through(proxy))
    async with AsyncRedisWorkQueue(client, settings=fresh_settings(), owns_client=True) as queue:
        await queue.enqueue("acme", {})
        proxy.drop_next_reply()
        with pytest.raises(StoreOutcomeUnknown):
            await queue.claim("w1")
        assert (await queue.stats()).leased == 1


@pytest.mark.asyncio
async def test_a_server_that_stays_down_is_a_retryable_error_after_the_budget() -> None:
    settings = fresh_settings(retry_attempts=3, retry_backoff_base=0.001, retry_backoff_cap=0.002)
    client = AsyncRedis(port=free_port(), retry=AsyncRetry(NoBackoff(), 0))
    async with AsyncRedisStateStore(client, settings=settings, owns_client=True) as store:
        with pytest.raises(StatePersistenceError) as caught:
            await store.put_run(RunKey("acme", "r"), {}, expected_version=0)
        assert caught.value.reason == "unavailable" and caught.value.retryable is True
    client = AsyncRedis(port=free_port(), retry=AsyncRetry(NoBackoff(), 0))
    async with AsyncRedisWorkQueue(client, settings=settings, owns_client=True) as queue:
        with pytest.raises(QueueUnavailableError) as unavailable:
            await queue.claim("w1")
        assert unavailable.value.retryable is True


@pytest.mark.asyncio
async def test_an_exhausted_pool_fails_at_once(dedicated_redis_target: RedisTarget) -> None:
    client = AsyncRedis(
        port=dedicated_redis_target.port, max_connections=1, retry=AsyncRetry(NoBackoff(), 0)
    )
    held = await client.connection_pool.get_connection()  # type: ignore[no-untyped-call,unused-ignore]
    try:
        store = AsyncRedisStateStore(client, settings=fresh_settings())
        with pytest.raises(PoolExhaustedError) as caught:
            await store.get_run(RunKey("acme", "r"))
        assert caught.value.retryable is True
    finally:
        await client.connection_pool.release(held)
        await client.aclose()


@pytest.mark.asyncio
async def test_lost_reply_to_put_session_is_settled_by_reading_back(
    proxy: ReplyDroppingProxy,
) -> None:
    client = AsyncClients.for_target(_through(proxy))
    async with AsyncRedisStateStore(client, settings=fresh_settings(), owns_client=True) as store:
        await store.put_session("acme", "s", {"v": 1}, expected_version=0)
        proxy.drop_next_reply()
        record = await store.put_session("acme", "s", {"v": 2}, expected_version=1)
        assert proxy.dropped == 1 and (record.version, record.blob) == (2, {"v": 2})
        stored = await store.get_session("acme", "s")
        assert stored is not None and (stored.version, stored.blob) == (2, {"v": 2})


@pytest.mark.asyncio
async def test_lost_reply_to_release_lease_is_settled_by_reading_back(
    proxy: ReplyDroppingProxy,
) -> None:
    client = AsyncClients.for_target(_through(proxy))
    async with AsyncRedisStateStore(client, settings=fresh_settings(), owns_client=True) as store:
        key = RunKey("acme", "r")
        lease = await store.acquire_lease(key, "w1", ttl_seconds=60)
        proxy.drop_next_reply()
        assert await store.release_lease(lease) is True  # this call's release applied
        assert proxy.dropped == 1 and await store.get_lease(key) is None
        proxy.drop_next_reply()
        assert await store.release_lease(lease) is False  # already released: nothing to do
        assert proxy.dropped == 2
        again = await store.acquire_lease(key, "w2", ttl_seconds=60)
        assert again.epoch == lease.epoch + 1


# -- redis-py's own retries -------------------------------------------------------------------
@pytest.mark.asyncio
async def test_a_client_with_redis_py_default_retries_is_refused(
    proxy: ReplyDroppingProxy,
) -> None:
    client = AsyncRedis(port=proxy.port)  # redis-py 8 retries by default
    try:
        for build in (
            lambda: AsyncRedisStateStore(client, settings=fresh_settings()),
            lambda: AsyncRedisWorkQueue(client, settings=fresh_settings()),
        ):
            with pytest.raises(ConfigurationError) as caught:
                build()
            message = str(caught.value)
            assert "retry=Retry(NoBackoff(), 0)" in message
            assert "Retry from " + AsyncRetry.__module__ in message
        with pytest.raises(ConfigurationError):
            await AsyncRedisStateStore.open(client, settings=fresh_settings())
        assert proxy.dropped == 0  # refused before anything was sent
    finally:
        await client.aclose()


@pytest.mark.asyncio
async def test_fakeredis_and_clients_with_retries_off_are_accepted(
    fake_redis_target: RedisTarget, dedicated_redis_target: RedisTarget
) -> None:
    for target in (fake_redis_target, dedicated_redis_target):
        client = AsyncClients.for_target(target)
        async with AsyncRedisStateStore(
            client, settings=fresh_settings(), owns_client=True
        ) as store:
            await store.put_run(RunKey("acme", "r"), {"ok": True}, expected_version=0)
            stored = await store.get_run(RunKey("acme", "r"))
            assert stored is not None and (stored.version, stored.blob) == (1, {"ok": True})


@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_cluster_client_with_redis_py_default_retries_is_refused(
    cluster_redis_target: RedisTarget,
) -> None:
    client = AsyncRedisCluster(host=cluster_redis_target.host, port=cluster_redis_target.port)
    try:
        with pytest.raises(ConfigurationError) as caught:
            AsyncRedisWorkQueue(client, settings=fresh_settings())
        assert "retry=Retry(NoBackoff(), 0)" in str(caught.value)
        with pytest.raises(ConfigurationError):
            await AsyncRedisStateStore.open(client, settings=fresh_settings())
    finally:
        await client.aclose()


# -- waiting out a failover (counted attempts, no timings) -------------------------------------
def _quick_retries(attempts: int) -> RedisStoreSettings:
    return fresh_settings(
        retry_attempts=attempts, retry_backoff_base=0.001, retry_backoff_cap=0.002
    )


@pytest.mark.asyncio
async def test_a_write_waits_out_a_failover_within_the_retry_budget(
    proxy: ReplyDroppingProxy, dedicated_redis_target: RedisTarget
) -> None:
    settings = _quick_retries(4)
    key = RunKey("acme", "r")
    direct = AsyncClients.for_target(dedicated_redis_target)
    async with AsyncRedisStateStore(direct, settings=settings, owns_client=True) as setup:
        await setup.put_run(key, {"v": 1}, expected_version=0)
    proxy.refuse_connections(3)  # the server is back on the 4th attempt
    client = AsyncClients.for_target(_through(proxy))
    async with AsyncRedisStateStore(client, settings=settings, owns_client=True) as store:
        patched = await store.patch_run(key, CounterDelta(iterations=1))
        assert proxy.refused == 3
        assert (patched.iterations, patched.version) == (1, 2)  # applied exactly once
    proxy.refuse_connections(3, how="reset")  # a read whose connection was reset is re-sent
    client = AsyncClients.for_target(_through(proxy))
    async with AsyncRedisStateStore(client, settings=settings, owns_client=True) as store:
        read = await store.get_run(key)
        assert proxy.refused == 6 and read is not None and read.iterations == 1


@pytest.mark.asyncio
async def test_a_failover_past_the_retry_budget_is_a_retryable_unavailable_error(
    proxy: ReplyDroppingProxy, dedicated_redis_target: RedisTarget
) -> None:
    settings = _quick_retries(4)
    proxy.refuse_connections(100)
    client = AsyncClients.for_target(_through(proxy))
    async with AsyncRedisStateStore(client, settings=settings, owns_client=True) as store:
        with pytest.raises(StatePersistenceError) as caught:
            await store.put_run(RunKey("acme", "r"), {}, expected_version=0)
        assert caught.value.reason == "unavailable" and caught.value.retryable is True
        assert proxy.refused == 4  # one connection per attempt, none past the budget
    client = AsyncClients.for_target(_through(proxy))
    async with AsyncRedisWorkQueue(client, settings=settings, owns_client=True) as queue:
        with pytest.raises(QueueUnavailableError) as unavailable:
            await queue.enqueue("acme", {}, item_id="job-1")
        assert unavailable.value.retryable is True and proxy.refused == 8
    check = AsyncClients.for_target(dedicated_redis_target)
    async with AsyncRedisStateStore(check, settings=settings, owns_client=True) as store:
        assert await store.get_run(RunKey("acme", "r")) is None  # nothing ran


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
