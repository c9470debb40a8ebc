"""The execution store on Redis when a reply is lost: settled by reading back, never by another
worker's identical commit, and a resend against its own late first send."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from runyard import ManualClock
from runyard.errors import StoreConflict, StoreOutcomeUnknown
from runyard.executions import Event, Execution, TraceStep
from runyard.executions.planning import plan_commit
from runyard.redis import AsyncRedisStore
from runyard.redis.common import ReplyLost
from runyard.redis.executions import EXECUTION_SCRIPTS, save_args
from runyard.redis.flavours import ResponseError

from tests._async.redis_support import execution_store_on, fresh_settings
from tests.support.proxy import ReplyDroppingProxy, running_proxy
from tests.support.redis_plugin import AsyncClients, RedisTarget

T0 = 1_700_000_000.0


@pytest_asyncio.fixture
async def proxy(dedicated_redis_target: RedisTarget) -> AsyncIterator[ReplyDroppingProxy]:
    with running_proxy(dedicated_redis_target.port) as proxy:
        yield proxy


@pytest.mark.asyncio
async def test_a_lost_commit_reply_is_settled_by_reading_back(proxy: ReplyDroppingProxy) -> None:
    client = AsyncClients.for_target(RedisTarget("server", port=proxy.port))
    async with AsyncRedisStore(
        client, clock=ManualClock(), settings=fresh_settings(), owns_client=True
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
    async with AsyncRedisStore(client, settings=fresh_settings(), owns_client=True) as store:
        await store.append_trace("e1", TraceStep(event_name="warm"))
        proxy.drop_next_reply()
        with pytest.raises(StoreOutcomeUnknown):
            await store.append_trace("e1", TraceStep(event_name="lost"))
        assert [e.index for e in await store.read_trace("e1")] == [1, 2]


@pytest.mark.asyncio
async def test_a_lost_reply_is_not_settled_by_another_workers_identical_commit(
    proxy: ReplyDroppingProxy,
) -> None:
    # Same clock, same context, same status: only the commit id tells the two commits apart.
    client = AsyncClients.for_target(RedisTarget("server", port=proxy.port))
    async with AsyncRedisStore(
        client, clock=ManualClock(), settings=fresh_settings(), owns_client=True
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
    async with execution_store_on(fake_redis_target) as store:
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
    fake_redis_target.purge(store.settings.namespace)


@pytest.mark.asyncio
async def test_a_resend_beaten_by_another_worker_is_a_conflict(
    fake_redis_target: RedisTarget,
) -> None:
    async with execution_store_on(fake_redis_target) as store:
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
    fake_redis_target.purge(store.settings.namespace)
