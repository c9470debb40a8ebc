"""AsyncExecutionStoreConformance: the cases every ExecutionStore must pass.

The load/save, commit, outbox and dedupe cases are in ``execution_commits``; timers, trace,
listing and concurrency are here."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from runyard._async.execution_protocol import AsyncExecutionStore
from runyard._async.testing._execution_base import (
    CONTENDERS,
    LISTING_FILTERS,
    MAX_ATTEMPTS,
    MAX_PAGES,
    T0,
    make_event,
    make_execution,
)
from runyard._async.testing.execution_commits import AsyncExecutionCommitCases
from runyard._async.testing.inputs import AsyncExecutionInputCases
from runyard._async.testing.retention import AsyncExecutionRetentionCases
from runyard._flavours import async_gather, async_sleep
from runyard.errors import StoreConflict
from runyard.executions.models import (
    Execution,
    SpawnIntent,
    TimerOp,
    TraceStep,
)

__all__ = ["AsyncExecutionStoreConformance"]


class AsyncExecutionStoreConformance(
    AsyncExecutionCommitCases, AsyncExecutionRetentionCases, AsyncExecutionInputCases
):
    """Subclass as ``TestMyStore`` and implement ``make_store``.

    ``make_store`` returns a fresh, empty store (its own namespace, e.g. a new key prefix or
    schema). Time never needs moving: ``due_timers`` takes ``now``. Every test validates the
    store's capabilities first and refuses a store that declares no deployment.
    """

    # -- timers ------------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_timers_are_due_by_time_earliest_first(self, store: AsyncExecutionStore) -> None:
        await store.commit(
            make_execution("a"),
            timers=[TimerOp.schedule("late", T0 + 30), TimerOp.schedule("soon", T0 + 10)],
        )
        await store.commit(make_execution("b"), timers=[TimerOp.schedule("mid", T0 + 20)])
        assert await store.due_timers(T0 + 5) == []
        due = await store.due_timers(T0 + 20)
        assert [(t.execution_id, t.path, t.fire_at) for t in due] == [
            ("a", "soon", T0 + 10),
            ("b", "mid", T0 + 20),
        ]
        assert [t.path for t in await store.due_timers(T0 + 100, 1)] == ["soon"]
        assert [t.path for t in await store.due_timers(T0 + 100)] == ["soon", "mid", "late"]

    @pytest.mark.asyncio
    async def test_due_timers_stay_until_deleted(self, store: AsyncExecutionStore) -> None:
        await store.commit(make_execution("a"), timers=[TimerOp.schedule("t", T0)])
        assert len(await store.due_timers(T0)) == 1
        assert len(await store.due_timers(T0)) == 1
        assert await store.delete_timer("a", "t", T0) is True
        assert await store.due_timers(T0 + 1_000) == []

    @pytest.mark.asyncio
    async def test_rescheduling_a_timer_replaces_its_fire_time(
        self, store: AsyncExecutionStore
    ) -> None:
        exe = make_execution("a")
        await store.commit(exe, timers=[TimerOp.schedule("t", T0 + 10)])
        await store.commit(exe, timers=[TimerOp.schedule("t", T0 + 50)])
        assert await store.due_timers(T0 + 10) == []
        due = await store.due_timers(T0 + 50)
        assert [(t.path, t.fire_at) for t in due] == [("t", T0 + 50)]

    @pytest.mark.asyncio
    async def test_cancel_removes_the_timer_at_its_path_only(
        self, store: AsyncExecutionStore
    ) -> None:
        exe = make_execution("a")
        await store.commit(exe, timers=[TimerOp.schedule("t1", T0), TimerOp.schedule("t2", T0 + 1)])
        await store.commit(make_execution("b"), timers=[TimerOp.schedule("t1", T0)])
        await store.commit(exe, timers=[TimerOp.cancel("t1"), TimerOp.cancel("never-set")])
        due = await store.due_timers(T0 + 10)
        assert [(t.execution_id, t.path) for t in due] == [("b", "t1"), ("a", "t2")]

    @pytest.mark.asyncio
    async def test_timer_ops_of_one_commit_apply_in_order(self, store: AsyncExecutionStore) -> None:
        await store.commit(
            make_execution("a"),
            timers=[
                TimerOp.schedule("gone", T0),
                TimerOp.cancel("gone"),
                TimerOp.cancel("kept"),
                TimerOp.schedule("kept", T0 + 1),
            ],
        )
        assert [t.path for t in await store.due_timers(T0 + 10)] == ["kept"]

    @pytest.mark.asyncio
    async def test_guarded_delete_spares_a_concurrent_reschedule(
        self, store: AsyncExecutionStore
    ) -> None:
        exe = make_execution("a")
        await store.commit(exe, timers=[TimerOp.schedule("t", T0 + 10)])
        [swept] = await store.due_timers(T0 + 10)
        # Between the sweep's read and its delete, the execution re-schedules the timer.
        await store.commit(exe, timers=[TimerOp.schedule("t", T0 + 50)])
        assert await store.delete_timer(swept.execution_id, swept.path, swept.fire_at) is False
        due = await store.due_timers(T0 + 50)
        assert [(t.path, t.fire_at) for t in due] == [("t", T0 + 50)]
        assert await store.delete_timer("a", "t", T0 + 50) is True
        assert await store.delete_timer("a", "t", T0 + 50) is False
        assert await store.due_timers(T0 + 1_000) == []

    @pytest.mark.asyncio
    @pytest.mark.parametrize(
        "path",
        ["", "nul\x00", "x" * 1025, "\ud800", 7, None],
        ids=["empty", "nul", "too-long", "surrogate", "int", "none"],
    )
    async def test_deleting_a_timer_at_an_impossible_path_returns_false(
        self, store: AsyncExecutionStore, path: Any
    ) -> None:
        await store.commit(make_execution("a"), timers=[TimerOp.schedule("t", T0)])
        assert await store.delete_timer("a", path, T0) is False
        due = await store.due_timers(T0)
        assert [(t.execution_id, t.path) for t in due] == [("a", "t")]

    # -- trace -------------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_trace_ring_keeps_the_last_n_with_stable_indices(
        self, store: AsyncExecutionStore
    ) -> None:
        n = store.trace_max
        exe = make_execution("e1")
        total = n + 3
        for i in range(1, total + 1):
            step = TraceStep(event_id=f"ev-{i}", event_name="tick", data={"i": i})
            if i % 2:
                await store.commit(exe, trace=step)
            else:
                entry = await store.append_trace("e1", step)
                assert entry.index == i
        trace = await store.read_trace("e1")
        assert [e.index for e in trace] == list(range(total - n + 1, total + 1))
        assert [e.data for e in trace] == [{"i": i} for i in range(total - n + 1, total + 1)]
        assert all(e.event_id == f"ev-{e.index}" and e.event_name == "tick" for e in trace)

    @pytest.mark.asyncio
    async def test_commit_and_append_share_one_index_sequence(
        self, store: AsyncExecutionStore
    ) -> None:
        exe = make_execution("e1")
        await store.commit(exe, trace=TraceStep(event_name="start"))
        appended = await store.append_trace("e1", TraceStep(data={"note": "outside a commit"}))
        await store.commit(exe, trace=TraceStep(event_name="next"))
        trace = await store.read_trace("e1")
        assert [(e.index, e.event_name) for e in trace] == [(1, "start"), (2, None), (3, "next")]
        assert appended.index == 2 and trace[1].data == {"note": "outside a commit"}
        assert all(e.recorded_at > 0 for e in trace)

    @pytest.mark.asyncio
    async def test_traces_are_kept_per_execution(self, store: AsyncExecutionStore) -> None:
        assert await store.read_trace("e1") == []
        await store.commit(make_execution("e1"), trace=TraceStep(event_name="a"))
        await store.commit(make_execution("e2"), trace=TraceStep(event_name="b"))
        one, two = await store.read_trace("e1"), await store.read_trace("e2")
        assert [(e.index, e.event_name) for e in one] == [(1, "a")]
        assert [(e.index, e.event_name) for e in two] == [(1, "b")]

    # -- listing -----------------------------------------------------------------------------
    @pytest.mark.asyncio
    @pytest.mark.parametrize("filters", list(LISTING_FILTERS.values()), ids=list(LISTING_FILTERS))
    async def test_listing_returns_every_execution_once_across_pages(
        self, store: AsyncExecutionStore, filters: dict[str, Any]
    ) -> None:
        made: list[Execution] = []
        for i in range(23):
            made.append(
                await self._created(
                    store,
                    f"exe:{i:02d}*",  # separator and glob characters must not confuse a store
                    definition_id="billing" if i % 3 else "onboarding",
                    status="done" if i % 2 else "running",
                    parent_id=None if i % 4 else f"exe:{i + 1:02d}*",
                )
            )
        expected = sorted(
            e.id
            for e in made
            if filters.get("status", e.status) == e.status
            and filters.get("definition_id", e.definition_id) == e.definition_id
            and not (filters.get("roots_only") and e.parent_id is not None)
        )
        assert expected, "every filter must match something"
        seen = await self._walk(store, **filters)
        assert sorted(seen) == expected
        assert len(seen) == len(set(seen))

    @pytest.mark.asyncio
    async def test_updates_during_a_walk_never_skip_or_repeat(
        self, store: AsyncExecutionStore
    ) -> None:
        for i in range(17):
            await self._created(store, f"e{i:02d}")
        seen: list[str] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await store.list_executions(limit=3, cursor=cursor)
            seen.extend(s.id for s in page.items)
            for summary in page.items:  # context-only updates never move an execution
                exe = await store.load(summary.id)
                assert exe is not None
                exe.context["touched"] = True
                await store.save(exe)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert sorted(seen) == [f"e{i:02d}" for i in range(17)]
        assert len(seen) == len(set(seen))

    @pytest.mark.asyncio
    async def test_listing_summaries_match_the_stored_executions(
        self, store: AsyncExecutionStore
    ) -> None:
        await self._created(store, "kid", parent_id="root", root_path="a.b", status="waiting")
        page = await store.list_executions()
        assert page.next_cursor is None
        [summary] = page.items
        exe = await store.load("kid")
        assert exe is not None
        assert summary.model_dump() == exe.model_dump(exclude={"context"})

    @pytest.mark.asyncio
    async def test_listing_an_empty_store_ends(self, store: AsyncExecutionStore) -> None:
        assert await self._walk(store) == []
        assert await self._walk(store, status="done", roots_only=True) == []

    # -- concurrency -------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_concurrent_commits_of_one_version_have_exactly_one_winner(
        self, store: AsyncExecutionStore
    ) -> None:
        await self._created(store, "hot")

        # Every contender loads before any commits, so all hold version 1.
        loaded = [await store.load("hot") for _ in range(CONTENDERS)]
        assert all(e is not None and e.version == 1 for e in loaded)

        async def commit_loaded(i: int) -> int | None:
            exe = loaded[i]
            assert exe is not None
            exe.context["winner"] = i
            try:
                await store.commit(
                    exe,
                    emits=[("t", make_event(f"out-{i}"))],
                    processed_event_id=f"in-{i}",
                    timers=[TimerOp.schedule(f"wait-{i}", T0 + i)],
                    spawns=[SpawnIntent(child_id=f"kid-{i}")],
                    trace=TraceStep(event_id=f"in-{i}", event_name="go"),
                )
            except StoreConflict as conflict:
                assert (conflict.expected, conflict.found) == (1, 2)
                return None
            return i

        results = await async_gather([partial(commit_loaded, i) for i in range(CONTENDERS)])
        winners = [i for i in results if i is not None]
        assert len(winners) == 1
        stored = await store.load("hot")
        assert stored is not None and (stored.version, stored.context) == (
            2,
            {"winner": winners[0]},
        )
        winner = winners[0]
        assert [e.event.id for e in await store.pending_outbox()] == [f"out-{winner}"]
        marks = [await store.is_processed("hot", f"in-{i}") for i in range(CONTENDERS)]
        assert marks == [i == winner for i in range(CONTENDERS)]
        due = await store.due_timers(T0 + CONTENDERS)
        assert [(t.execution_id, t.path) for t in due] == [("hot", f"wait-{winner}")]
        spawned = await store.pending_spawns()
        assert [(s.parent_id, s.child_id) for s in spawned] == [("hot", f"kid-{winner}")]
        trace = await store.read_trace("hot")
        assert [(e.index, e.event_id) for e in trace] == [(1, f"in-{winner}")]

    @pytest.mark.asyncio
    async def test_concurrent_committers_each_win_exactly_one_version(
        self, store: AsyncExecutionStore
    ) -> None:
        await self._created(store, "hot", context={"order": []})

        async def handle(i: int) -> int:
            # A worker's loop: load with the dedupe check, commit, retry on conflict.
            for _ in range(MAX_ATTEMPTS):
                exe, processed = await store.load_for_event("hot", f"in-{i}")
                assert exe is not None and not processed
                exe.context["order"].append(i)
                await async_sleep(0)  # let the other contenders in between load and commit
                try:
                    await store.commit(
                        exe, emits=[("t", make_event(f"out-{i}"))], processed_event_id=f"in-{i}"
                    )
                except StoreConflict:
                    continue
                return exe.version
            raise AssertionError(f"contender {i} never won a version")

        versions = await async_gather([partial(handle, i) for i in range(CONTENDERS)])
        assert sorted(versions) == list(range(2, CONTENDERS + 2))
        stored = await store.load("hot")
        assert stored is not None and stored.version == CONTENDERS + 1
        assert sorted(stored.context["order"]) == list(range(CONTENDERS))
        by_version = dict(zip(versions, range(CONTENDERS), strict=True))
        assert stored.context["order"] == [by_version[v] for v in range(2, CONTENDERS + 2)]
        outbox = await store.pending_outbox(CONTENDERS * 2)
        assert sorted(e.event.id for e in outbox) == sorted(f"out-{i}" for i in range(CONTENDERS))
        for i in range(CONTENDERS):
            assert await store.is_processed("hot", f"in-{i}") is True
