"""The execution store on Redis: the kit on every lane, round trips, prefixes, hostile ids."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from redis.crc import key_slot
from runyard import ManualClock
from runyard._async.execution_protocol import AsyncExecutionStore
from runyard._async.testing import AsyncExecutionStoreConformance
from runyard.capabilities import StoreCapabilities, certify
from runyard.errors import ConfigurationError, StoreConflict, StoreOutcomeUnknown
from runyard.executions import Event, Execution, SpawnIntent, TimerOp, TraceStep
from runyard.executions.planning import plan_commit
from runyard.redis import AsyncRedisStore, RedisStoreSettings
from runyard.redis.common import ReplyLost
from runyard.redis.executions import EXECUTION_SCRIPTS, ExecutionKeys, save_args
from runyard.redis.flavours import ResponseError

from tests.support.proxy import ReplyDroppingProxy, running_proxy
from tests.support.redis_commands import counting_commands
from tests.support.redis_plugin import AsyncClients, RedisTarget, fresh_namespace
from tests.support.redis_round_trips import AsyncCountingConnection, RoundTrips

HOSTILE = ["a:b", "{a}", "}{", "*", "?[x]\\", "ünï:cødé ✓", "日本語{タグ}", "a b\n", "1:x"]
T0 = 1_700_000_000.0


def _settings(namespace: str | None = None) -> RedisStoreSettings:
    return RedisStoreSettings(namespace=namespace or fresh_namespace(), durable=False)


# -- the conformance kit on every lane --------------------------------------------------------
class _Lane(AsyncExecutionStoreConformance):
    """Gives each test a target and a fresh namespace; purges it afterwards."""

    target_fixture = ""
    shards = 16
    trace_max = 7

    @pytest.fixture(autouse=True)
    def _lane(self, request: pytest.FixtureRequest) -> Iterator[None]:
        self.target: RedisTarget = request.getfixturevalue(self.target_fixture)
        self.settings = _settings()
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


# -- round trips ------------------------------------------------------------------------------
@pytest_asyncio.fixture
async def counted_store(dedicated_redis_target: RedisTarget) -> AsyncIterator[AsyncRedisStore]:
    client = AsyncCountingConnection.client(dedicated_redis_target.port)
    store = AsyncRedisStore(client, clock=ManualClock(), settings=_settings(), owns_client=True)
    # Load both commit scripts (a first EVALSHA answers NOSCRIPT and is re-sent as EVAL).
    warm = Execution(id="warm", definition_id="d")
    await store.save(warm)
    await store.commit(warm, emits=[("t", Event(id="w", name="w"))])
    yield store
    await store.aclose()


def _full_commit(exe: Execution) -> dict[str, object]:
    return {
        "emits": [("t1", Event(id="out-1", name="a")), ("t2", Event(id="out-2", name="b"))],
        "processed_event_id": "in-1",
        "timers": [TimerOp.schedule("wait", T0), TimerOp.cancel("old")],
        "spawns": [SpawnIntent(child_id=f"{exe.id}-kid", root_path="sub")],
        "trace": TraceStep(event_id="in-1", event_name="go", data={"n": 1}),
    }


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
        await counted_store.commit(exe, **_full_commit(exe))  # type: ignore[arg-type]
    with counting_commands(dedicated_redis_target.port) as updated:
        seqs = await counted_store.commit(exe, **_full_commit(exe))  # type: ignore[arg-type]
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
    for kwargs in ({}, _full_commit(stale)):
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


# -- prefixes and hostile identifiers ---------------------------------------------------------
@pytest.mark.asyncio
async def test_stores_with_different_prefixes_share_a_server(
    local_redis_target: RedisTarget,
) -> None:
    one, two = _settings(), _settings()
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
            await first.commit(exe, **_full_commit(exe))  # type: ignore[arg-type]
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
        settings = _settings()
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


@pytest_asyncio.fixture
async def proxy(dedicated_redis_target: RedisTarget) -> AsyncIterator[ReplyDroppingProxy]:
    with running_proxy(dedicated_redis_target.port) as proxy:
        yield proxy


@pytest.mark.asyncio
async def test_a_lost_commit_reply_is_settled_by_reading_back(proxy: ReplyDroppingProxy) -> None:
    client = AsyncClients.for_target(RedisTarget("server", port=proxy.port))
    async with AsyncRedisStore(
        client, clock=ManualClock(), settings=_settings(), owns_client=True
    ) as store:
        exe = Execution(id="e1", definition_id="d")
        await store.commit(exe, emits=[("t", Event(id="warm", name="w"))])
        proxy.drop_next_reply()
        seqs = await store.commit(exe, emits=[("t", Event(id="ev", name="x"))])
        assert proxy.dropped == 1 and exe.version == 2
        assert [e.seq for e in await store.pending_outbox()][-1:] == seqs


@pytest.mark.asyncio
async def test_a_lost_trace_append_reply_is_outcome_unknown(proxy: ReplyDroppingProxy) -> None:
    client = AsyncClients.for_target(RedisTarget("server", port=proxy.port))
    async with AsyncRedisStore(client, settings=_settings(), owns_client=True) as store:
        await store.append_trace("e1", TraceStep(event_name="warm"))
        proxy.drop_next_reply()
        with pytest.raises(StoreOutcomeUnknown):
            await store.append_trace("e1", TraceStep(event_name="lost"))
        assert [e.index for e in await store.read_trace("e1")] == [1, 2]


# -- cross-shard order, commit identity, bounded listing -------------------------------------
def _in_another_shard(keys: ExecutionKeys, execution_id: str) -> str:
    shard = keys.shard_of(execution_id)
    return next(f"q{n}" for n in range(1_000) if keys.shard_of(f"q{n}") != shard)


@pytest.mark.asyncio
async def test_entries_come_back_oldest_first_across_shards(
    fake_redis_target: RedisTarget,
) -> None:
    clock = ManualClock()
    settings = _settings()
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
async def test_a_lost_reply_is_not_settled_by_another_workers_identical_commit(
    proxy: ReplyDroppingProxy,
) -> None:
    # Same clock, same context, same status: only the commit id tells the two commits apart.
    client = AsyncClients.for_target(RedisTarget("server", port=proxy.port))
    async with AsyncRedisStore(
        client, clock=ManualClock(), settings=_settings(), owns_client=True
    ) as store:
        await store.save(Execution(id="e1", definition_id="d"))
        mine, theirs = await store.load("e1"), await store.load("e1")
        assert mine is not None and theirs is not None
        [their_seq] = await store.commit(theirs, emits=[("t", Event(id="theirs", name="x"))])
        proxy.drop_next_reply()
        with pytest.raises(StoreConflict) as caught:
            await store.commit(mine, emits=[("t", Event(id="mine", name="x"))])
        assert proxy.dropped == 1 and mine.version == 1
        assert (caught.value.expected, caught.value.found) == (1, 2)
        assert [e.seq for e in await store.pending_outbox()] == [their_seq]


class _LateFirstSend:
    """Wraps a store's script runner: the armed send's reply is lost before it reaches the
    server; that send lands later, just before the next script (a send still running when the
    store read back), optionally after another worker's commit."""

    def __init__(self, runner: Any, before_landing: Any = None) -> None:
        self.runner = runner
        self.before_landing = before_landing
        self.armed = False
        self.held: tuple[Any, Any, Any] | None = None

    async def script(self, script: Any, keys: Any, args: Any, *, idempotent: bool) -> Any:
        if self.armed:
            self.armed = False
            self.held = (script, keys, args)
            raise ReplyLost("the connection dropped before the reply")
        if self.held is not None:
            held, self.held = self.held, None
            if self.before_landing is not None:
                await self.before_landing()
            with contextlib.suppress(ResponseError):
                await self.runner.script(*held, idempotent=False)
        return await self.runner.script(script, keys, args, idempotent=idempotent)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.runner, name)


@pytest.mark.asyncio
async def test_a_resend_beaten_by_its_own_late_first_send_is_a_success(
    fake_redis_target: RedisTarget,
) -> None:
    settings = _settings()
    async with AsyncRedisStore(
        AsyncClients.for_target(fake_redis_target),
        clock=ManualClock(),
        settings=settings,
        owns_client=True,
    ) as store:
        exe = Execution(id="e1", definition_id="d")
        await store.save(exe)
        late = _LateFirstSend(store._runner)
        store._runner = late  # type: ignore[assignment]
        late.armed = True
        seqs = await store.commit(exe, emits=[("t", Event(id="ev", name="x"))])
        assert late.held is None and exe.version == 2
        assert [(e.seq, e.event.id) for e in await store.pending_outbox()] == [(seqs[0], "ev")]
        loaded = await store.load("e1")
        assert loaded is not None and loaded.version == 2
    fake_redis_target.purge(settings.namespace)


@pytest.mark.asyncio
async def test_a_resend_beaten_by_another_worker_is_a_conflict(
    fake_redis_target: RedisTarget,
) -> None:
    settings = _settings()
    async with AsyncRedisStore(
        AsyncClients.for_target(fake_redis_target),
        clock=ManualClock(),
        settings=settings,
        owns_client=True,
    ) as store:
        exe = Execution(id="e1", definition_id="d")
        await store.save(exe)
        theirs = await store.load("e1")
        assert theirs is not None
        runner = store._runner

        async def another_worker_commits() -> None:
            await runner.script(
                EXECUTION_SCRIPTS["save"],
                store.keys.save_keys("e1"),
                save_args(plan_commit(theirs), T0, "their-commit"),
                idempotent=False,
            )

        late = _LateFirstSend(runner, before_landing=another_worker_commits)
        store._runner = late  # type: ignore[assignment]
        late.armed = True
        with pytest.raises(StoreConflict) as caught:
            await store.commit(exe, emits=[("t", Event(id="ev", name="x"))])
        assert (caught.value.expected, caught.value.found) == (1, 2) and exe.version == 1
        assert await store.pending_outbox() == []
    fake_redis_target.purge(settings.namespace)


@pytest.mark.asyncio
async def test_a_filtered_listing_reads_a_bounded_slice_per_call(
    dedicated_redis_target: RedisTarget,
) -> None:
    settings = _settings()
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
