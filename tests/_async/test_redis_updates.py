"""A Redis follower whose subscriber connection is killed ends by polling and logs it."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import pytest
import redis
from runyard import RunKey
from runyard._flavours import async_gather
from runyard.events import RunEvent
from runyard.redis import AsyncRedisStateStore, RedisStoreSettings
from runyard.redis.flavours import AsyncRedis, AsyncRetry, NoBackoff

from tests._async.follow_support import LostListener, watching_for_lost_listener
from tests.support.redis_plugin import RedisTarget, fresh_namespace

KEY = RunKey("acme", "subscribed")


@pytest.fixture
def namespace(local_redis_target: RedisTarget) -> Iterator[str]:
    name = fresh_namespace()
    yield name
    local_redis_target.purge(name)


@pytest.fixture
def signal() -> Iterator[LostListener]:
    with watching_for_lost_listener() as handler:
        yield handler


def _kill_subscriber(target: RedisTarget, client_name: str) -> None:
    """Kill only this test's pub/sub connection, found by the client name it set."""
    with redis.Redis(host=target.host, port=target.port) as admin:
        killed = [
            admin.client_kill_filter(_id=client["id"])
            for client in admin.client_list(_type="pubsub")
            if client["name"] == client_name
        ]
    assert killed == [1]


@pytest.mark.asyncio
async def test_a_follower_whose_subscriber_is_killed_polls_to_the_end_and_logs_it(
    local_redis_target: RedisTarget,
    namespace: str,
    signal: LostListener,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="runyard.follow")
    client_name = f"ry-{uuid.uuid4().hex[:12]}"
    # redis-py's own reconnects are off (as the stores expect): the kill is seen as a loss.
    client = AsyncRedis(
        host=local_redis_target.host,
        port=local_redis_target.port,
        client_name=client_name,
        retry=AsyncRetry(NoBackoff(), 0),
    )
    settings = RedisStoreSettings(namespace=namespace, durable=False)
    store = AsyncRedisStateStore(client, settings=settings, owns_client=True, live_updates=True)
    async with store:
        await store.put_run(KEY, {}, expected_version=0)
        await store.append_event(KEY, "step", {"i": 0})
        followed: list[RunEvent] = []
        events = store.follow(KEY, poll_seconds=0.01).__aiter__()
        followed.append(await events.__anext__())  # subscribed, and read the first event
        _kill_subscriber(local_redis_target, client_name)

        async def follower() -> None:
            followed.extend([event async for event in events])

        async def writer() -> None:
            # Only once the follower has noticed the loss: it must then end by polling.
            assert await signal.flag.wait(30)
            await store.append_event(KEY, "step", {"i": 1})
            await store.finalize(KEY, status="completed", event_type="done", event_data={})

        await async_gather([follower, writer])
    assert [(e.seq, e.type, e.terminal) for e in followed] == [
        (1, "step", False),
        (2, "step", False),
        (3, "done", True),
    ]
    assert any("lost their listener" in r.getMessage() for r in caplog.records)
