"""Redis backend behaviour beyond the kit: round trips, limits, hostile identifiers, failures."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from runyard import CounterDelta, ManualClock, RunKey
from runyard._redis_flavours import AsyncRedis, AsyncRetry, NoBackoff
from runyard._redis_keys import StateKeys
from runyard.errors import (
    PoolExhaustedError,
    QueueUnavailableError,
    StatePersistenceError,
    StoreOutcomeUnknown,
)
from runyard.redis import AsyncRedisStateStore, AsyncRedisWorkQueue, RedisStoreSettings

from tests.support.proxy import ReplyDroppingProxy, running_proxy
from tests.support.redis_commands import counting_commands
from tests.support.redis_plugin import AsyncClients, RedisTarget, fresh_namespace
from tests.support.servers import free_port

HOSTILE = ["a:b", "{a}", "}{", "*", "?[x]\\", "ünï:cødé ✓", "日本語{タグ}", "a b\n"]


def _settings(**overrides: object) -> RedisStoreSettings:
    values: dict[str, object] = {"namespace": fresh_namespace(), "durable": False}
    values.update(overrides)
    return RedisStoreSettings(**values)  # type: ignore[arg-type]


@pytest_asyncio.fixture
async def store(dedicated_redis_target: RedisTarget) -> AsyncIterator[AsyncRedisStateStore]:
    client = AsyncClients.for_target(dedicated_redis_target)
    store = AsyncRedisStateStore(
        client, clock=ManualClock(), settings=_settings(), owns_client=True
    )
    yield store
    await store.aclose()


@pytest_asyncio.fixture
async def queue(dedicated_redis_target: RedisTarget) -> AsyncIterator[AsyncRedisWorkQueue]:
    client = AsyncClients.for_target(dedicated_redis_target)
    queue = AsyncRedisWorkQueue(client, clock=ManualClock(), settings=_settings(), owns_client=True)
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
    settings = _settings(max_value_bytes=1024)
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
    settings = _settings(max_value_bytes=1024)
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
    async with AsyncRedisStateStore(client, settings=_settings(), owns_client=True) as store:
        key = RunKey("acme", "r")
        await store.put_run(key, {"v": 1}, expected_version=0)
        proxy.drop_next_reply()
        record = await store.put_run(key, {"v": 2}, expected_version=1)
        assert proxy.dropped == 1
        assert (record.version, record.blob) == (2, {"v": 2})
        stored = await store.get_run(key)
        assert stored is not None and stored.version == 2


@pytest.mark.asyncio
async def test_lost_reply_to_a_patch_is_outcome_unknown_and_never_resent(
    proxy: ReplyDroppingProxy,
) -> None:
    client = AsyncClients.for_target(_through(proxy))
    async with AsyncRedisStateStore(client, settings=_settings(), owns_client=True) as store:
        key = RunKey("acme", "r")
        await store.put_run(key, {}, expected_version=0)
        proxy.drop_next_reply()
        with pytest.raises(StoreOutcomeUnknown):
            await store.patch_run(key, CounterDelta(iterations=1))
        stored = await store.get_run(key)
        assert stored is not None and (stored.iterations, stored.version) == (1, 2)


@pytest.mark.asyncio
async def test_lost_reply_to_an_enqueue_with_a_caller_id_is_read_back(
    proxy: ReplyDroppingProxy,
) -> None:
    client = AsyncClients.for_target(_through(proxy))
    async with AsyncRedisWorkQueue(client, settings=_settings(), owns_client=True) as queue:
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
    async with AsyncRedisWorkQueue(client, settings=_settings(), owns_client=True) as queue:
        await queue.enqueue("acme", {"warm": True})
        proxy.drop_next_reply()
        with pytest.raises(StoreOutcomeUnknown):
            await queue.enqueue("acme", {"job": 1})
        assert (await queue.stats()).ready == 2


@pytest.mark.asyncio
async def test_lost_reply_to_a_claim_is_outcome_unknown(proxy: ReplyDroppingProxy) -> None:
    client = AsyncClients.for_target(_through(proxy))
    async with AsyncRedisWorkQueue(client, settings=_settings(), owns_client=True) as queue:
        await queue.enqueue("acme", {})
        proxy.drop_next_reply()
        with pytest.raises(StoreOutcomeUnknown):
            await queue.claim("w1")
        assert (await queue.stats()).leased == 1


@pytest.mark.asyncio
async def test_a_server_that_stays_down_is_a_retryable_error_after_the_budget() -> None:
    settings = _settings(retry_attempts=3, retry_backoff_base=0.001, retry_backoff_cap=0.002)
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
        store = AsyncRedisStateStore(client, settings=_settings())
        with pytest.raises(PoolExhaustedError) as caught:
            await store.get_run(RunKey("acme", "r"))
        assert caught.value.retryable is True
    finally:
        await client.connection_pool.release(held)
        await client.aclose()
