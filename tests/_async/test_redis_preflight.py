"""preflight() against servers started with unsafe settings: refused, naming the setting."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from runyard._redis_flavours import AsyncRedis, AsyncRetry, NoBackoff
from runyard.errors import ConfigurationError
from runyard.redis import AsyncRedisStateStore, AsyncRedisWorkQueue, RedisStoreSettings

from tests.support.redis_servers import RedisProcess, require_redis_binaries, start_redis


@pytest.fixture
def evicting_server() -> Iterator[RedisProcess]:
    require_redis_binaries()
    server = start_redis("--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")
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
