"""Twin interop of the event log on one Redis: one twin writes, the other follows."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from runyard import ManualClock, RunKey
from runyard.events import RunEvent
from runyard.redis import AsyncRedisStateStore, RedisStateStore, RedisStoreSettings

from tests.support.redis_plugin import AsyncClients, Clients, RedisTarget, fresh_namespace

KEY = RunKey("acme", "interop")


@pytest.fixture
def settings(local_redis_target: RedisTarget) -> Iterator[RedisStoreSettings]:
    settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
    yield settings
    local_redis_target.purge(settings.namespace)


def _write(store: RedisStateStore) -> None:
    for i in range(20):
        store.append_event(KEY, "step", {"i": i})
    store.finalize(KEY, status="completed", event_type="done", event_data={"n": 20})


@pytest.mark.asyncio
@pytest.mark.parametrize("live", [False, True])
async def test_an_async_follower_sees_everything_a_sync_writer_appends(
    local_redis_target: RedisTarget, settings: RedisStoreSettings, live: bool
) -> None:
    clock = ManualClock()
    with RedisStateStore(
        Clients.for_target(local_redis_target),
        clock=clock,
        settings=settings,
        owns_client=True,
        live_updates=live,
    ) as writer:
        writer.put_run(KEY, {}, expected_version=0)
        async with AsyncRedisStateStore(
            AsyncClients.for_target(local_redis_target),
            clock=clock,
            settings=settings,
            owns_client=True,
            live_updates=live,
        ) as reader:

            async def follow() -> list[RunEvent]:
                return [e async for e in reader.follow(KEY, poll_seconds=0.01)]

            followed, _ = await asyncio.gather(follow(), asyncio.to_thread(_write, writer))
            assert [e.seq for e in followed] == list(range(1, 22))
            assert followed == writer.read_events(KEY)
            assert followed[-1].terminal and followed[-1].data == {"n": 20}


@pytest.mark.asyncio
@pytest.mark.parametrize("live", [False, True])
async def test_a_sync_follower_sees_everything_an_async_writer_appends(
    local_redis_target: RedisTarget, settings: RedisStoreSettings, live: bool
) -> None:
    clock = ManualClock()
    with RedisStateStore(
        Clients.for_target(local_redis_target),
        clock=clock,
        settings=settings,
        owns_client=True,
        live_updates=live,
    ) as reader:
        async with AsyncRedisStateStore(
            AsyncClients.for_target(local_redis_target),
            clock=clock,
            settings=settings,
            owns_client=True,
            live_updates=live,
        ) as writer:
            await writer.put_run(KEY, {}, expected_version=0)

            async def write() -> None:
                for i in range(20):
                    await writer.append_event(KEY, "step", {"i": i})
                await writer.finalize(KEY, status="error", event_type="failed", event_data={})

            def follow() -> list[RunEvent]:
                return list(reader.follow(KEY, poll_seconds=0.01))

            followed, _ = await asyncio.gather(asyncio.to_thread(follow), write())
            assert [e.seq for e in followed] == list(range(1, 22))
            assert followed == await writer.read_events(KEY)
            assert followed[-1].terminal and followed[-1].type == "failed"
