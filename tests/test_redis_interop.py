"""Twin interop on one Redis: what one twin writes, the other reads, patches and CAS-updates."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from runyard import CounterDelta, ManualClock, RunKey
from runyard.redis import (
    AsyncRedisStateStore,
    AsyncRedisWorkQueue,
    RedisStateStore,
    RedisStoreSettings,
    RedisWorkQueue,
)

from tests.support.redis_plugin import AsyncClients, Clients, RedisTarget, fresh_namespace


@pytest.fixture
def settings(local_redis_target: RedisTarget) -> Iterator[RedisStoreSettings]:
    settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
    yield settings
    local_redis_target.purge(settings.namespace)


@pytest.mark.asyncio
async def test_a_run_written_by_the_sync_twin_is_patched_and_updated_by_the_async_one(
    local_redis_target: RedisTarget, settings: RedisStoreSettings
) -> None:
    clock = ManualClock()
    key = RunKey("acme", "r1")
    with RedisStateStore(
        Clients.for_target(local_redis_target), clock=clock, settings=settings, owns_client=True
    ) as sync_store:
        sync_store.put_run(key, {"by": "sync"}, expected_version=0, session_id="s1")
        async with AsyncRedisStateStore(
            AsyncClients.for_target(local_redis_target),
            clock=clock,
            settings=settings,
            owns_client=True,
        ) as async_store:
            read = await async_store.get_run(key)
            assert read is not None and (read.blob, read.session_id) == ({"by": "sync"}, "s1")
            patched = await async_store.patch_run(key, CounterDelta(output_tokens=4))
            updated = await async_store.put_run(
                key, {"by": "async"}, expected_version=patched.version
            )
            assert (updated.version, updated.output_tokens) == (3, 4)
        back = sync_store.get_run(key)
        assert back is not None and (back.blob, back.version) == ({"by": "async"}, 3)
        assert [r.run_id for r in sync_store.list_runs("acme").items] == ["r1"]


@pytest.mark.asyncio
async def test_a_run_written_by_the_async_twin_is_patched_and_updated_by_the_sync_one(
    local_redis_target: RedisTarget, settings: RedisStoreSettings
) -> None:
    clock = ManualClock()
    key = RunKey("acme", "r2")
    async with AsyncRedisStateStore(
        AsyncClients.for_target(local_redis_target),
        clock=clock,
        settings=settings,
        owns_client=True,
    ) as async_store:
        await async_store.put_run(key, {"by": "async"}, expected_version=0)
        with RedisStateStore(
            Clients.for_target(local_redis_target), clock=clock, settings=settings, owns_client=True
        ) as sync_store:
            patched = sync_store.patch_run(key, CounterDelta(iterations=2))
            updated = sync_store.put_run(key, {"by": "sync"}, expected_version=patched.version)
            assert (updated.version, updated.iterations) == (3, 2)
        back = await async_store.get_run(key)
        assert back is not None and (back.blob, back.iterations) == ({"by": "sync"}, 2)


@pytest.mark.asyncio
async def test_an_item_enqueued_by_the_sync_queue_is_claimed_and_completed_by_the_async_one(
    local_redis_target: RedisTarget, settings: RedisStoreSettings
) -> None:
    clock = ManualClock()
    with RedisWorkQueue(
        Clients.for_target(local_redis_target), clock=clock, settings=settings, owns_client=True
    ) as sync_queue:
        item = sync_queue.enqueue("acme", {"job": 1}, dedupe_key="d1")
        async with AsyncRedisWorkQueue(
            AsyncClients.for_target(local_redis_target),
            clock=clock,
            settings=settings,
            owns_client=True,
        ) as async_queue:
            lease = await async_queue.claim("async-worker")
            assert lease is not None and lease.item_id == item.item_id
            await async_queue.complete(lease.tenant, lease.item_id, token=lease.token)
        assert sync_queue.get_item("acme", item.item_id) is None
        assert sync_queue.enqueue("acme", {"job": 2}, dedupe_key="d1").item_id != item.item_id
