"""The execution store on Redis: the kit on every lane, the key space, prefixes, hostile ids,
cross-shard order. Round trips: test_redis_execution_round_trips.py; lost replies and
resends: test_redis_execution_replies.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from redis.crc import key_slot
from runyard import ManualClock
from runyard._async.execution_protocol import AsyncExecutionStore
from runyard._async.testing import AsyncExecutionStoreConformance
from runyard.capabilities import StoreCapabilities, certify
from runyard.errors import ConfigurationError
from runyard.executions import Event, Execution, SpawnIntent, TimerOp, TraceStep
from runyard.redis import AsyncRedisStore, RedisStoreSettings
from runyard.redis.executions import ExecutionKeys

from tests._async.redis_support import fresh_settings, full_commit
from tests.support.redis_plugin import AsyncClients, RedisTarget, fresh_namespace

HOSTILE = ["a:b", "{a}", "}{", "*", "?[x]\\", "ünï:cødé ✓", "日本語{タグ}", "a b\n", "1:x"]
T0 = 1_700_000_000.0


# -- the conformance kit on every lane --------------------------------------------------------
class _Lane(AsyncExecutionStoreConformance):
    """Gives each test a target and a fresh namespace; purges it afterwards."""

    target_fixture = ""
    shards = 16
    trace_max = 7

    @pytest.fixture(autouse=True)
    def _lane(self, request: pytest.FixtureRequest) -> Iterator[None]:
        self.target: RedisTarget = request.getfixturevalue(self.target_fixture)
        self.settings = fresh_settings()
        yield
        self.target.purge(self.settings.namespace)

    async def make_store(self) -> AsyncExecutionStore:
        return AsyncRedisStore(
            AsyncClients.for_target(self.target),
            clock=ManualClock(),
            settings=self.settings,
            shards=self.shards,
            trace_max=self.trace_max,
            owns_client=True,
        )


class TestFakeRedisExecutionStore(_Lane):
    target_fixture = "fake_redis_target"


class TestFakeRedisExecutionStoreOneShardDefaultRing(_Lane):
    target_fixture = "fake_redis_target"
    shards = 1
    trace_max = 200


class TestRedisServerExecutionStore(_Lane):
    target_fixture = "local_redis_target"
    shards = 3


@pytest.mark.slow
class TestRedisClusterExecutionStore(_Lane):
    target_fixture = "cluster_redis_target"


def test_the_store_satisfies_the_protocol_and_certifies(fake_redis_target: RedisTarget) -> None:
    store = AsyncRedisStore(AsyncClients.for_target(fake_redis_target))
    assert isinstance(store, AsyncExecutionStore)
    assert certify(store) == StoreCapabilities(retry_ids=True, deployment="multi_server")


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, 1025])
def test_shards_must_be_a_small_positive_int(fake_redis_target: RedisTarget, bad: object) -> None:
    with pytest.raises(ValueError):
        AsyncRedisStore(AsyncClients.for_target(fake_redis_target), shards=bad)  # type: ignore[arg-type]


# -- key space --------------------------------------------------------------------------------
@pytest.mark.parametrize("execution_id", ["e1", *HOSTILE])
def test_the_keys_of_one_commit_share_a_slot(execution_id: str) -> None:
    keys = ExecutionKeys("ns", 16).commit_keys(execution_id)
    assert len({key_slot(k.encode()) for k in keys}) == 1


def test_the_shards_of_a_namespace_spread_over_many_slots() -> None:
    keys = ExecutionKeys("ns", 16)
    assert len({key_slot(keys.outbox(shard).encode()) for shard in range(16)}) == 16


def test_execution_keys_are_length_prefixed() -> None:
    keys = ExecutionKeys("ns", 1)
    assert keys.execution("e1") == "ns:exec:{ns:0}:e:2:e1"
    assert (
        keys.processed("a:b") != keys.processed("a") and keys.timers(0) == "ns:exec:{ns:0}:timers"
    )


# -- prefixes and hostile identifiers ---------------------------------------------------------
@pytest.mark.asyncio
async def test_stores_with_different_prefixes_share_a_server(
    local_redis_target: RedisTarget,
) -> None:
    one, two = fresh_settings(), fresh_settings()
    try:
        async with (
            AsyncRedisStore(
                AsyncClients.for_target(local_redis_target), settings=one, owns_client=True
            ) as first,
            AsyncRedisStore(
                AsyncClients.for_target(local_redis_target), settings=two, owns_client=True
            ) as second,
        ):
            exe = Execution(id="same-id", definition_id="d")
            await first.commit(exe, **full_commit(exe))  # type: ignore[arg-type]
            assert await second.load("same-id") is None
            assert await second.load_for_event("same-id", "in-1") == (None, False)
            assert await second.pending_outbox() == [] and await second.pending_spawns() == []
            assert (
                await second.due_timers(T0 + 1) == [] and await second.read_trace("same-id") == []
            )
            assert (await second.list_executions()).items == []
            await second.save(Execution(id="same-id", definition_id="other"))
            loaded = await first.load("same-id")
            assert loaded is not None and (loaded.version, loaded.definition_id) == (1, "d")
            assert [s.id for s in (await first.list_executions()).items] == ["same-id"]
    finally:
        local_redis_target.purge(one.namespace)
        local_redis_target.purge(two.namespace)


class _HostileLane:
    target_fixture = ""

    @pytest_asyncio.fixture
    async def store(self, request: pytest.FixtureRequest) -> AsyncIterator[AsyncRedisStore]:
        target: RedisTarget = request.getfixturevalue(self.target_fixture)
        settings = fresh_settings()
        store = AsyncRedisStore(
            AsyncClients.for_target(target), settings=settings, shards=5, owns_client=True
        )
        yield store
        await store.aclose()
        target.purge(settings.namespace)

    @pytest.mark.asyncio
    async def test_hostile_ids_are_listed_once_and_stay_isolated(
        self, store: AsyncRedisStore
    ) -> None:
        for execution_id in HOSTILE:
            exe = Execution(id=execution_id, definition_id=execution_id, status=execution_id)
            await store.commit(
                exe,
                emits=[(execution_id, Event(id=execution_id, name="x"))],
                processed_event_id=execution_id,
                timers=[TimerOp.schedule(execution_id, T0)],
                trace=TraceStep(event_id=execution_id),
            )
        seen: list[str] = []
        cursor: str | None = None
        while True:
            page = await store.list_executions(limit=2, cursor=cursor)
            seen += [s.id for s in page.items]
            cursor = page.next_cursor
            if cursor is None:
                break
        assert sorted(seen) == sorted(HOSTILE)
        for execution_id in HOSTILE:
            page = await store.list_executions(status=execution_id, definition_id=execution_id)
            assert [s.id for s in page.items] == [execution_id]
            assert await store.is_processed(execution_id, execution_id) is True
            assert [t.event_id for t in await store.read_trace(execution_id)] == [execution_id]
        assert await store.load("a") is None and await store.is_processed("a", "a:b") is False
        due = await store.due_timers(T0)
        assert sorted((t.execution_id, t.path) for t in due) == sorted((i, i) for i in HOSTILE)
        assert [await store.delete_timer(i, i, T0) for i in HOSTILE] == [True] * len(HOSTILE)
        outbox = await store.pending_outbox()
        assert sorted((e.target_id, e.event.id) for e in outbox) == sorted((i, i) for i in HOSTILE)


class TestHostileIdsOnFakeRedis(_HostileLane):
    target_fixture = "fake_redis_target"


class TestHostileIdsOnRedis(_HostileLane):
    target_fixture = "local_redis_target"


@pytest.mark.slow
class TestHostileIdsOnCluster(_HostileLane):
    target_fixture = "cluster_redis_target"


# -- beyond the kit ---------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_due_timers_with_a_limit_break_ties_like_the_reference(
    fake_redis_target: RedisTarget,
) -> None:
    # "b" and "aa" tie on time; a shard orders members by their length-prefixed bytes
    # ("1:b" < "2:aa"), the reference by execution id ("aa" < "b").
    async with AsyncRedisStore(
        AsyncClients.for_target(fake_redis_target), shards=1, owns_client=True
    ) as store:
        await store.commit(Execution(id="b", definition_id="d"), timers=[TimerOp.schedule("t", T0)])
        await store.commit(
            Execution(id="aa", definition_id="d"), timers=[TimerOp.schedule("t", T0)]
        )
        assert [t.execution_id for t in await store.due_timers(T0, 1)] == ["aa"]
        assert [t.execution_id for t in await store.due_timers(T0)] == ["aa", "b"]


@pytest.mark.asyncio
async def test_from_url_builds_and_owns_its_client(local_redis_target: RedisTarget) -> None:
    settings = RedisStoreSettings(
        dsn=f"redis://{local_redis_target.host}:{local_redis_target.port}/0",
        namespace=fresh_namespace(),
        durable=False,
    )
    try:
        async with await AsyncRedisStore.from_url(settings=settings, trace_max=3) as store:
            exe = Execution(id="e1", definition_id="d")
            await store.save(exe)
            assert store.trace_max == 3 and exe.version == 1
            assert "namespace" in repr(store)
    finally:
        local_redis_target.purge(settings.namespace)


@pytest.mark.asyncio
async def test_a_namespace_refuses_a_second_shard_count(local_redis_target: RedisTarget) -> None:
    settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
    try:
        client = AsyncClients.for_target(local_redis_target)
        async with await AsyncRedisStore.open(client, settings=settings, shards=3) as first:
            await first.save(Execution(id="e1", definition_id="d"))
            with pytest.raises(ConfigurationError, match=r"in 3 shards; .* shards=4"):
                await AsyncRedisStore.open(client, settings=settings, shards=4)
            again = await AsyncRedisStore.open(client, settings=settings, shards=3)
            loaded = await again.load("e1")
            assert loaded is not None and loaded.version == 1
        await client.aclose()
    finally:
        local_redis_target.purge(settings.namespace)


# -- cross-shard order -----------------------------------------------------------------------------
def _in_another_shard(keys: ExecutionKeys, execution_id: str) -> str:
    shard = keys.shard_of(execution_id)
    return next(f"q{n}" for n in range(1_000) if keys.shard_of(f"q{n}") != shard)


@pytest.mark.asyncio
async def test_entries_come_back_oldest_first_across_shards(
    fake_redis_target: RedisTarget,
) -> None:
    clock = ManualClock()
    settings = fresh_settings()
    async with AsyncRedisStore(
        AsyncClients.for_target(fake_redis_target),
        clock=clock,
        settings=settings,
        shards=16,
        owns_client=True,
    ) as store:
        busy = Execution(id="busy", definition_id="d")
        for n in range(50):
            await store.commit(
                busy,
                emits=[("t", Event(id=f"early-{n}", name="x"))],
                spawns=[SpawnIntent(child_id=f"kid-{n}")],
            )
        clock.advance(1.0)
        late = Execution(id=_in_another_shard(store.keys, "busy"), definition_id="d")
        await store.commit(
            late,
            emits=[("t", Event(id="late", name="x"))],
            spawns=[SpawnIntent(child_id="late-kid")],
        )
        assert [e.event.id for e in await store.pending_outbox(3)] == [
            "early-0",
            "early-1",
            "early-2",
        ]
        outbox = await store.pending_outbox()
        assert [e.event.id for e in outbox] == [*(f"early-{n}" for n in range(50)), "late"]
        assert [s.child_id for s in await store.pending_spawns(3)] == ["kid-0", "kid-1", "kid-2"]
        spawns = await store.pending_spawns()
        assert [s.child_id for s in spawns] == [*(f"kid-{n}" for n in range(50)), "late-kid"]
        for entry in outbox:
            assert await store.ack_outbox(entry.seq) is True
        for spawn in spawns:
            assert await store.ack_spawn(spawn.seq) is True
    fake_redis_target.purge(settings.namespace)


@pytest.mark.asyncio
async def test_append_trace_takes_data_of_max_value_bytes(local_redis_target: RedisTarget) -> None:
    # Redis checked the size of its own wrapper (ids and keys included): data of exactly
    # max_value_bytes was too_large on append_trace only (commit's trace and every other
    # backend took it).
    settings = RedisStoreSettings(
        dsn=f"redis://{local_redis_target.host}:{local_redis_target.port}/0",
        namespace=fresh_namespace(),
        durable=False,
        max_value_bytes=1024,
    )
    data = "x" * (1024 - 2)  # 1,024 bytes once encoded, quotes included
    try:
        async with await AsyncRedisStore.from_url(settings=settings) as store:
            exe = Execution(id="e1", definition_id="d")
            await store.save(exe)
            step = TraceStep(event_id="ev", event_name="tick", data=data)
            assert (await store.append_trace("e1", step)).data == data
            await store.commit(exe, trace=step)
            assert [t.data for t in await store.read_trace("e1")] == [data, data]
    finally:
        local_redis_target.purge(settings.namespace)
