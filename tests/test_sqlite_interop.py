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
