"""Execution store twin interop on one Redis: what one twin commits, the other reads and
commits on top of (outbox, marks, timers, spawns and trace included)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from runyard import ManualClock, StoreConflict
from runyard.executions import Event, Execution, SpawnIntent, TimerOp, TraceStep
from runyard.redis import AsyncRedisStore, RedisStore, RedisStoreSettings

from tests.support.redis_plugin import AsyncClients, Clients, RedisTarget, fresh_namespace

T0 = 1_700_000_000.0


@pytest.fixture
def settings(local_redis_target: RedisTarget) -> Iterator[RedisStoreSettings]:
    settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
    yield settings
    local_redis_target.purge(settings.namespace)


@pytest.mark.asyncio
async def test_what_the_sync_twin_commits_the_async_twin_reads_and_commits_on(
    local_redis_target: RedisTarget, settings: RedisStoreSettings
) -> None:
    clock = ManualClock()
    with RedisStore(
        Clients.for_target(local_redis_target), clock=clock, settings=settings, owns_client=True
    ) as sync_store:
        exe = Execution(id="order-1", definition_id="checkout", context={"by": "sync"})
        [first] = sync_store.commit(
            exe,
            emits=[("billing", Event(id="charge", name="charge"))],
            processed_event_id="in-1",
            timers=[TimerOp.schedule("timeout", T0)],
            spawns=[SpawnIntent(child_id="kid", root_path="sub")],
            trace=TraceStep(event_id="in-1", event_name="submit"),
        )
        async with AsyncRedisStore(
            AsyncClients.for_target(local_redis_target),
            clock=clock,
            settings=settings,
            owns_client=True,
        ) as async_store:
            loaded, processed = await async_store.load_for_event("order-1", "in-1")
            assert processed is True and loaded is not None
            assert (loaded.version, loaded.context) == (1, {"by": "sync"})
            assert [e.seq for e in await async_store.pending_outbox()] == [first]
            assert [s.child_id for s in await async_store.pending_spawns()] == ["kid"]
            assert [t.path for t in await async_store.due_timers(T0)] == ["timeout"]
            loaded.context["by"] = "async"
            [second] = await async_store.commit(
                loaded,
                emits=[("billing", Event(id="refund", name="refund"))],
                timers=[TimerOp.cancel("timeout")],
                trace=TraceStep(event_name="cancel"),
            )
            assert second > first and await async_store.ack_outbox(first) is True
        with pytest.raises(StoreConflict):
            sync_store.save(exe)  # still at version 1
        back = sync_store.load("order-1")
        assert back is not None and (back.version, back.context) == (2, {"by": "async"})
        assert [e.event.id for e in sync_store.pending_outbox()] == ["refund"]
        assert sync_store.due_timers(T0 + 10) == []
        assert [(t.index, t.event_name) for t in sync_store.read_trace("order-1")] == [
            (1, "submit"),
            (2, "cancel"),
        ]


@pytest.mark.asyncio
async def test_what_the_async_twin_commits_the_sync_twin_reads_and_commits_on(
    local_redis_target: RedisTarget, settings: RedisStoreSettings
) -> None:
    clock = ManualClock()
    async with AsyncRedisStore(
        AsyncClients.for_target(local_redis_target),
        clock=clock,
        settings=settings,
        owns_client=True,
    ) as async_store:
        exe = Execution(id="order-2", definition_id="checkout", status="waiting")
        await async_store.commit(exe, processed_event_id="in-1", trace=TraceStep(event_name="a"))
        with RedisStore(
            Clients.for_target(local_redis_target), clock=clock, settings=settings, owns_client=True
        ) as sync_store:
            loaded, processed = sync_store.load_for_event("order-2", "in-1")
            assert processed is True and loaded is not None and loaded.status == "waiting"
            loaded.status = "done"
            sync_store.commit(loaded, processed_event_id="in-2")
            entry = sync_store.append_trace("order-2", TraceStep(event_name="b"))
            assert entry.index == 2
            assert [s.id for s in sync_store.list_executions(status="done").items] == ["order-2"]
        back = await async_store.load("order-2")
        assert back is not None and (back.version, back.status) == (2, "done")
        assert await async_store.is_processed("order-2", "in-2") is True
        assert [t.event_name for t in await async_store.read_trace("order-2")] == ["a", "b"]
