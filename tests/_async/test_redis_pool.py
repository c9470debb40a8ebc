"""The Redis pool built from settings waits a bounded, configurable time for a connection."""

from __future__ import annotations

from functools import partial

import pytest
from runyard._flavours import async_gather
from runyard.errors import PoolExhaustedError
from runyard.redis import AsyncRedisWorkQueue, RedisStoreSettings
from runyard.redis.flavours import AsyncBlockingConnectionPool, AsyncRedis

from tests.support.redis_plugin import RedisTarget, fresh_namespace


def _settings(target: RedisTarget, **overrides: object) -> RedisStoreSettings:
    values: dict[str, object] = {
        "dsn": f"redis://127.0.0.1:{target.port}/0",
        "namespace": fresh_namespace(),
        "durable": False,
    }
    values.update(overrides)
    return RedisStoreSettings(**values)  # type: ignore[arg-type]


def test_the_pool_timeout_is_a_setting_with_a_default() -> None:
    assert RedisStoreSettings().pool_timeout_seconds == 5.0
    assert RedisStoreSettings(pool_timeout_seconds=0.5).pool_timeout_seconds == 0.5


@pytest.mark.asyncio
async def test_concurrent_enqueues_wait_for_a_connection_instead_of_failing(
    dedicated_redis_target: RedisTarget,
) -> None:
    settings = _settings(dedicated_redis_target, max_connections=10)
    queue = await AsyncRedisWorkQueue.from_url(settings=settings)
    try:
        client = queue._client
        assert isinstance(client, AsyncRedis)
        assert isinstance(client.connection_pool, AsyncBlockingConnectionPool)
        items = await async_gather(
            [partial(queue.enqueue, "acme", {"n": n}, item_id=f"i{n}") for n in range(100)]
        )
        assert sorted(item.item_id for item in items) == sorted(f"i{n}" for n in range(100))
        stats = await queue.stats()
        assert stats.ready == 100
    finally:
        await queue.aclose()


@pytest.mark.asyncio
async def test_a_pool_held_busy_past_the_timeout_raises_pool_exhausted(
    dedicated_redis_target: RedisTarget,
) -> None:
    settings = _settings(dedicated_redis_target, max_connections=1, pool_timeout_seconds=0.05)
    queue = await AsyncRedisWorkQueue.from_url(settings=settings)
    client = queue._client
    assert isinstance(client, AsyncRedis)
    held = await client.connection_pool.get_connection()  # type: ignore[no-untyped-call,unused-ignore]
    try:
        with pytest.raises(PoolExhaustedError) as caught:
            await queue.enqueue("acme", {}, item_id="late")
        assert caught.value.retryable is True
        assert "pool_timeout_seconds" in str(caught.value)
    finally:
        await client.connection_pool.release(held)
    # The connection is free again: the same queue works.
    assert (await queue.enqueue("acme", {}, item_id="late")).item_id == "late"
    await queue.aclose()
