"""A Redis that refuses the client's credentials is a ConfigurationError at once, naming why."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from runyard.errors import ConfigurationError
from runyard.redis import AsyncRedisStateStore, AsyncRedisWorkQueue, RedisStoreSettings

from tests.support.redis_servers import RedisProcess, require_redis_binaries, start_redis


@pytest.fixture
def locked_server() -> Iterator[RedisProcess]:
    require_redis_binaries()
    server = start_redis()
    # Set after start: the helper's readiness probe connects without a password.
    with redis.Redis(port=server.port) as admin:
        admin.config_set("requirepass", "s3cret")
    yield server
    server.stop()


@pytest.mark.asyncio
async def test_a_wrong_password_is_a_configuration_error_naming_the_refusal(
    locked_server: RedisProcess,
) -> None:
    url = f"redis://:n0t-the-pass@127.0.0.1:{locked_server.port}/0"
    settings = RedisStoreSettings(dsn=url, durable=False)  # type: ignore[arg-type,unused-ignore]
    with pytest.raises(ConfigurationError) as caught:
        await AsyncRedisStateStore.from_url(settings=settings)
    assert caught.value.retryable is False
    assert "password" in str(caught.value) and "n0t-the-pass" not in str(caught.value)


@pytest.mark.asyncio
async def test_a_missing_password_is_a_configuration_error(locked_server: RedisProcess) -> None:
    url = f"redis://127.0.0.1:{locked_server.port}/0"
    settings = RedisStoreSettings(dsn=url, durable=False)  # type: ignore[arg-type,unused-ignore]
    with pytest.raises(ConfigurationError, match=r"Authentication required|NOAUTH|password"):
        await AsyncRedisWorkQueue.from_url(settings=settings)


@pytest.mark.asyncio
async def test_the_right_password_is_accepted(locked_server: RedisProcess) -> None:
    url = f"redis://:s3cret@127.0.0.1:{locked_server.port}/0"
    settings = RedisStoreSettings(dsn=url, durable=False)  # type: ignore[arg-type,unused-ignore]
    async with await AsyncRedisWorkQueue.from_url(settings=settings) as queue:
        assert (await queue.stats()).ready == 0
