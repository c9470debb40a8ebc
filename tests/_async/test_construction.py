"""One construction shape for every backend: ``from_url(url, settings=...)`` and
``open(client_or_pool, settings=...)`` both give a working store."""

from __future__ import annotations

import pytest
from pydantic import SecretStr
from runyard import ConfigurationError, RunKey
from runyard.postgres import (
    AsyncPostgresStateStore,
    AsyncPostgresWorkQueue,
    PostgresStoreSettings,
    StateTables,
)
from runyard.redis import AsyncRedisStateStore, AsyncRedisWorkQueue, RedisStoreSettings

from tests._async.postgres_support import open_pool
from tests.support.postgres_plugin import PG_DSN
from tests.support.redis_plugin import AsyncClients, RedisTarget, fresh_namespace


@pytest.mark.asyncio
async def test_postgres_from_url_and_open_take_settings(pg_tables: StateTables) -> None:
    # The settings' DSN is unusable on purpose: from_url's url wins, open() uses the pool.
    settings = PostgresStoreSettings(
        dsn=SecretStr("postgresql://nowhere.invalid/none"),
        db_schema=pg_tables.schema,
        max_value_bytes=4096,
        retry_attempts=1,
    )
    queue = await AsyncPostgresWorkQueue.from_url(PG_DSN, settings=settings)
    try:
        assert (queue.tables, queue.max_value_bytes, queue.retry_attempts) == (
            pg_tables,
            4096,
            1,
        )
        await queue.enqueue("acme", {"n": 1}, item_id="i")
        stored = await queue.get_item("acme", "i")
        assert stored is not None and stored.payload == {"n": 1}
    finally:
        await queue.aclose()
    pool = await open_pool()
    try:
        store = await AsyncPostgresStateStore.open(pool, settings=settings)
        assert (store.tables, store.max_value_bytes) == (pg_tables, 4096)
        key = RunKey("acme", "r")
        await store.put_run(key, {"a": 1}, expected_version=0)
        got = await store.get_run(key)
        assert got is not None and got.blob == {"a": 1}
        # An explicit option still wins over the settings.
        other = await AsyncPostgresStateStore.open(pool, settings=settings, max_value_bytes=99)
        assert other.max_value_bytes == 99
        # The old shapes keep working.
        old = await AsyncPostgresStateStore.from_settings(
            settings.model_copy(update={"dsn": SecretStr(PG_DSN)})
        )
        assert await old.get_run(key) is not None
        await old.aclose()
    finally:
        await pool.close()


@pytest.mark.asyncio
async def test_redis_from_url_and_open_take_settings(dedicated_redis_target: RedisTarget) -> None:
    url = f"redis://127.0.0.1:{dedicated_redis_target.port}/0"
    settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
    queue = await AsyncRedisWorkQueue.from_url(url, settings=settings)
    try:
        await queue.enqueue("acme", {"n": 1}, item_id="i")
        stored = await queue.get_item("acme", "i")
        assert stored is not None and stored.payload == {"n": 1}
    finally:
        await queue.aclose()
    client = AsyncClients.for_target(dedicated_redis_target)
    store = await AsyncRedisStateStore.open(client, settings=settings)
    try:
        key = RunKey("acme", "r")
        await store.put_run(key, {"a": 1}, expected_version=0)
        got = await store.get_run(key)
        assert got is not None and got.blob == {"a": 1}
        assert store.settings.namespace == settings.namespace
    finally:
        await store.aclose()
        await client.aclose()


@pytest.mark.asyncio
@pytest.mark.parametrize("url", ["redis://:s3cret@127.0.0.1:abc/0", "http://127.0.0.1/0"])
async def test_a_malformed_redis_url_is_a_configuration_error_without_the_password(
    url: str,
) -> None:
    with pytest.raises(ConfigurationError, match="the Redis URL is malformed") as caught:
        await AsyncRedisStateStore.from_url(url, settings=RedisStoreSettings(durable=False))
    assert "s3cret" not in str(caught.value)


@pytest.mark.asyncio
async def test_redis_open_and_from_url_take_live_updates(local_redis_target: RedisTarget) -> None:
    # docs/events.md gives live_updates=True to a store; only the constructor (which skips
    # preflight) took it: open() and from_url() raised TypeError.
    url = f"redis://127.0.0.1:{local_redis_target.port}/0"
    settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
    built = await AsyncRedisStateStore.from_url(url, settings=settings, live_updates=True)
    try:
        assert built.live_updates is not None
    finally:
        await built.aclose()
    client = AsyncClients.for_target(local_redis_target)
    try:
        opened = await AsyncRedisStateStore.open(client, settings=settings, live_updates=True)
        assert opened.live_updates is not None
        await opened.aclose()
        plain = await AsyncRedisStateStore.open(client, settings=settings)
        assert plain.live_updates is None
        await plain.aclose()
    finally:
        await client.aclose()
