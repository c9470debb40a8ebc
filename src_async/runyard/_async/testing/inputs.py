"""The kit's input cases: values a read-only review found each backend answering differently
(docs/protocols.md, "Limits and validation"); every store now takes or refuses them alike.

AsyncStateInputCases is mixed into AsyncStateStoreConformance (its ``store`` fixture, events
included); AsyncExecutionInputCases into AsyncExecutionStoreConformance.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from runyard._async.execution_protocol import AsyncExecutionStore
from runyard._async.protocols import AsyncStateStore
from runyard._async.testing._execution_base import (
    AsyncExecutionKitBase,
    make_event,
    make_execution,
)
from runyard._async.testing.event_lifecycle import _log
from runyard._json import MAX_JSON_DEPTH
from runyard.errors import InvalidArgumentError, StatePersistenceError
from runyard.events import EventConflictError
from runyard.executions.models import Event, SpawnIntent, TimerOp, TraceStep
from runyard.keys import InvalidIdentifierError
from runyard.models import RunKey

__all__ = ["AsyncExecutionInputCases", "AsyncStateInputCases"]

PAST_A_BIGINT = ["s9223372036854775808", "s" + "9" * 5000]
NOT_A_FLAG: list[Any] = ["no", None, 1, 0]


def nested(depth: int) -> list[Any]:
    """A list nested ``depth`` levels deep (``[]`` is one)."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


class AsyncStateInputCases:
    """Null and deeply nested blobs, flags, cursors, seqs and run leases, on every store."""

    @pytest.mark.asyncio
    async def test_inputs_a_null_blob_is_stored_and_read(self, store: AsyncStateStore) -> None:
        # Redis wrote the run, then raised KeyError: a retry met a conflict with itself.
        key = RunKey("acme", "r")
        assert (await store.put_run(key, None, expected_version=0)).blob is None
        assert (await store.put_run(key, None, expected_version=1)).version == 2
        got = await store.get_run(key)
        assert got is not None and got.blob is None and got.version == 2
        session = await store.put_session("acme", "s", None, expected_version=0)
        assert session.blob is None and session.version == 1

    @pytest.mark.asyncio
    async def test_inputs_nesting_up_to_the_limit_is_stored_and_deeper_refused(
        self, store: AsyncStateStore
    ) -> None:
        # Memory stored a blob 600 deep, then every read of it raised RecursionError; 1,000
        # deep raised it on every backend.
        key = RunKey("acme", "r")
        deepest = nested(MAX_JSON_DEPTH)
        await store.put_run(key, deepest, expected_version=0)
        got = await store.get_run(key)
        assert got is not None and got.blob == deepest
        assert [run.blob for run in (await store.list_runs("acme")).items] == [deepest]
        for depth in (MAX_JSON_DEPTH + 1, 5_000):
            with pytest.raises(StatePersistenceError) as caught:
                await store.put_run(RunKey("acme", "deep"), nested(depth), expected_version=0)
            assert caught.value.reason == "invalid" and not caught.value.retryable
        assert await store.get_run(RunKey("acme", "deep")) is None

    @pytest.mark.asyncio
    async def test_inputs_event_data_nesting_follows_the_same_limit(
        self, store: AsyncStateStore
    ) -> None:
        log = _log(store)
        key = RunKey("acme", "r")
        await log.put_run(key, {}, expected_version=0)
        deepest = nested(MAX_JSON_DEPTH)
        assert (await log.append_event(key, "deep", deepest)).data == deepest
        for depth in (MAX_JSON_DEPTH + 1, 5_000):
            with pytest.raises(StatePersistenceError) as caught:
                await log.append_event(key, "deeper", nested(depth))
            assert caught.value.reason == "invalid"
        assert [e.type for e in await log.read_events(key)] == ["deep"]

    @pytest.mark.asyncio
    async def test_inputs_delete_session_takes_cascade_as_a_bool_only(
        self, store: AsyncStateStore
    ) -> None:
        # cascade="no" deleted the session's runs and their event logs on every backend.
        await store.put_session("acme", "s", {}, expected_version=0)
        key = RunKey("acme", "r")
        await store.put_run(key, {}, expected_version=0, session_id="s")
        for bad in NOT_A_FLAG:
            with pytest.raises(InvalidArgumentError) as caught:
                await store.delete_session("acme", "s", cascade=bad)
            assert caught.value.argument == "cascade"
        assert await store.get_run(key) is not None
        assert await store.get_session("acme", "s") is not None

    @pytest.mark.asyncio
    async def test_inputs_a_cursor_past_a_bigint_was_never_issued(
        self, store: AsyncStateStore
    ) -> None:
        # Memory and Redis answered an empty page, PostgreSQL and SQLite raised their own
        # errors, and past 4,300 digits every backend raised a bare ValueError.
        await store.put_run(RunKey("acme", "r"), {}, expected_version=0)
        for bad in PAST_A_BIGINT:
            with pytest.raises(InvalidIdentifierError):
                await store.list_runs("acme", cursor=bad)
        assert (await store.list_runs("acme", cursor="s9223372036854775807")).items == []

    @pytest.mark.asyncio
    async def test_inputs_an_after_that_is_no_seq_is_refused(self, store: AsyncStateStore) -> None:
        # after=2**63: memory answered [], Redis and SQLite raised driver errors; a negative
        # after and a bad poll_seconds were a bare ValueError or TypeError.
        log = _log(store)
        key = RunKey("acme", "r")
        await log.put_run(key, {}, expected_version=0)
        await log.append_event(key, "tick", 1)
        bad_after: list[Any] = [2**63, -1, True, "1"]
        for bad in bad_after:
            with pytest.raises(InvalidArgumentError) as caught:
                await log.read_events(key, after=bad)
            assert caught.value.argument == "after"
            with pytest.raises(InvalidArgumentError):
                log.follow(key, after=bad)
        assert await log.read_events(key, after=2**63 - 1) == []
        assert await log.read_events(key, after=2**63 - 51, limit=100) == []
        bad_polls: list[Any] = ["1", math.nan, math.inf, 0, -1.0, True]
        for poll in bad_polls:
            with pytest.raises(InvalidArgumentError) as caught:
                log.follow(key, poll_seconds=poll)
            assert caught.value.argument == "poll_seconds"

    @pytest.mark.asyncio
    async def test_inputs_a_retry_with_a_bool_for_a_number_is_another_event(
        self, store: AsyncStateStore
    ) -> None:
        # Memory, SQLite and PostgreSQL compared with Python's ==, so True == 1: a retry
        # sending 1 was handed the event stored with true. Redis refused it.
        log = _log(store)
        key = RunKey("acme", "r")
        await log.put_run(key, {}, expected_version=0)
        same = {"big": 1e20, "zero": -0.0, "f": 1.5, "ok": True}
        first = await log.append_event(key, "tick", same, event_id="a")
        assert (await log.append_event(key, "tick", dict(same), event_id="a")).seq == first.seq
        await log.append_event(key, "tick", {"ok": True}, event_id="b")
        for other in ({"ok": 1}, {"ok": 1.0}, {"ok": None}, {"ok": [True]}):
            with pytest.raises(EventConflictError):
                await log.append_event(key, "tick", other, event_id="b")
        await log.finalize(key, status="completed", event_type="end", event_data=True, event_id="z")
        with pytest.raises(EventConflictError):
            await log.finalize(
                key, status="completed", event_type="end", event_data=1, event_id="z"
            )
        assert [e.event_id for e in await log.read_events(key)] == ["a", "b", "z"]

    @pytest.mark.asyncio
    async def test_inputs_a_retry_with_equal_numbers_is_the_same_event(
        self, store: AsyncStateStore
    ) -> None:
        # Redis compared the canonical text, so a retry sending 1.0 for a stored 1 (or 0 for
        # -0.0) raised EventConflictError there only; it is the stored event everywhere.
        log = _log(store)
        key = RunKey("acme", "r")
        await log.put_run(key, {}, expected_version=0)
        first = await log.append_event(key, "tick", {"n": 1, "z": -0.0}, event_id="a")
        again = await log.append_event(key, "tick", {"n": 1.0, "z": 0}, event_id="a")
        assert (again.seq, again.at) == (first.seq, first.at)
        assert again.data == {"n": 1, "z": 0} and type(again.data["n"]) is int  # as stored
        with pytest.raises(EventConflictError):
            await log.append_event(key, "tick", {"n": 2, "z": 0}, event_id="a")
        with pytest.raises(EventConflictError):
            await log.append_event(key, "tock", {"n": 1.0, "z": 0}, event_id="a")
        done = await log.finalize(
            key, status="completed", event_type="end", event_data=[10], event_id="z"
        )
        retried = await log.finalize(
            key, status="completed", event_type="end", event_data=[10.0], event_id="z"
        )
        assert (retried.version, retried.status) == (done.version, "completed")
        with pytest.raises(EventConflictError):
            await log.finalize(
                key, status="completed", event_type="end", event_data=[11], event_id="z"
            )
        with pytest.raises(EventConflictError):
            await log.append_event(key, "end", [10.0], event_id="z")
        assert [e.event_id for e in await log.read_events(key)] == ["a", "z"]

    @pytest.mark.asyncio
    async def test_inputs_a_run_lease_with_bad_fields_is_refused(
        self, store: AsyncStateStore
    ) -> None:
        # A RunLease is a plain model anyone can build: an epoch past a bigint was False on
        # memory and Redis, a driver error on SQLite and PostgreSQL, and so on.
        key = RunKey("acme", "r")
        lease = await store.acquire_lease(key, "worker-a", ttl_seconds=30)
        bad_fields: list[dict[str, Any]] = [
            {"epoch": 2**63},
            {"epoch": True},
            {"epoch": -1},
            {"tenant": "acme\x00"},
            {"run_id": ""},
            {"holder": "h" * 300},
        ]
        bad: list[Any] = [lease.model_copy(update=fields) for fields in bad_fields] + [key]
        for wrong in bad:
            with pytest.raises(InvalidArgumentError):
                await store.release_lease(wrong)
            with pytest.raises(InvalidArgumentError):
                await store.renew_lease(wrong, ttl_seconds=30)
        current = await store.get_lease(key)
        assert current is not None and (current.holder, current.epoch) == ("worker-a", lease.epoch)


class AsyncExecutionInputCases(AsyncExecutionKitBase):
    """Models built without validation, seqs, flags and cursors, on every execution store."""

    @pytest.mark.asyncio
    async def test_inputs_a_commit_checks_models_built_without_validation(
        self, store: AsyncExecutionStore
    ) -> None:
        # model_construct and model_copy(update=) skip validation: a NaN timer was stored by
        # memory and PostgreSQL and half-applied by Redis; a NUL status saved, then failed
        # every load.
        exe = await self._created(store, "e")
        version = exe.version
        nan_timer = TimerOp.model_construct(action="schedule", path="p", fire_at=math.nan)
        with pytest.raises(ValueError):
            await store.commit(exe, emits=[("t", make_event("ev"))], timers=[nan_timer])
        bad_event = Event.model_construct(id="a\x00b", name="", data=None)
        with pytest.raises(ValueError):
            await store.commit(exe, emits=[("t", bad_event)])
        bad_spawn = SpawnIntent.model_construct(child_id="", root_path="", context={})
        with pytest.raises(ValueError):
            await store.commit(exe, spawns=[bad_spawn])
        for fields in ({"status": "a\x00b"}, {"definition_id": ""}):
            with pytest.raises(InvalidIdentifierError):  # as the constructor raises
                await store.save(exe.model_copy(update=fields))
        with pytest.raises(ValueError):
            await store.save(exe.model_copy(update={"version": 2**63}))
        assert exe.version == version
        loaded = await store.load("e")
        assert loaded is not None and loaded.version == version
        assert loaded.status == exe.status
        assert await store.pending_outbox() == []
        assert await store.pending_spawns() == []
        assert await store.due_timers(1e12) == []

    @pytest.mark.asyncio
    async def test_inputs_acks_take_an_int_seq_only(self, store: AsyncExecutionStore) -> None:
        # Memory popped seq 1 for True or 1.0 (equal dict keys); the others answered False.
        exe = await self._created(store, "e")
        await store.commit(
            exe, emits=[("t", make_event("ev"))], spawns=[SpawnIntent(child_id="kid")]
        )
        [entry] = await store.pending_outbox()
        [spawn] = await store.pending_spawns()
        for bad in (True, float(entry.seq), str(entry.seq)):
            assert await store.ack_outbox(bad) is False  # type: ignore[arg-type]
        for bad in (True, float(spawn.seq)):
            assert await store.ack_spawn(bad) is False  # type: ignore[arg-type]
        assert [e.seq for e in await store.pending_outbox()] == [entry.seq]
        assert [s.seq for s in await store.pending_spawns()] == [spawn.seq]
        assert await store.ack_outbox(entry.seq) is True
        assert await store.ack_spawn(spawn.seq) is True

    @pytest.mark.asyncio
    async def test_inputs_listing_takes_roots_only_as_a_bool_and_no_cursor_past_a_bigint(
        self, store: AsyncExecutionStore
    ) -> None:
        # roots_only="no" listed roots only on three backends and crashed PostgreSQL; a cursor
        # past a bigint was an empty page, a driver error or a bare OverflowError.
        await self._created(store, "e")
        for bad in NOT_A_FLAG:
            with pytest.raises(InvalidArgumentError) as caught:
                await store.list_executions(roots_only=bad)
            assert caught.value.argument == "roots_only"
        for cursor in PAST_A_BIGINT:
            with pytest.raises(InvalidIdentifierError):
                await store.list_executions(cursor=cursor)
        assert [s.id for s in (await store.list_executions(roots_only=True)).items] == ["e"]

    @pytest.mark.asyncio
    async def test_inputs_execution_json_nests_up_to_the_limit(
        self, store: AsyncExecutionStore
    ) -> None:
        # Memory saved an execution 500 deep, then every load raised RecursionError; Redis
        # counted its own envelope's levels and refused event data 511 deep.
        deepest = nested(MAX_JSON_DEPTH)
        context = {"d": nested(MAX_JSON_DEPTH - 1)}  # the dict is a level of its own
        exe = await self._created(store, "e", context=context)
        await store.commit(
            exe,
            emits=[("t", make_event("ev", data=deepest))],
            spawns=[SpawnIntent(child_id="kid", context=context)],
            trace=TraceStep(data=deepest),
        )
        loaded = await store.load("e")
        assert loaded is not None and loaded.context == context
        [entry] = await store.pending_outbox()
        [spawn] = await store.pending_spawns()
        assert entry.event.data == deepest and spawn.context == context
        assert (await store.append_trace("e", TraceStep(data=deepest))).data == deepest
        assert [t.data for t in await store.read_trace("e")] == [deepest, deepest]
        for bad in (
            lambda: store.save(make_execution("f", context={"d": deepest})),
            lambda: store.commit(exe, emits=[("t", make_event("deeper", data=[deepest]))]),
            lambda: store.append_trace("e", TraceStep(data=[deepest])),
        ):
            with pytest.raises(StatePersistenceError) as caught:
                await bad()
            assert caught.value.reason == "invalid"
        assert await store.load("f") is None
        assert len(await store.read_trace("e")) == 2

    @pytest.mark.asyncio
    async def test_inputs_execution_json_reads_back_as_written(
        self, store: AsyncExecutionStore
    ) -> None:
        # PostgreSQL kept the execution tables' JSON as jsonb, which gave 1e16 back as the int
        # 10000000000000000, -0.0 as 0.0, and reordered object keys.
        value = {"b": 1, "a": -0.0, "f": 1e16, "g": 1e308, "s": "x", "n": [2.5, None, True]}
        text = json.dumps(value)
        exe = await self._created(store, "e", context=value)
        await store.commit(
            exe,
            emits=[("t", make_event("ev", data=value))],
            spawns=[SpawnIntent(child_id="kid", context=value)],
            trace=TraceStep(data=value),
        )
        loaded = await store.load("e")
        assert loaded is not None and json.dumps(loaded.context) == text
        [entry] = await store.pending_outbox()
        [spawn] = await store.pending_spawns()
        assert json.dumps(entry.event.data) == text and json.dumps(spawn.context) == text
        assert json.dumps((await store.append_trace("e", TraceStep(data=value))).data) == text
        assert [json.dumps(t.data) for t in await store.read_trace("e")] == [text, text]

    @pytest.mark.asyncio
    async def test_inputs_times_past_a_float_are_refused(self, store: AsyncExecutionStore) -> None:
        # math.isfinite raised a raw OverflowError for them on every backend.
        for huge in (2**1100, 10**5000):
            with pytest.raises(InvalidArgumentError) as caught:
                await store.due_timers(huge)
            assert caught.value.argument == "now"
            with pytest.raises(InvalidArgumentError) as caught:
                await store.delete_timer("e", "p", huge)
            assert caught.value.argument == "fire_at"

    @pytest.mark.asyncio
    async def test_inputs_append_trace_checks_a_step_built_without_validation(
        self, store: AsyncExecutionStore
    ) -> None:
        # Only memory re-validated it: SQLite, Redis and PostgreSQL stored an empty event id.
        await self._created(store, "e")
        with pytest.raises(InvalidIdentifierError):
            await store.append_trace("e", TraceStep.model_construct(event_id="", data=None))
        assert await store.read_trace("e") == []
