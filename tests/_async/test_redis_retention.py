"""Redis retention: prune's bounded SCAN step, session run sets left without a run, and
prune_processed through each shard's processed-ages index."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
import redis
from runyard import ManualClock, RunKey
from runyard.executions.models import Execution
from runyard.redis import AsyncRedisStateStore, AsyncRedisStore
from runyard.redis.keys import StateKeys
from runyard.redis.retention import PRUNE_SCAN_COUNT, PRUNE_SCAN_STEPS

from tests._async.redis_support import execution_store_on, state_store_on
from tests._async.retention_support import marks_inside_the_retention_are_kept
from tests.support.redis_commands import counting_commands
from tests.support.redis_plugin import RedisTarget


@pytest_asyncio.fixture
async def store(dedicated_redis_target: RedisTarget) -> AsyncIterator[AsyncRedisStateStore]:
    async with state_store_on(dedicated_redis_target) as store:
        yield store


@pytest_asyncio.fixture
async def executions(dedicated_redis_target: RedisTarget) -> AsyncIterator[AsyncRedisStore]:
    async with execution_store_on(dedicated_redis_target, ManualClock(1_000.0)) as store:
        yield store


@pytest.mark.asyncio
async def test_one_prune_call_takes_a_bounded_number_of_scan_steps(
    store: AsyncRedisStateStore, dedicated_redis_target: RedisTarget
) -> None:
    with redis.Redis(port=dedicated_redis_target.port) as raw:
        raw.mset({f"other:{n}": "x" for n in range(20_000)})
    lease = await store.acquire_lease(RunKey("acme", "r"), "w", ttl_seconds=10)
    await store.release_lease(lease)
    with counting_commands(dedicated_redis_target.port) as counted:
        total = await store.prune(limit=10)
    scans = [c for c in counted.sent_with_arguments if c.upper().startswith("SCAN ")]
    assert 1 <= len(scans) <= PRUNE_SCAN_STEPS
    assert all(c.endswith(f"COUNT {PRUNE_SCAN_COUNT}") for c in scans)
    # The whole key space is walked over successive calls, and the lease is found.
    for _ in range(20_000 // (PRUNE_SCAN_STEPS * PRUNE_SCAN_COUNT) + 5):
        total += await store.prune(limit=10)
    assert total == 1
    assert await store.get_lease(RunKey("acme", "r")) is None


@pytest.mark.asyncio
async def test_a_session_run_set_left_without_runs_is_pruned(
    store: AsyncRedisStateStore, dedicated_redis_target: RedisTarget
) -> None:
    await store.put_run(RunKey("acme", "gone"), {}, expected_version=0, session_id="s1")
    await store.put_run(RunKey("acme", "kept"), {}, expected_version=0, session_id="s2")
    await store.delete_run(RunKey("acme", "gone"))
    keys = StateKeys(store.settings.namespace, "acme")
    with redis.Redis(port=dedicated_redis_target.port) as raw:
        assert raw.exists(keys.session_runs("s1")) == 1
        assert await store.prune() == 1
        assert raw.exists(keys.session_runs("s1")) == 0
        assert raw.smembers(keys.session_runs("s2")) == {b"kept"}
    assert await store.prune() == 0


@pytest.mark.asyncio
async def test_a_pruned_lease_leaves_a_floor_above_its_epoch(
    store: AsyncRedisStateStore, dedicated_redis_target: RedisTarget
) -> None:
    first = await store.acquire_lease(RunKey("acme", "r"), "w", ttl_seconds=10)
    second = await store.acquire_lease(RunKey("acme", "r2"), "w", ttl_seconds=10)
    await store.release_lease(first)
    assert await store.prune() == 1
    keys = StateKeys(store.settings.namespace, "acme")
    with redis.Redis(port=dedicated_redis_target.port) as raw:
        assert raw.exists(keys.lease("r")) == 0
        assert raw.get(keys.lease_floor) == str(first.epoch).encode()
    again = await store.acquire_lease(RunKey("acme", "r"), "w", ttl_seconds=10)
    assert again.epoch == first.epoch + 1
    # A live lease of the tenant keeps its epoch; the floor only lifts new ones.
    renewed = await store.renew_lease(second, ttl_seconds=10)
    assert renewed.epoch == second.epoch


@pytest.mark.asyncio
async def test_prune_processed_keeps_marks_inside_the_retention(
    executions: AsyncRedisStore,
) -> None:
    assert isinstance(executions.clock, ManualClock)
    await marks_inside_the_retention_are_kept(executions, executions.clock)


@pytest.mark.asyncio
async def test_prune_processed_takes_the_oldest_across_shards(
    executions: AsyncRedisStore,
) -> None:
    clock = executions.clock
    assert isinstance(clock, ManualClock)
    ids = [f"x{n}" for n in range(6)]
    assert len({executions.keys.shard_of(i) for i in ids}) > 1
    for execution_id in reversed(ids):  # x5 oldest: an order by id would not find it first
        await executions.commit(
            Execution(id=execution_id, definition_id="d"), processed_event_id="in"
        )
        clock.advance(1)
    assert await executions.prune_processed(older_than=0, limit=4) == 4
    seen = [await executions.is_processed(i, "in") for i in ids]
    assert seen == [True, True, False, False, False, False]


@pytest.mark.asyncio
async def test_marks_from_before_the_index_are_not_pruned(
    executions: AsyncRedisStore, dedicated_redis_target: RedisTarget
) -> None:
    await executions.save(Execution(id="e1", definition_id="d"))
    with redis.Redis(port=dedicated_redis_target.port) as raw:
        raw.sadd(executions.keys.processed("e1"), "legacy")
    assert await executions.prune_processed(older_than=0) == 0
    assert await executions.is_processed("e1", "legacy") is True
