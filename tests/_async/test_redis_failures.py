"""Redis backend failures: lost replies settled or reported, a server that stays down, an
exhausted pool, redis-py's own retries refused, and failovers waited out (counted, not timed)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from runyard import CounterDelta, RunKey
from runyard.errors import (
    ConfigurationError,
    PoolExhaustedError,
    QueueUnavailableError,
    StatePersistenceError,
    StoreOutcomeUnknown,
)
from runyard.redis import AsyncRedisStateStore, AsyncRedisWorkQueue, RedisStoreSettings
from runyard.redis.flavours import AsyncRedis, AsyncRedisCluster, AsyncRetry, NoBackoff

from tests._async.redis_support import fresh_settings
from tests.support.proxy import ReplyDroppingProxy, running_proxy
from tests.support.redis_plugin import AsyncClients, RedisTarget
from tests.support.servers import free_port


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
