"""AsyncExecutionStoreConformance: the cases every ExecutionStore must pass."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import pytest
import pytest_asyncio

from runyard._async.execution_protocol import AsyncExecutionStore
from runyard._async.testing.state import BAD_IDENTIFIERS
from runyard._flavours import async_gather, async_sleep
from runyard.capabilities import certify
from runyard.errors import StatePersistenceError, StoreConflict
from runyard.executions.models import (
    Event,
    Execution,
    SpawnIntent,
    TimerOp,
    TraceStep,
)
from runyard.keys import InvalidIdentifierError

__all__ = ["AsyncExecutionStoreConformance"]

# Timer times are passed explicitly (``due_timers(now)``), so the kit needs no clock hook.
T0 = 1_700_000_000.0
CONTENDERS = 16
MAX_PAGES = 1_000
MAX_ATTEMPTS = 1_000

# Filters the listing walk is certified with (pytest id -> list_executions keywords).
LISTING_FILTERS: dict[str, dict[str, Any]] = {
    "no-filter": {},
    "status": {"status": "done"},
    "definition": {"definition_id": "billing"},
    "roots-only": {"roots_only": True},
    "status-and-definition": {"status": "running", "definition_id": "billing"},
    "every-filter": {"status": "done", "definition_id": "onboarding", "roots_only": True},
}


def _exe(execution_id: str, **fields: Any) -> Execution:
    fields.setdefault("definition_id", "onboarding")
    return Execution(id=execution_id, **fields)


def _event(event_id: str, name: str = "tick", data: Any = None) -> Event:
    return Event(id=event_id, name=name, data=data)


class AsyncExecutionStoreConformance:
    """Subclass as ``TestMyStore`` and implement ``make_store``.

    ``make_store`` returns a fresh, empty store (its own namespace, e.g. a new key prefix or
    schema). Time never needs moving: ``due_timers`` takes ``now``. Every test validates the
    store's capabilities first and refuses a store that declares no deployment.
    """

    async def make_store(self) -> AsyncExecutionStore:
        """Return a fresh, empty store."""
        raise NotImplementedError("implement make_store() in your conformance subclass")

    @pytest_asyncio.fixture
    async def store(self) -> AsyncIterator[AsyncExecutionStore]:
        store = await self.make_store()
        certify(store)
        try:
            yield store
        finally:
            await store.aclose()

    async def _created(
        self, store: AsyncExecutionStore, execution_id: str, **fields: Any
    ) -> Execution:
        exe = _exe(execution_id, **fields)
        await store.save(exe)
        return exe

    async def _walk(self, store: AsyncExecutionStore, **filters: Any) -> list[str]:
        seen: list[str] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await store.list_executions(limit=4, cursor=cursor, **filters)
            seen.extend(s.id for s in page.items)
            cursor = page.next_cursor
            if cursor is None:
                return seen
        raise AssertionError(f"listing did not end within {MAX_PAGES} pages")

    # -- load and save -----------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_absent_execution_loads_as_none(self, store: AsyncExecutionStore) -> None:
        assert await store.load("nope") is None

    @pytest.mark.asyncio
    async def test_first_save_is_version_1(self, store: AsyncExecutionStore) -> None:
        exe = _exe("e1")
        await store.save(exe)
        assert exe.version == 1
        loaded = await store.load("e1")
        assert loaded is not None and loaded.version == 1

    @pytest.mark.asyncio
    async def test_round_trip_keeps_every_field(self, store: AsyncExecutionStore) -> None:
        context = {"items": ["a", "ünïcødé ✓"], "n": 3, "nested": {"ok": True, "none": None}}
        exe = Execution(
            id="child-1",
            definition_id="billing",
            status="waiting",
            context=context,
            parent_id="root-1",
            root_path="charge.retry",
        )
        await store.save(exe)
        loaded = await store.load("child-1")
        assert loaded is not None
        assert (loaded.id, loaded.definition_id, loaded.status) == ("child-1", "billing", "waiting")
        assert (loaded.context, loaded.parent_id, loaded.root_path) == (
            context,
            "root-1",
            "charge.retry",
        )
        assert loaded.created_at is not None and loaded.updated_at is not None
        assert loaded.created_at <= loaded.updated_at

    @pytest.mark.asyncio
    async def test_sequential_saves_bump_the_version_by_one(
        self, store: AsyncExecutionStore
    ) -> None:
        exe = _exe("e1")
        for expected in range(1, 6):
            exe.context["step"] = expected
            await store.save(exe)
            assert exe.version == expected
        loaded = await store.load("e1")
        assert loaded is not None and (loaded.version, loaded.context) == (5, {"step": 5})

    @pytest.mark.asyncio
    async def test_update_keeps_the_creation_time(self, store: AsyncExecutionStore) -> None:
        await self._created(store, "e1")
        first = await store.load("e1")
        assert first is not None
        first.status = "done"
        await store.save(first)
        second = await store.load("e1")
        assert second is not None and second.created_at == first.created_at
        assert second.updated_at is not None and first.created_at is not None
        assert second.updated_at >= first.created_at and second.status == "done"

    @pytest.mark.asyncio
    async def test_stale_save_conflicts_and_reports_the_found_version(
        self, store: AsyncExecutionStore
    ) -> None:
        await self._created(store, "e1")
        mine, theirs = await store.load("e1"), await store.load("e1")
        assert mine is not None and theirs is not None
        theirs.context["by"] = "them"
        await store.save(theirs)
        mine.context["by"] = "me"
        with pytest.raises(StoreConflict) as caught:
            await store.save(mine)
        assert (caught.value.execution_id, caught.value.expected, caught.value.found) == (
            "e1",
            1,
            2,
        )
        assert mine.version == 1
        stored = await store.load("e1")
        assert stored is not None and (stored.version, stored.context) == (2, {"by": "them"})

    @pytest.mark.asyncio
    async def test_create_over_an_existing_execution_conflicts(
        self, store: AsyncExecutionStore
    ) -> None:
        await self._created(store, "e1", context={"first": True})
        again = _exe("e1", context={"second": True})
        with pytest.raises(StoreConflict) as caught:
            await store.save(again)
        assert (caught.value.expected, caught.value.found) == (0, 1)
        assert again.version == 0

    @pytest.mark.asyncio
    async def test_update_of_a_missing_execution_conflicts_with_found_0(
        self, store: AsyncExecutionStore
    ) -> None:
        ghost = _exe("ghost", version=3)
        with pytest.raises(StoreConflict) as caught:
            await store.save(ghost)
        assert (caught.value.expected, caught.value.found) == (3, 0)
        assert ghost.version == 3 and await store.load("ghost") is None

    @pytest.mark.asyncio
    async def test_loaded_copies_never_alias_the_store(self, store: AsyncExecutionStore) -> None:
        exe = await self._created(store, "e1", context={"list": [1]})
        exe.context["list"].append("after save")
        loaded = await store.load("e1")
        assert loaded is not None
        loaded.context["list"].append("after load")
        again = await store.load("e1")
        assert again is not None and again.context == {"list": [1]}

    @pytest.mark.asyncio
    async def test_unstorable_context_is_refused_and_writes_nothing(
        self, store: AsyncExecutionStore
    ) -> None:
        for bad in (float("nan"), float("inf"), "nul\x00"):
            exe = _exe("e1", context={"x": bad})
            with pytest.raises(StatePersistenceError) as caught:
                await store.save(exe)
            assert caught.value.reason == "invalid" and exe.version == 0
        assert await store.load("e1") is None

    @pytest.mark.asyncio
    @pytest.mark.parametrize("bad", BAD_IDENTIFIERS, ids=["empty", "nul", "too-long", "surrogate"])
    async def test_refused_identifiers(self, store: AsyncExecutionStore, bad: str) -> None:
        with pytest.raises(InvalidIdentifierError):
            await store.load(bad)
        with pytest.raises(InvalidIdentifierError):
            await store.is_processed("e1", bad)
        with pytest.raises(InvalidIdentifierError):
            await store.load_for_event(bad, "ev")

    # -- commit --------------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_commit_writes_the_execution_and_returns_outbox_seqs_in_order(
        self, store: AsyncExecutionStore
    ) -> None:
        exe = _exe("e1", context={"n": 1})
        seqs = await store.commit(
            exe, emits=[("t1", _event("a", data={"k": 1})), ("t2", _event("b"))]
        )
        assert exe.version == 1 and len(seqs) == 2 and seqs[0] < seqs[1]
        pending = await store.pending_outbox()
        assert [(e.seq, e.target_id, e.event.id) for e in pending] == [
            (seqs[0], "t1", "a"),
            (seqs[1], "t2", "b"),
        ]
        assert pending[0].event == _event("a", data={"k": 1})
        loaded = await store.load("e1")
        assert loaded is not None and loaded.context == {"n": 1}

    @pytest.mark.asyncio
    async def test_commit_without_emits_returns_no_seqs(self, store: AsyncExecutionStore) -> None:
        assert await store.commit(_exe("e1")) == []
        assert await store.pending_outbox() == []

    @pytest.mark.asyncio
    async def test_conflicting_commit_writes_nothing(self, store: AsyncExecutionStore) -> None:
        await self._created(store, "e1")
        stale, fresh = await store.load("e1"), await store.load("e1")
        assert stale is not None and fresh is not None
        await store.save(fresh)
        stale.status = "lost"
        with pytest.raises(StoreConflict) as caught:
            await store.commit(
                stale,
                emits=[("t1", _event("out-1"))],
                processed_event_id="in-1",
                timers=[TimerOp.schedule("wait", T0 + 10)],
                spawns=[SpawnIntent(child_id="kid", root_path="sub")],
                trace=TraceStep(event_id="in-1", event_name="go"),
            )
        assert (caught.value.expected, caught.value.found) == (1, 2)
        assert stale.version == 1
        assert await store.pending_outbox() == []
        assert await store.is_processed("e1", "in-1") is False
        assert await store.due_timers(T0 + 1_000) == []
        assert await store.pending_spawns() == []
        assert await store.read_trace("e1") == []
        stored = await store.load("e1")
        assert stored is not None and (stored.version, stored.status) == (2, "running")

    @pytest.mark.asyncio
    async def test_conflicting_commit_cancels_no_timer(self, store: AsyncExecutionStore) -> None:
        exe = _exe("e1")
        await store.commit(exe, timers=[TimerOp.schedule("wait", T0 + 10)])
        stale = await store.load("e1")
        assert stale is not None
        await store.save(exe)
        with pytest.raises(StoreConflict):
            await store.commit(stale, timers=[TimerOp.cancel("wait")])
        due = await store.due_timers(T0 + 10)
        assert [(t.execution_id, t.path, t.fire_at) for t in due] == [("e1", "wait", T0 + 10)]

    @pytest.mark.asyncio
    async def test_refused_commit_payload_writes_nothing(self, store: AsyncExecutionStore) -> None:
        exe = await self._created(store, "e1")
        with pytest.raises(StatePersistenceError):
            await store.commit(
                exe,
                emits=[("t1", _event("ok")), ("t2", _event("bad", data=float("nan")))],
                processed_event_id="in-1",
                timers=[TimerOp.schedule("wait", T0)],
            )
        assert exe.version == 1
        assert await store.pending_outbox() == []
        assert await store.is_processed("e1", "in-1") is False
        assert await store.due_timers(T0) == []
        stored = await store.load("e1")
        assert stored is not None and stored.version == 1

    # -- outbox and spawns -------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_outbox_comes_back_oldest_first_and_is_gone_on_ack(
        self, store: AsyncExecutionStore
    ) -> None:
        exe = _exe("e1")
        emitted: list[int] = []
        for n in range(3):
            emitted += await store.commit(
                exe, emits=[("t", _event(f"ev-{n}-a")), ("t", _event(f"ev-{n}-b"))]
            )
        pending = await store.pending_outbox()
        assert [e.seq for e in pending] == emitted
        assert [e.event.id for e in pending] == [f"ev-{n}-{x}" for n in range(3) for x in "ab"]
        assert [e.event.id for e in await store.pending_outbox(2)] == ["ev-0-a", "ev-0-b"]
        assert await store.ack_outbox(emitted[0]) is True
        assert await store.ack_outbox(emitted[2]) is True
        remaining = await store.pending_outbox()
        assert [e.seq for e in remaining] == [emitted[1], *emitted[3:]]
        for seq in emitted:
            await store.ack_outbox(seq)
        assert await store.pending_outbox() == []

    @pytest.mark.asyncio
    async def test_second_ack_of_an_entry_returns_false(self, store: AsyncExecutionStore) -> None:
        [seq] = await store.commit(_exe("e1"), emits=[("t", _event("ev"))])
        assert await store.ack_outbox(seq) is True
        assert await store.ack_outbox(seq) is False
        assert await store.ack_spawn(seq) is False

    @pytest.mark.asyncio
    async def test_outbox_seqs_are_unique_and_ordered_per_execution(
        self, store: AsyncExecutionStore
    ) -> None:
        a, b = _exe("a"), _exe("b")
        seqs: list[int] = []
        for n in range(4):
            seqs += await store.commit(a, emits=[("t", _event(f"a-{n}"))])
            seqs += await store.commit(b, emits=[("t", _event(f"b-{n}"))])
        assert len(set(seqs)) == len(seqs)
        pending = await store.pending_outbox()
        assert sorted(e.seq for e in pending) == sorted(seqs)
        for source in "ab":
            mine = [e for e in pending if e.event.id.startswith(f"{source}-")]
            assert [e.event.id for e in mine] == [f"{source}-{n}" for n in range(4)]
            assert [e.seq for e in mine] == sorted(e.seq for e in mine)

    @pytest.mark.asyncio
    async def test_spawns_come_back_oldest_first_and_are_gone_on_ack(
        self, store: AsyncExecutionStore
    ) -> None:
        parent = _exe("parent")
        await store.commit(
            parent,
            spawns=[
                SpawnIntent(child_id="kid-1", root_path="fetch", context={"url": "a"}),
                SpawnIntent(child_id="kid-2"),
            ],
        )
        await store.commit(parent, spawns=[SpawnIntent(child_id="kid-3", root_path="x.y")])
        pending = await store.pending_spawns()
        assert [(s.parent_id, s.child_id, s.root_path) for s in pending] == [
            ("parent", "kid-1", "fetch"),
            ("parent", "kid-2", ""),
            ("parent", "kid-3", "x.y"),
        ]
        assert pending[0].context == {"url": "a"} and pending[1].context == {}
        assert [s.seq for s in pending] == sorted(s.seq for s in pending)
        assert [s.child_id for s in await store.pending_spawns(1)] == ["kid-1"]
        assert await store.ack_spawn(pending[0].seq) is True
        assert await store.ack_spawn(pending[0].seq) is False
        assert [s.child_id for s in await store.pending_spawns()] == ["kid-2", "kid-3"]

    # -- dedupe ------------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_commit_marks_the_event_processed_for_that_execution_only(
        self, store: AsyncExecutionStore
    ) -> None:
        await store.save(_exe("other"))
        assert await store.is_processed("e1", "in-1") is False
        await store.commit(_exe("e1"), processed_event_id="in-1")
        assert await store.is_processed("e1", "in-1") is True
        assert await store.is_processed("e1", "in-2") is False
        assert await store.is_processed("other", "in-1") is False

    @pytest.mark.asyncio
    async def test_redelivered_event_is_seen_as_processed_after_a_lost_race(
        self, store: AsyncExecutionStore
    ) -> None:
        await self._created(store, "e1")
        first, second = await store.load("e1"), await store.load("e1")
        assert first is not None and second is not None
        await store.commit(first, emits=[("t", _event("out"))], processed_event_id="in-1")
        with pytest.raises(StoreConflict):
            await store.commit(second, emits=[("t", _event("out"))], processed_event_id="in-1")
        reloaded, processed = await store.load_for_event("e1", "in-1")
        assert processed is True and reloaded is not None and reloaded.version == 2
        assert len(await store.pending_outbox()) == 1

    @pytest.mark.asyncio
    async def test_load_for_event_returns_the_execution_and_the_processed_flag(
        self, store: AsyncExecutionStore
    ) -> None:
        assert await store.load_for_event("e1", "in-1") == (None, False)
        await store.commit(_exe("e1", context={"k": "v"}), processed_event_id="in-1")
        exe, processed = await store.load_for_event("e1", "in-1")
        assert processed is True
        assert exe is not None and (exe.id, exe.version, exe.context) == ("e1", 1, {"k": "v"})
        exe, processed = await store.load_for_event("e1", "in-2")
        assert exe is not None and processed is False

    # -- timers ------------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_timers_are_due_by_time_earliest_first(self, store: AsyncExecutionStore) -> None:
        await store.commit(
            _exe("a"),
            timers=[TimerOp.schedule("late", T0 + 30), TimerOp.schedule("soon", T0 + 10)],
        )
        await store.commit(_exe("b"), timers=[TimerOp.schedule("mid", T0 + 20)])
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
        await store.commit(_exe("a"), timers=[TimerOp.schedule("t", T0)])
        assert len(await store.due_timers(T0)) == 1
        assert len(await store.due_timers(T0)) == 1
        assert await store.delete_timer("a", "t", T0) is True
        assert await store.due_timers(T0 + 1_000) == []

    @pytest.mark.asyncio
    async def test_rescheduling_a_timer_replaces_its_fire_time(
        self, store: AsyncExecutionStore
    ) -> None:
        exe = _exe("a")
        await store.commit(exe, timers=[TimerOp.schedule("t", T0 + 10)])
        await store.commit(exe, timers=[TimerOp.schedule("t", T0 + 50)])
        assert await store.due_timers(T0 + 10) == []
        due = await store.due_timers(T0 + 50)
        assert [(t.path, t.fire_at) for t in due] == [("t", T0 + 50)]

    @pytest.mark.asyncio
    async def test_cancel_removes_the_timer_at_its_path_only(
        self, store: AsyncExecutionStore
    ) -> None:
        exe = _exe("a")
        await store.commit(exe, timers=[TimerOp.schedule("t1", T0), TimerOp.schedule("t2", T0 + 1)])
        await store.commit(_exe("b"), timers=[TimerOp.schedule("t1", T0)])
        await store.commit(exe, timers=[TimerOp.cancel("t1"), TimerOp.cancel("never-set")])
        due = await store.due_timers(T0 + 10)
        assert [(t.execution_id, t.path) for t in due] == [("b", "t1"), ("a", "t2")]

    @pytest.mark.asyncio
    async def test_timer_ops_of_one_commit_apply_in_order(self, store: AsyncExecutionStore) -> None:
        await store.commit(
            _exe("a"),
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
        exe = _exe("a")
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
        await store.commit(_exe("a"), timers=[TimerOp.schedule("t", T0)])
        assert await store.delete_timer("a", path, T0) is False
        due = await store.due_timers(T0)
        assert [(t.execution_id, t.path) for t in due] == [("a", "t")]

    # -- trace -------------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_trace_ring_keeps_the_last_n_with_stable_indices(
        self, store: AsyncExecutionStore
    ) -> None:
        n = store.trace_max
        exe = _exe("e1")
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
        exe = _exe("e1")
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
        await store.commit(_exe("e1"), trace=TraceStep(event_name="a"))
        await store.commit(_exe("e2"), trace=TraceStep(event_name="b"))
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
                    emits=[("t", _event(f"out-{i}"))],
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
                        exe, emits=[("t", _event(f"out-{i}"))], processed_event_id=f"in-{i}"
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
