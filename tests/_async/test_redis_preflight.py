"""preflight() against servers started with unsafe settings: refused, naming the setting."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from runyard.errors import ConfigurationError
from runyard.redis import AsyncRedisStateStore, AsyncRedisWorkQueue, RedisStoreSettings
from runyard.redis.flavours import AsyncRedis, AsyncRetry, NoBackoff

from tests.support.redis_plugin import AsyncClients, RedisTarget, fresh_namespace
from tests.support.redis_servers import RedisProcess, require_redis_binaries, start_redis


@pytest.fixture
def evicting_server() -> Iterator[RedisProcess]:
    require_redis_binaries()
    server = start_redis("--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")
    yield server
    server.stop()


@pytest.fixture
def ttl_evicting_server() -> Iterator[RedisProcess]:
    require_redis_binaries()
    server = start_redis("--maxmemory", "64mb", "--maxmemory-policy", "volatile-ttl")
    yield server
    server.stop()


@pytest.fixture
def forgetful_server() -> Iterator[RedisProcess]:
    require_redis_binaries()
    server = start_redis()  # appendonly no, save ""
    yield server
    server.stop()


@pytest.fixture
def durable_server() -> Iterator[RedisProcess]:
    require_redis_binaries()
    server = start_redis("--appendonly", "yes")
    yield server
    server.stop()


@pytest.fixture
def managed_server() -> Iterator[RedisProcess]:
    require_redis_binaries()
    server = start_redis("--appendonly", "yes", "--rename-command", "CONFIG", "")
    yield server
    server.stop()


@pytest.mark.asyncio
async def test_an_evicting_server_is_refused_naming_the_policy(
    evicting_server: RedisProcess,
) -> None:
    client = AsyncRedis(port=evicting_server.port, retry=AsyncRetry(NoBackoff(), 0))
    try:
        with pytest.raises(ConfigurationError) as caught:
            await AsyncRedisStateStore.open(client, settings=RedisStoreSettings(durable=False))
        assert "maxmemory-policy" in str(caught.value) and "allkeys-lru" in str(caught.value)
        with pytest.raises(ConfigurationError):
            await AsyncRedisWorkQueue.open(client, settings=RedisStoreSettings(durable=False))
    finally:
        await client.aclose()


@pytest.mark.asyncio
async def test_a_server_that_persists_nothing_is_refused(forgetful_server: RedisProcess) -> None:
    client = AsyncRedis(port=forgetful_server.port, retry=AsyncRetry(NoBackoff(), 0))
    try:
        with pytest.raises(ConfigurationError) as caught:
            await AsyncRedisStateStore.open(client)
        assert "appendonly" in str(caught.value) and "save" in str(caught.value)
        with pytest.raises(ConfigurationError):
            await AsyncRedisWorkQueue.open(client)
    finally:
        await client.aclose()


@pytest.mark.asyncio
async def test_durable_false_accepts_a_server_that_persists_nothing(
    forgetful_server: RedisProcess,
) -> None:
    client = AsyncRedis(port=forgetful_server.port, retry=AsyncRetry(NoBackoff(), 0))
    try:
        settings = RedisStoreSettings(durable=False)
        store = await AsyncRedisStateStore.open(client, settings=settings)
        queue = await AsyncRedisWorkQueue.open(client, settings=settings)
        assert store.settings.durable is False and queue.settings.durable is False
    finally:
        await client.aclose()


@pytest.mark.asyncio
async def test_an_appendonly_server_is_accepted_and_left_unchanged(
    durable_server: RedisProcess,
) -> None:
    client = AsyncRedis(port=durable_server.port, retry=AsyncRetry(NoBackoff(), 0))
    try:
        before = await client.config_get("*")
        await AsyncRedisStateStore.open(client)
        assert await client.config_get("*") == before
    finally:
        await client.aclose()


@pytest.mark.asyncio
async def test_from_url_builds_its_own_client_and_runs_preflight(
    forgetful_server: RedisProcess,
) -> None:
    url = f"redis://127.0.0.1:{forgetful_server.port}/0"
    with pytest.raises(ConfigurationError):
        await AsyncRedisStateStore.from_url(url)
    settings = RedisStoreSettings(dsn=url, durable=False)  # type: ignore[arg-type,unused-ignore]
    async with await AsyncRedisWorkQueue.from_url(settings=settings) as queue:
        assert (await queue.stats()).ready == 0


@pytest.mark.asyncio
async def test_a_server_without_config_is_accepted_with_a_warning_naming_the_settings(
    managed_server: RedisProcess,
) -> None:
    client = AsyncRedis(port=managed_server.port, retry=AsyncRetry(NoBackoff(), 0))
    try:
        with pytest.warns(RuntimeWarning, match="maxmemory-policy") as warned:
            await AsyncRedisStateStore.open(client)
        assert "appendonly" in str(warned[0].message)
    finally:
        await client.aclose()


@pytest.mark.asyncio
async def test_a_volatile_ttl_server_is_refused_naming_the_policy(
    ttl_evicting_server: RedisProcess,
) -> None:
    client = AsyncRedis(port=ttl_evicting_server.port, retry=AsyncRetry(NoBackoff(), 0))
    try:
        settings = RedisStoreSettings(durable=False)
        with pytest.raises(ConfigurationError) as caught:
            await AsyncRedisStateStore.open(client, settings=settings)
        assert "maxmemory-policy" in str(caught.value) and "volatile-ttl" in str(caught.value)
        with pytest.raises(ConfigurationError):
            await AsyncRedisWorkQueue.open(client, settings=settings)
    finally:
        await client.aclose()


# -- the test cluster (its nodes persist nothing) --------------------------------------------
@pytest.mark.slow
@pytest.mark.asyncio
async def test_preflight_on_the_cluster_accepts_durable_false_and_refuses_durable(
    cluster_redis_target: RedisTarget,
) -> None:
    client = AsyncClients.for_target(cluster_redis_target)
    try:
        settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
        await AsyncRedisStateStore.open(client, settings=settings)
        await AsyncRedisWorkQueue.open(client, settings=settings)
        with pytest.raises(ConfigurationError) as caught:
            await AsyncRedisStateStore.open(client)
        assert "appendonly" in str(caught.value)
    finally:
        await client.aclose()


@pytest.mark.slow
@pytest.mark.asyncio
async def test_preflight_on_the_cluster_names_the_node_with_a_refused_setting(
    redis_cluster: list[RedisProcess], cluster_redis_target: RedisTarget
) -> None:
    odd = redis_cluster[1].port
    with redis.Redis(port=odd) as admin:
        before = admin.config_get("maxmemory-policy")["maxmemory-policy"]
        admin.config_set("maxmemory-policy", "volatile-ttl")
        try:
            client = AsyncClients.for_target(cluster_redis_target)
            try:
                settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
                with pytest.raises(ConfigurationError) as caught:
                    await AsyncRedisWorkQueue.open(client, settings=settings)
            finally:
                await client.aclose()
        finally:
            admin.config_set("maxmemory-policy", before)
    message = str(caught.value)
    assert "maxmemory-policy is 'volatile-ttl'" in message
    assert ":" + str(odd) + ":" in message
    others = [n.port for n in redis_cluster if n.port != odd]
    assert not any(":" + str(port) + ":" in message for port in others)
