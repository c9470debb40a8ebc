"""AsyncRedisUpdates: one pub/sub connection of its own for every follower, and its checks.

A follower whose connection is killed is a kit case (listener_killer in the conformance lanes).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import pytest
from runyard import ConfigurationError, RunKey
from runyard.events import RunEvent
from runyard.redis import AsyncRedisStateStore, AsyncRedisUpdates, RedisStoreSettings

from tests._async.follow_support import subscribed_followers
from tests.support.redis_plugin import AsyncClients, RedisTarget, fresh_namespace, pubsub_clients

POOL = 4


@pytest.fixture(params=["local_redis_target", "cluster_redis_target"], ids=["server", "cluster"])
def target(request: pytest.FixtureRequest) -> RedisTarget:
    return request.getfixturevalue(str(request.param))  # type: ignore[no-any-return]


@pytest.fixture
def settings(target: RedisTarget) -> Iterator[RedisStoreSettings]:
    settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
    yield settings
    target.purge(settings.namespace)


@pytest.mark.asyncio
async def test_followers_take_no_pool_connection_so_writes_still_succeed(
    target: RedisTarget, settings: RedisStoreSettings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="runyard.follow")
    name = f"ry-{uuid.uuid4().hex[:12]}"
    # A pool of POOL connections (per node on a cluster), 3 * POOL followers.
    client = AsyncClients.for_target(target, client_name=name, max_connections=POOL)
    keys = [RunKey("acme", f"run-{i}") for i in range(3 * POOL)]
    store = AsyncRedisStateStore(client, settings=settings, owns_client=True, live_updates=True)
    async with store:
        followers = await subscribed_followers(store, keys)
        # Every follower is subscribed, on one connection of the updates' own.
        assert isinstance(store.live_updates, AsyncRedisUpdates)
        assert store.live_updates.followed == len(keys)
        assert pubsub_clients(target, name) == 1
        for key in keys:
            await store.append_event(key, "step", {"i": 1})
            await store.finalize(key, status="completed", event_type="done", event_data={})
        followed: list[list[RunEvent]] = []
        for events in followers:
            followed.append([event async for event in events])
    assert all([(e.seq, e.terminal) for e in rest] == [(2, False), (3, True)] for rest in followed)
    assert not [r for r in caplog.records if "lost their listener" in r.getMessage()]


@pytest.mark.asyncio
async def test_closing_the_store_closes_the_updates_connection(
    target: RedisTarget, settings: RedisStoreSettings
) -> None:
    name = f"ry-{uuid.uuid4().hex[:12]}"
    client = AsyncClients.for_target(target, client_name=name)
    key = RunKey("acme", "closing")
    async with AsyncRedisStateStore(
        client, settings=settings, owns_client=True, live_updates=True
    ) as store:
        await store.put_run(key, {}, expected_version=0)
        assert store.live_updates is not None
        subscription = await store.live_updates.subscribe(key)
        await store.append_event(key, "step", {})
        assert await subscription.wait(60) is True
        assert pubsub_clients(target, name) == 1
        await subscription.aclose()
    assert pubsub_clients(target, name) == 0


@pytest.mark.asyncio
async def test_updates_of_another_namespace_are_refused_naming_both(
    local_redis_target: RedisTarget,
) -> None:
    client = AsyncClients.for_target(local_redis_target)
    other = AsyncClients.for_target(local_redis_target)
    try:
        updates = AsyncRedisUpdates(client, "elsewhere")
        settings = RedisStoreSettings(namespace="here", durable=False)
        with pytest.raises(ConfigurationError, match=r"'elsewhere'.*'here'"):
            AsyncRedisStateStore(client, settings=settings, live_updates=updates)
        # The same namespace and kind on another client: shared, as documented.
        shared = AsyncRedisUpdates(other, "here")
        store = AsyncRedisStateStore(client, settings=settings, live_updates=shared)
        assert store.live_updates is shared
    finally:
        await client.aclose()
        await other.aclose()


@pytest.mark.asyncio
async def test_updates_of_the_other_cluster_kind_are_refused_naming_both(
    local_redis_target: RedisTarget, cluster_redis_target: RedisTarget
) -> None:
    single = AsyncClients.for_target(local_redis_target)
    cluster = AsyncClients.for_target(cluster_redis_target)
    settings = RedisStoreSettings(namespace="here", durable=False)
    try:
        with pytest.raises(ConfigurationError, match=r"Redis Cluster.*single Redis server"):
            AsyncRedisStateStore(
                single, settings=settings, live_updates=AsyncRedisUpdates(cluster, "here")
            )
        with pytest.raises(ConfigurationError, match=r"single Redis server.*Redis Cluster"):
            AsyncRedisStateStore(
                cluster, settings=settings, live_updates=AsyncRedisUpdates(single, "here")
            )
    finally:
        await single.aclose()
        await cluster.aclose()
