"""Several processes on one SQLite file: exclusive claims, and a writer killed mid-transaction.

The children run the sync twin (stdlib sqlite3). A kill test shows that what was committed
survives and that no lock outlives its process; it is not a power-loss proof (see docs/sqlite.md).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
from collections import Counter
from multiprocessing.connection import Connection as Pipe
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import pytest
from runyard import RunKey
from runyard.models import NewItem
from runyard.sqlite import SqliteStateStore, SqliteWorkQueue

ITEMS = 400
WORKERS = 4
TENANTS = 7
SPAWN = multiprocessing.get_context("spawn")
RECEIVE_TIMEOUT = 120.0  # far past what a child needs here; a bound, not a synchronisation


def _receive(receiver: Pipe, process: BaseProcess, timeout: float = RECEIVE_TIMEOUT) -> Any:
    """What the child ``process`` sends on ``receiver``. Fails the test, instead of waiting
    forever, when the child ends without sending (a crash: its exit code is in the failure)
    or sends nothing within ``timeout`` seconds (then it is killed)."""
    ready = wait([receiver, process.sentinel], timeout=timeout)
    if receiver in ready or receiver.poll():  # it may have sent just before it ended
        return receiver.recv()
    if process.sentinel in ready:
        process.join()
        pytest.fail(f"{process.name} ended with exit code {process.exitcode} before sending")
    process.kill()
    process.join()
    pytest.fail(f"{process.name} sent nothing within {timeout} s (killed)")


def _exit_without_sending(code: int, results: Pipe) -> None:
    os._exit(code)  # a crash before the result is sent


def _claim_until_empty(path: str, worker: str, batch: int, start: Pipe, results: Pipe) -> None:
    queue = SqliteWorkQueue.open(path, busy_timeout_seconds=30)
    start.recv()  # every worker starts claiming at once
    done: list[int] = []
    if batch == 1:
        while (lease := queue.claim(worker)) is not None:
            queue.complete(lease.tenant, lease.item_id, token=lease.token)
            done.append(lease.item.payload["i"])
    else:  # the batched calls: one transaction per claim_many and per complete_many
        while leases := queue.claim_many(worker, limit=batch):
            assert queue.complete_many(leases) == [None] * len(leases)
            done.extend(lease.item.payload["i"] for lease in leases)
    queue.close()
    results.send(done)


@pytest.mark.parametrize("batch", [1, 8])
def test_four_processes_complete_every_item_exactly_once(tmp_path: Path, batch: int) -> None:
    path = str(tmp_path / "shared.db")
    queue = SqliteWorkQueue.open(path, create_schema=True)
    for tenant in range(TENANTS):
        ids = range(tenant, ITEMS, TENANTS)
        queue.enqueue_many(f"tenant-{tenant}", [NewItem(payload={"i": i}) for i in ids])
    pipes = [SPAWN.Pipe() for _ in range(WORKERS)]
    results = [SPAWN.Pipe(duplex=False) for _ in range(WORKERS)]
    workers = [
        SPAWN.Process(
            target=_claim_until_empty, args=(path, f"w{n}", batch, pipes[n][1], results[n][1])
        )
        for n in range(WORKERS)
    ]
    for process in workers:
        process.start()
    for parent_end, _ in pipes:
        parent_end.send("go")
    done = [
        _receive(receiver, process) for (receiver, _), process in zip(results, workers, strict=True)
    ]
    for process in workers:
        process.join(timeout=60)
        assert process.exitcode == 0
    counts = Counter(i for batch in done for i in batch)
    assert sorted(counts) == list(range(ITEMS))
    assert set(counts.values()) == {1}
    stats = queue.stats()
    assert (stats.ready, stats.leased, stats.dead) == (0, 0, 0)
    queue.close()


def _append_events(path: str, writer: str, count: int, start: Pipe, results: Pipe) -> None:
    store = SqliteStateStore.open(path, busy_timeout_seconds=30)
    start.recv()  # every writer starts appending at once
    seqs = [
        store.append_event(RunKey("acme", "shared"), "step", {"by": writer, "n": n}).seq
        for n in range(count)
    ]
    store.close()
    results.send(seqs)


def test_four_processes_append_to_one_log_with_gap_free_seqs(tmp_path: Path) -> None:
    path = str(tmp_path / "events.db")
    store = SqliteStateStore.open(path, create_schema=True)
    key = RunKey("acme", "shared")
    store.put_run(key, {}, expected_version=0)
    per_writer = 50
    pipes = [SPAWN.Pipe() for _ in range(WORKERS)]
    results = [SPAWN.Pipe(duplex=False) for _ in range(WORKERS)]
    writers = [
        SPAWN.Process(
            target=_append_events, args=(path, f"w{n}", per_writer, pipes[n][1], results[n][1])
        )
        for n in range(WORKERS)
    ]
    for process in writers:
        process.start()
    for parent_end, _ in pipes:
        parent_end.send("go")
    returned = [
        _receive(receiver, process) for (receiver, _), process in zip(results, writers, strict=True)
    ]
    for process in writers:
        process.join(timeout=60)
        assert process.exitcode == 0
    total = WORKERS * per_writer
    assert sorted(seq for seqs in returned for seq in seqs) == list(range(1, total + 1))
    events = store.read_events(key, limit=total)
    assert [e.seq for e in events] == list(range(1, total + 1))
    # Each writer's events are in the log in the order it appended them.
    for n in range(WORKERS):
        mine = [e.data["n"] for e in events if e.data["by"] == f"w{n}"]
        assert mine == list(range(per_writer))
    store.close()


def _write_then_hang(path: str, signal_parent: Pipe) -> None:
    store = SqliteStateStore.open(path)
    store.put_run(RunKey("acme", "committed"), {"n": 1}, expected_version=0)
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("BEGIN IMMEDIATE")
    raw.execute(
        "INSERT INTO runyard_runs (tenant, run_id, blob, version, status, created_at, updated_at)"
        " VALUES ('acme', 'uncommitted', '{}', 1, 'running', 0, 0)"
    )
    signal_parent.send("holding the write lock")
    signal_parent.recv()  # never answered: the parent kills this process here


def test_a_writer_killed_mid_transaction_loses_nothing_committed_and_leaves_no_lock(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "killed.db")
    SqliteStateStore.open(path, create_schema=True).close()
    parent_end, child_end = SPAWN.Pipe()
    child = SPAWN.Process(target=_write_then_hang, args=(path, child_end))
    child.start()
    assert _receive(parent_end, child) == "holding the write lock"
    assert child.pid is not None
    os.kill(child.pid, signal.SIGKILL)
    child.join(timeout=30)
    assert child.exitcode == -signal.SIGKILL
    store = SqliteStateStore.open(path, busy_timeout_seconds=10)
    try:
        committed = store.get_run(RunKey("acme", "committed"))
        assert committed is not None and committed.blob == {"n": 1}
        assert store.get_run(RunKey("acme", "uncommitted")) is None
        # The dead writer's lock went with it: a new write transaction commits.
        record = store.put_run(RunKey("acme", "after"), {}, expected_version=0)
        assert record.version == 1
        updated = store.put_run(RunKey("acme", "committed"), {"n": 2}, expected_version=1)
        assert updated.version == 2
    finally:
        store.close()


def test_a_child_that_ends_without_sending_fails_the_wait_with_its_exit_code() -> None:
    """The parent's wait for a child's result is bounded: a crashed child (here one that exits
    with 3 before sending) fails the test naming its exit code, where recv() waited forever
    (the parent holds the pipe's other end, so it never reads end-of-file)."""
    receiver, sender = SPAWN.Pipe(duplex=False)
    child = SPAWN.Process(target=_exit_without_sending, args=(3, sender))
    child.start()
    with pytest.raises(pytest.fail.Exception, match="ended with exit code 3 before sending"):
        _receive(receiver, child)
    assert child.exitcode == 3
