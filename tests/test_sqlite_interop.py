"""The sync twin and the async twin share one SQLite file, both ways."""

from __future__ import annotations

from pathlib import Path

import pytest
from runyard import CounterDelta, RunKey
from runyard.executions.models import Event, Execution
from runyard.sqlite import (
    AsyncSqliteStateStore,
    AsyncSqliteStore,
    AsyncSqliteWorkQueue,
    SqliteStateStore,
    SqliteStore,
    SqliteWorkQueue,
)


@pytest.mark.asyncio
async def test_sync_writes_and_async_reads(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    state = SqliteStateStore.open(path, create_schema=True)
    queue = SqliteWorkQueue.open(path)
    executions = SqliteStore.open(path)
    state.put_run(RunKey("acme", "r"), {"from": "sync"}, expected_version=0)
    state.patch_run(RunKey("acme", "r"), CounterDelta(input_tokens=5))
    queue.enqueue("acme", {"job": 1}, item_id="job-1")
    executions.commit(Execution(id="e", definition_id="d"), emits=[("t", Event(id="x", name="go"))])
    for store in (state, queue, executions):
        store.close()

    a_state = await AsyncSqliteStateStore.open(path)
    a_queue = await AsyncSqliteWorkQueue.open(path)
    a_executions = await AsyncSqliteStore.open(path)
    try:
        run = await a_state.get_run(RunKey("acme", "r"))
        assert run is not None and (run.blob, run.input_tokens, run.version) == (
            {"from": "sync"},
            5,
            2,
        )
        lease = await a_queue.claim("async-worker")
        assert lease is not None and lease.item_id == "job-1"
        await a_queue.complete(lease.tenant, lease.item_id, token=lease.token)
        exe = await a_executions.load("e")
        assert exe is not None and exe.version == 1
        assert [e.event.id for e in await a_executions.pending_outbox()] == ["x"]
    finally:
        for a_store in (a_state, a_queue, a_executions):
            await a_store.aclose()


@pytest.mark.asyncio
async def test_async_writes_and_sync_reads(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    a_state = await AsyncSqliteStateStore.open(path, create_schema=True)
    a_queue = await AsyncSqliteWorkQueue.open(path)
    await a_state.put_run(RunKey("acme", "r"), {"from": "async"}, expected_version=0)
    await a_queue.enqueue("acme", {"job": 2}, item_id="job-2")
    lease = await a_queue.claim("async-worker")
    assert lease is not None

    state = SqliteStateStore.open(path)
    queue = SqliteWorkQueue.open(path)
    try:
        run = state.get_run(RunKey("acme", "r"))
        assert run is not None and run.blob == {"from": "async"}
        # The sync twin settles the lease the async twin took, fenced on the same token.
        queue.complete("acme", "job-2", token=lease.token)
        assert queue.get_item("acme", "job-2") is None
        assert await a_queue.get_item("acme", "job-2") is None
    finally:
        state.close()
        queue.close()
        await a_state.aclose()
        await a_queue.aclose()


@pytest.mark.asyncio
async def test_one_event_log_written_by_both_twins(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    key = RunKey("acme", "evented")
    sync_state = SqliteStateStore.open(path, create_schema=True)
    async_state = await AsyncSqliteStateStore.open(path)
    try:
        sync_state.put_run(key, {}, expected_version=0)
        sync_state.append_event(key, "step", {"by": "sync"}, event_id="s-1")
        await async_state.append_event(key, "step", {"by": "async"})
        # A retry through the other twin is the same event, not a new one.
        again = await async_state.append_event(key, "step", {"by": "sync"}, event_id="s-1")
        assert again.seq == 1
        await async_state.finalize(key, status="completed", event_type="done", event_data={})
        followed = list(sync_state.follow(key, poll_seconds=0.01))
        assert [(e.seq, e.data, e.terminal) for e in followed] == [
            (1, {"by": "sync"}, False),
            (2, {"by": "async"}, False),
            (3, {}, True),
        ]
        assert await async_state.read_events(key) == followed
    finally:
        sync_state.close()
        await async_state.aclose()


def test_delete_session_with_cascade_deletes_the_logs_of_its_runs(tmp_path: Path) -> None:
    state = SqliteStateStore.open(tmp_path / "s.db", create_schema=True)
    key = RunKey("acme", "in-session")
    try:
        state.put_session("acme", "sess", {}, expected_version=0)
        state.put_run(key, {}, expected_version=0, session_id="sess")
        state.append_event(key, "step", {"i": 1}, event_id="e-1")
        assert state.delete_session("acme", "sess", cascade=True)
        assert state.read_events(key) == []
        state.put_run(key, {}, expected_version=0)
        # The old event id went with the log: the same id names a new first event.
        assert state.append_event(key, "other", {}, event_id="e-1").seq == 1
    finally:
        state.close()
