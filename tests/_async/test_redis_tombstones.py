"""Runs and sessions on Redis: a create whose reply was lost, and a delete before the read-back.

Deleting a run or session keeps its last write id for runyard.writes.TOMBSTONE_SECONDS (its
tombstone): a lost create that landed and was deleted since is not sent again (that would undo
the delete): StoreOutcomeUnknown. One that never landed is sent again whatever another writer
created and deleted meanwhile (the tombstone holds that writer's id).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from runyard import RunKey
from runyard.errors import StoreOutcomeUnknown
from runyard.redis import AsyncRedisStateStore, RedisStateStore, RedisStoreSettings
from runyard.writes import TOMBSTONE_SECONDS

from tests.support.other_writer import on_redis
from tests.support.proxy import ReplyDroppingProxy, running_proxy
from tests.support.redis_plugin import AsyncClients, RedisTarget, fresh_namespace

KEY = RunKey("acme", "r")


@pytest_asyncio.fixture
async def proxy(dedicated_redis_target: RedisTarget) -> AsyncIterator[ReplyDroppingProxy]:
    with running_proxy(dedicated_redis_target.port) as proxy:
        yield proxy


@pytest_asyncio.fixture
async def store(
    proxy: ReplyDroppingProxy, dedicated_redis_target: RedisTarget
) -> AsyncIterator[AsyncRedisStateStore]:
    """A store through the proxy (the other writer goes to the server: ``other``)."""
    settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
    through = AsyncClients.for_target(RedisTarget("server", port=proxy.port))
    async with AsyncRedisStateStore(through, settings=settings, owns_client=True) as store:
        await store.get_run(KEY)  # connected: the next request is the test's
        yield store


@pytest.mark.asyncio
async def test_a_lost_create_deleted_before_the_read_back_stays_deleted(
    store: AsyncRedisStateStore, proxy: ReplyDroppingProxy, dedicated_redis_target: RedisTarget
) -> None:
    delete = on_redis(dedicated_redis_target, store.settings, lambda other: other.delete_run(KEY))
    proxy.drop_next_reply(then=delete)
    with pytest.raises(StoreOutcomeUnknown, match="landed and the run was deleted afterwards"):
        await store.put_run(KEY, {"v": 1}, expected_version=0)
    assert proxy.dropped == 1
    assert await store.get_run(KEY) is None


@pytest.mark.asyncio
async def test_a_lost_create_deleted_and_created_again_is_outcome_unknown(
    store: AsyncRedisStateStore, proxy: ReplyDroppingProxy, dedicated_redis_target: RedisTarget
) -> None:
    def delete_and_create(other: RedisStateStore) -> None:
        other.delete_run(KEY)
        other.put_run(KEY, {"v": "other"}, expected_version=0)

    proxy.drop_next_reply(then=on_redis(dedicated_redis_target, store.settings, delete_and_create))
    # Version 1 is another writer's, yet this write took version 1 first: not a conflict.
    with pytest.raises(StoreOutcomeUnknown, match="landed and the run was deleted afterwards"):
        await store.put_run(KEY, {"v": 1}, expected_version=0)
    stored = await store.get_run(KEY)
    assert stored is not None and (stored.version, stored.blob) == (1, {"v": "other"})


@pytest.mark.asyncio
async def test_a_lost_create_that_never_landed_is_sent_again_over_another_writers_delete(
    store: AsyncRedisStateStore, proxy: ReplyDroppingProxy, dedicated_redis_target: RedisTarget
) -> None:
    def create_and_delete(other: RedisStateStore) -> None:
        other.put_run(KEY, {"v": "other"}, expected_version=0)
        other.delete_run(KEY)

    proxy.drop_next_request(
        then=on_redis(dedicated_redis_target, store.settings, create_and_delete)
    )
    record = await store.put_run(KEY, {"v": 1}, expected_version=0)
    assert proxy.lost_requests == 1
    assert (record.version, record.blob) == (1, {"v": 1})
    stored = await store.get_run(KEY)
    assert stored is not None and stored.blob == {"v": 1}


@pytest.mark.asyncio
async def test_a_lost_create_reply_returns_the_run(
    store: AsyncRedisStateStore, proxy: ReplyDroppingProxy
) -> None:
    proxy.drop_next_reply()
    record = await store.put_run(KEY, {"v": 1}, expected_version=0)
    assert proxy.dropped == 1
    assert (record.version, record.blob) == (1, {"v": 1})


@pytest.mark.asyncio
async def test_a_lost_session_create_deleted_before_the_read_back_stays_deleted(
    store: AsyncRedisStateStore, proxy: ReplyDroppingProxy, dedicated_redis_target: RedisTarget
) -> None:
    delete = on_redis(
        dedicated_redis_target, store.settings, lambda other: other.delete_session("acme", "s")
    )
    proxy.drop_next_reply(then=delete)
    with pytest.raises(StoreOutcomeUnknown, match="landed and the session was deleted"):
        await store.put_session("acme", "s", {"v": 1}, expected_version=0)
    assert await store.get_session("acme", "s") is None


@pytest.mark.asyncio
async def test_a_lost_session_create_that_never_landed_is_sent_again(
    store: AsyncRedisStateStore, proxy: ReplyDroppingProxy, dedicated_redis_target: RedisTarget
) -> None:
    def create_and_delete(other: RedisStateStore) -> None:
        other.put_session("acme", "s", {"v": "other"}, expected_version=0)
        other.delete_session("acme", "s")

    proxy.drop_next_request(
        then=on_redis(dedicated_redis_target, store.settings, create_and_delete)
    )
    record = await store.put_session("acme", "s", {"v": 1}, expected_version=0)
    assert (record.version, record.blob) == (1, {"v": 1})


@pytest.mark.asyncio
async def test_a_lost_session_create_reply_returns_the_session(
    store: AsyncRedisStateStore, proxy: ReplyDroppingProxy
) -> None:
    proxy.drop_next_reply()
    record = await store.put_session("acme", "s", {"v": 1}, expected_version=0)
    assert proxy.dropped == 1
    assert (record.version, record.blob) == (1, {"v": 1})


@pytest.mark.asyncio
async def test_a_cascade_delete_leaves_a_tombstone_of_each_run_for_the_retention(
    store: AsyncRedisStateStore, proxy: ReplyDroppingProxy, dedicated_redis_target: RedisTarget
) -> None:
    await store.put_session("acme", "s", {}, expected_version=0)
    await store.put_run(KEY, {}, expected_version=0, session_id="s")
    await store.delete_session("acme", "s", cascade=True)
    k = store._keys("acme")
    for name in (k.run_tombstone(KEY.run_id), k.session_tombstone("s")):
        ttl = await store._client.ttl(name)
        assert TOMBSTONE_SECONDS - 5 <= ttl <= TOMBSTONE_SECONDS
