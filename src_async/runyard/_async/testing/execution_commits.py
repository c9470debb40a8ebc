"""The execution kit's cases for load/save, commit, the outbox, spawns and dedupe."""

from __future__ import annotations

import pytest

from runyard._async.execution_protocol import AsyncExecutionStore
from runyard._async.testing._execution_base import (
    T0,
    AsyncExecutionKitBase,
    make_event,
    make_execution,
)
from runyard._async.testing.state import BAD_IDENTIFIERS
from runyard.errors import StatePersistenceError, StoreConflict
from runyard.executions.models import (
    Execution,
    SpawnIntent,
    TimerOp,
    TraceStep,
)
from runyard.keys import InvalidIdentifierError

__all__ = ["AsyncExecutionCommitCases"]


class AsyncExecutionCommitCases(AsyncExecutionKitBase):
    """Cases: load and save, commit, outbox and spawns, dedupe marks."""

    # -- load and save -----------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_absent_execution_loads_as_none(self, store: AsyncExecutionStore) -> None:
        assert await store.load("nope") is None

    @pytest.mark.asyncio
    async def test_first_save_is_version_1(self, store: AsyncExecutionStore) -> None:
        exe = make_execution("e1")
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
        exe = make_execution("e1")
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
    async def test_a_commit_changing_only_the_definition_moves_it_between_listings(
        self, store: AsyncExecutionStore
    ) -> None:
        exe = await self._created(store, "e1", definition_id="billing", status="running")
        await self._created(store, "e2", definition_id="billing", status="running")
        exe.definition_id = "onboarding"
        await store.commit(exe)  # the status is unchanged
        loaded = await store.load("e1")
        assert loaded is not None
        assert (loaded.definition_id, loaded.status, loaded.version) == ("onboarding", "running", 2)
        assert await self._walk(store, definition_id="onboarding") == ["e1"]
        assert await self._walk(store, definition_id="billing") == ["e2"]
        assert sorted(await self._walk(store, status="running")) == ["e1", "e2"]

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
        again = make_execution("e1", context={"second": True})
        with pytest.raises(StoreConflict) as caught:
            await store.save(again)
        assert (caught.value.expected, caught.value.found) == (0, 1)
        assert again.version == 0

    @pytest.mark.asyncio
    async def test_update_of_a_missing_execution_conflicts_with_found_0(
        self, store: AsyncExecutionStore
    ) -> None:
        ghost = make_execution("ghost", version=3)
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
            exe = make_execution("e1", context={"x": bad})
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
        exe = make_execution("e1", context={"n": 1})
        seqs = await store.commit(
            exe, emits=[("t1", make_event("a", data={"k": 1})), ("t2", make_event("b"))]
        )
        assert exe.version == 1 and len(seqs) == 2 and seqs[0] < seqs[1]
        pending = await store.pending_outbox()
        assert [(e.seq, e.target_id, e.event.id) for e in pending] == [
            (seqs[0], "t1", "a"),
            (seqs[1], "t2", "b"),
        ]
        assert pending[0].event == make_event("a", data={"k": 1})
        loaded = await store.load("e1")
        assert loaded is not None and loaded.context == {"n": 1}

    @pytest.mark.asyncio
    async def test_commit_without_emits_returns_no_seqs(self, store: AsyncExecutionStore) -> None:
        assert await store.commit(make_execution("e1")) == []
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
                emits=[("t1", make_event("out-1"))],
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
        exe = make_execution("e1")
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
                emits=[("t1", make_event("ok")), ("t2", make_event("bad", data=float("nan")))],
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
        exe = make_execution("e1")
        emitted: list[int] = []
        for n in range(3):
            emitted += await store.commit(
                exe, emits=[("t", make_event(f"ev-{n}-a")), ("t", make_event(f"ev-{n}-b"))]
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
        [seq] = await store.commit(make_execution("e1"), emits=[("t", make_event("ev"))])
        assert await store.ack_outbox(seq) is True
        assert await store.ack_outbox(seq) is False
        assert await store.ack_spawn(seq) is False

    @pytest.mark.asyncio
    async def test_outbox_seqs_are_unique_and_ordered_per_execution(
        self, store: AsyncExecutionStore
    ) -> None:
        a, b = make_execution("a"), make_execution("b")
        seqs: list[int] = []
        for n in range(4):
            seqs += await store.commit(a, emits=[("t", make_event(f"a-{n}"))])
            seqs += await store.commit(b, emits=[("t", make_event(f"b-{n}"))])
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
        parent = make_execution("parent")
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
        await store.save(make_execution("other"))
        assert await store.is_processed("e1", "in-1") is False
        await store.commit(make_execution("e1"), processed_event_id="in-1")
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
        await store.commit(first, emits=[("t", make_event("out"))], processed_event_id="in-1")
        with pytest.raises(StoreConflict):
            await store.commit(second, emits=[("t", make_event("out"))], processed_event_id="in-1")
        reloaded, processed = await store.load_for_event("e1", "in-1")
        assert processed is True and reloaded is not None and reloaded.version == 2
        assert len(await store.pending_outbox()) == 1

    @pytest.mark.asyncio
    async def test_load_for_event_returns_the_execution_and_the_processed_flag(
        self, store: AsyncExecutionStore
    ) -> None:
        assert await store.load_for_event("e1", "in-1") == (None, False)
        await store.commit(make_execution("e1", context={"k": "v"}), processed_event_id="in-1")
        exe, processed = await store.load_for_event("e1", "in-1")
        assert processed is True
        assert exe is not None and (exe.id, exe.version, exe.context) == ("e1", 1, {"k": "v"})
        exe, processed = await store.load_for_event("e1", "in-2")
        assert exe is not None and processed is False
