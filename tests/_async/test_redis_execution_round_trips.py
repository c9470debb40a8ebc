"""The execution store on Redis, counted: one command per commit, one round trip per load,
and a bounded slice per filtered listing call."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from runyard import ManualClock
from runyard.errors import StoreConflict
from runyard.executions import Event, Execution
from runyard.redis import AsyncRedisStore

from tests._async.redis_support import fresh_settings, full_commit
from tests.support.redis_commands import counting_commands
from tests.support.redis_plugin import RedisTarget
from tests.support.redis_round_trips import AsyncCountingConnection, RoundTrips


# -- round trips ------------------------------------------------------------------------------
@pytest_asyncio.fixture
async def counted_store(dedicated_redis_target: RedisTarget) -> AsyncIterator[AsyncRedisStore]:
    client = AsyncCountingConnection.client(dedicated_redis_target.port)
    store = AsyncRedisStore(
        client, clock=ManualClock(), settings=fresh_settings(), owns_client=True
    )
    # Load both commit scripts (a first EVALSHA answers NOSCRIPT and is re-sent as EVAL).
    warm = Execution(id="warm", definition_id="d")
    await store.save(warm)
    await store.commit(warm, emits=[("t", Event(id="w", name="w"))])
    yield store
    await store.aclose()


@pytest.mark.asyncio
async def test_a_fast_path_commit_is_one_command(
    counted_store: AsyncRedisStore, dedicated_redis_target: RedisTarget
) -> None:
    exe = Execution(id="e1", definition_id="d")
    with counting_commands(dedicated_redis_target.port) as created:
        await counted_store.save(exe)
    with counting_commands(dedicated_redis_target.port) as committed:
        assert await counted_store.commit(exe, processed_event_id="in-1") == []
    for counted in (created, committed):
        assert counted.sent == ["evalsha"] and counted.stats["evalsha"] == 1
    assert await counted_store.is_processed("e1", "in-1") is True


@pytest.mark.asyncio
async def test_a_full_path_commit_is_one_command(
    counted_store: AsyncRedisStore, dedicated_redis_target: RedisTarget
) -> None:
    exe = Execution(id="e1", definition_id="d")
    with counting_commands(dedicated_redis_target.port) as created:
        await counted_store.commit(exe, **full_commit(exe))  # type: ignore[arg-type]
    with counting_commands(dedicated_redis_target.port) as updated:
        seqs = await counted_store.commit(exe, **full_commit(exe))  # type: ignore[arg-type]
    for counted in (created, updated):
        assert counted.sent == ["evalsha"] and counted.stats["evalsha"] == 1
    assert len(seqs) == 2 and exe.version == 2
    assert [e.event.id for e in await counted_store.pending_outbox()][-2:] == ["out-1", "out-2"]


@pytest.mark.asyncio
async def test_a_conflict_is_one_command_and_an_error_reply(
    counted_store: AsyncRedisStore, dedicated_redis_target: RedisTarget
) -> None:
    exe = Execution(id="e1", definition_id="d")
    await counted_store.save(exe)
    stale = Execution(id="e1", definition_id="d", version=0)
    for kwargs in ({}, full_commit(stale)):
        with (
            counting_commands(dedicated_redis_target.port) as counted,
            pytest.raises(StoreConflict) as caught,
        ):
            await counted_store.commit(stale, **kwargs)  # type: ignore[arg-type]
        assert counted.sent == ["evalsha"]
        assert (caught.value.expected, caught.value.found) == (0, 1)


@pytest.mark.asyncio
async def test_load_for_event_is_one_round_trip(
    counted_store: AsyncRedisStore, dedicated_redis_target: RedisTarget
) -> None:
    await counted_store.commit(Execution(id="e1", definition_id="d"), processed_event_id="in-1")
    with counting_commands(dedicated_redis_target.port) as counted:
        RoundTrips.reset()
        exe, processed = await counted_store.load_for_event("e1", "in-1")
        trips = RoundTrips.sent
    assert exe is not None and processed is True
    assert trips == 1
    assert counted.sent == ["hgetall", "sismember"]


@pytest.mark.asyncio
async def test_a_filtered_listing_reads_a_bounded_slice_per_call(
    dedicated_redis_target: RedisTarget,
) -> None:
    settings = fresh_settings()
    client = AsyncCountingConnection.client(dedicated_redis_target.port)
    async with AsyncRedisStore(
        client, clock=ManualClock(), settings=settings, owns_client=True
    ) as store:
        for n in range(3_000):
            await store.save(Execution(id=f"e{n}", definition_id="d"))
        RoundTrips.reset()
        page = await store.list_executions(status="matches-nothing", limit=1)
        trips = RoundTrips.sent
        assert page.items == [] and page.next_cursor is not None
        assert trips <= 8
        pages = 1
        while page.next_cursor is not None:
            page = await store.list_executions(
                status="matches-nothing", limit=1, cursor=page.next_cursor
            )
            assert page.items == []
            pages += 1
            assert pages <= 100
        assert (await store.list_executions(limit=1)).next_cursor is not None
    dedicated_redis_target.purge(settings.namespace)
