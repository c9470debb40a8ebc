"""With no clock injected, the Redis queue, state store and execution store take their times and
outbox sequences from the server's clock (TIME in the scripts), so a client whose clock runs fast
can neither move a lease nor push the outbox sequence forward; an injected clock still decides."""

from __future__ import annotations

import pytest
from runyard import ManualClock, QueuePolicy
from runyard.executions import Event, Execution, TraceStep
from runyard.models import CounterDelta, RunKey
from runyard.redis import (
    AsyncRedisStateStore,
    AsyncRedisStore,
    AsyncRedisWorkQueue,
    RedisStoreSettings,
)
from runyard.redis.clocks import server_seconds

from tests.support.redis_plugin import AsyncClients, RedisTarget, fresh_namespace


@pytest.mark.asyncio
async def test_times_and_outbox_seqs_follow_the_server_clock(
    dedicated_redis_target: RedisTarget,
) -> None:
    client = AsyncClients.for_target(dedicated_redis_target)
    settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
    async with AsyncRedisStore(client, settings=settings, shards=4, owns_client=True) as store:
        exe = Execution(id="e1", definition_id="d")
        before = server_seconds(await client.time())
        await store.commit(exe, emits=[("t", Event(id="x", name="go"))])
        entry = await store.append_trace("e1", TraceStep(event_id="x", event_name="go"))
        after = server_seconds(await client.time())
        loaded = await store.load("e1")
        assert loaded is not None and loaded.updated_at is not None
        assert before <= loaded.updated_at <= after
        assert before <= entry.recorded_at <= after
        (outbox,) = await store.pending_outbox()
        assert int(before * 1000) <= outbox.seq // 4 <= int(after * 1000)


@pytest.mark.asyncio
async def test_an_injected_clock_still_decides_when_given(
    dedicated_redis_target: RedisTarget,
) -> None:
    client = AsyncClients.for_target(dedicated_redis_target)
    settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
    clock = ManualClock(4_000_000_000.0)  # far past the server's clock
    async with AsyncRedisStore(
        client, clock=clock, settings=settings, shards=4, owns_client=True
    ) as store:
        exe = Execution(id="e1", definition_id="d")
        await store.commit(exe, emits=[("t", Event(id="x", name="go"))])
        loaded = await store.load("e1")
        assert loaded is not None and loaded.updated_at == 4_000_000_000.0
        (outbox,) = await store.pending_outbox()
        assert outbox.seq // 4 == 4_000_000_000_000


@pytest.mark.asyncio
@pytest.mark.parametrize("target_name", ["fake_redis_target", "dedicated_redis_target"])
async def test_a_queue_without_a_clock_leases_by_the_server_clock(
    target_name: str, request: pytest.FixtureRequest
) -> None:
    target: RedisTarget = request.getfixturevalue(target_name)
    client = AsyncClients.for_target(target)
    settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
    policy = QueuePolicy(lease_seconds=30)
    async with AsyncRedisWorkQueue(
        client, policy=policy, settings=settings, owns_client=True
    ) as queue:
        before = server_seconds(await client.time())
        await queue.enqueue("acme", 1, item_id="a")
        lease = await queue.claim("w")
        after = server_seconds(await client.time())
        assert lease is not None and before <= lease.claimed_at <= after
        assert lease.expires_at == lease.claimed_at + 30
        assert await queue.reap() == []
        await queue.complete(lease)


@pytest.mark.asyncio
@pytest.mark.parametrize("target_name", ["fake_redis_target", "dedicated_redis_target"])
async def test_a_state_store_without_a_clock_follows_the_server_clock(
    target_name: str, request: pytest.FixtureRequest
) -> None:
    target: RedisTarget = request.getfixturevalue(target_name)
    client = AsyncClients.for_target(target)
    settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
    key = RunKey(tenant="acme", run_id="r1")
    async with AsyncRedisStateStore(client, settings=settings, owns_client=True) as store:
        assert store.clock is None
        before = server_seconds(await client.time())
        run = await store.put_run(key, {"n": 1}, expected_version=0)
        lease = await store.acquire_lease(key, "w", ttl_seconds=30)
        event = await store.append_event(key, "step", {"n": 1}, fence=lease.epoch)
        patched = await store.patch_run(key, CounterDelta(iterations=1), fence=lease.epoch)
        renewed = await store.renew_lease(lease, ttl_seconds=60)
        session = await store.put_session("acme", "s1", {}, expected_version=0)
        after = server_seconds(await client.time())
        assert before <= run.created_at == run.updated_at <= after
        assert before <= patched.updated_at <= after
        assert before + 30 <= lease.expires_at <= after + 30
        assert before + 60 <= renewed.expires_at <= after + 60
        assert before <= event.at <= after
        assert before <= session.created_at == session.updated_at <= after
        (stored,) = await store.read_events(key)
        assert stored.at == event.at
        assert await store.get_lease(key) == renewed
        ended = await store.finalize(
            key, status="completed", event_type="done", event_data={}, fence=lease.epoch
        )
        last = server_seconds(await client.time())
        assert after <= ended.updated_at <= last
        (_, terminal) = await store.read_events(key)
        assert terminal.at == ended.updated_at


@pytest.mark.asyncio
async def test_an_injected_clock_decides_the_state_stores_times(
    fake_redis_target: RedisTarget,
) -> None:
    client = AsyncClients.for_target(fake_redis_target)
    settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
    clock = ManualClock(4_000_000_000.0)  # far past the server's clock
    key = RunKey(tenant="acme", run_id="r1")
    async with AsyncRedisStateStore(
        client, clock=clock, settings=settings, owns_client=True
    ) as store:
        run = await store.put_run(key, {"n": 1}, expected_version=0)
        lease = await store.acquire_lease(key, "w", ttl_seconds=30)
        event = await store.append_event(key, "step", {"n": 1}, fence=lease.epoch)
        session = await store.put_session("acme", "s1", {}, expected_version=0)
        assert run.updated_at == run.created_at == 4_000_000_000.0
        assert lease.expires_at == 4_000_000_030.0
        assert event.at == 4_000_000_000.0
        assert session.updated_at == 4_000_000_000.0
        assert await store.get_lease(key) == lease
        clock.advance(31)
        assert await store.get_lease(key) is None
