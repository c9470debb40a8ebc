"""The async SQLite twin only (a sync call cannot be cancelled): a call cancelled while it waits
for the write lock another connection holds leaves no transaction open once that lock frees.

aiosqlite still runs a cancelled call, later, on its own thread: the call's ``BEGIN IMMEDIATE``
takes the lock when the other writer commits. Its transaction must then be ended there (rolled
back), not left open holding the file's write lock, and the store's next calls must work.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from runyard import AsyncYard, RunKey
from runyard.sqlite import AsyncSqliteStateStore, AsyncSqliteWorkQueue
from runyard.sqlite.flavours import AsyncConnection, in_transaction

KEY = RunKey("acme", "run-1")
LONG_BUSY_TIMEOUT = 60.0  # the cancelled call waits for the lock far longer than the test runs


@contextmanager
def other_writer(path: Path) -> Iterator[sqlite3.Connection]:
    """Another process's connection holding the file's write lock (``BEGIN IMMEDIATE``) until
    the test commits it."""
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield other
    finally:
        if other.in_transaction:
            other.execute("ROLLBACK")
        other.close()


async def began_waiting(connection: AsyncConnection) -> asyncio.Event:
    """An event set once ``connection`` starts a ``BEGIN IMMEDIATE`` (the statement then waits
    in SQLite's busy handler while another connection holds the write lock)."""
    loop = asyncio.get_running_loop()
    began = asyncio.Event()

    def traced(statement: str) -> None:
        if statement.startswith("BEGIN IMMEDIATE"):
            loop.call_soon_threadsafe(began.set)

    def install(raw: sqlite3.Connection) -> None:
        raw.set_trace_callback(traced)

    await connection.call(install)
    return began


async def cancel_while_waiting_for_the_lock(
    path: Path,
    connection: AsyncConnection,
    call: Callable[[], Awaitable[Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Start ``call``, cancel it while its ``BEGIN IMMEDIATE`` waits for the lock another
    connection holds, then, once the cancelled call has given up (its task done) or is ending
    its transaction on the driver's thread (``connection.end`` called), let that connection
    commit: the cancelled ``BEGIN IMMEDIATE`` then gets the lock."""
    ending = asyncio.Event()
    end = connection.end

    async def spied_end(commit: bool) -> None:
        ending.set()
        await end(commit)

    monkeypatch.setattr(connection, "end", spied_end)
    with other_writer(path) as other:
        began = await began_waiting(connection)
        task = asyncio.ensure_future(call())
        await asyncio.wait_for(began.wait(), 30)
        task.cancel()
        ended = asyncio.ensure_future(ending.wait())
        await asyncio.wait({task, ended}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
        ended.cancel()
        other.execute("COMMIT")
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 30)
    await connection.call(lambda raw: raw.set_trace_callback(None))
    monkeypatch.undo()


def assert_file_not_locked(path: Path) -> None:
    """Another connection takes the write lock at once (no busy wait)."""
    third = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        third.execute("BEGIN IMMEDIATE")
        third.execute("COMMIT")
    finally:
        third.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("operation", ["fenced put_run", "acquire_lease"])
async def test_a_state_write_cancelled_waiting_for_the_lock_leaves_it_free(
    tmp_path: Path, operation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.db"
    store = await AsyncSqliteStateStore.open(
        path, create_schema=True, busy_timeout_seconds=LONG_BUSY_TIMEOUT
    )
    try:
        await store.put_run(KEY, {"n": 0}, expected_version=0)
        lease = await store.acquire_lease(KEY, "me", ttl_seconds=60)
        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "fenced put_run": lambda: store.put_run(
                KEY, {"n": 1}, expected_version=1, fence=lease.epoch
            ),
            "acquire_lease": lambda: store.acquire_lease(
                RunKey("acme", "run-2"), "me", ttl_seconds=60
            ),
        }
        await cancel_while_waiting_for_the_lock(
            path, store.connection, calls[operation], monkeypatch
        )

        # The next call runs on the driver's thread after the cancelled one.
        record = await store.put_run(KEY, {"n": 2}, expected_version=1, fence=lease.epoch)
        assert record.version == 2 and record.blob == {"n": 2}
        assert not store.connection.raw.in_transaction
        assert (await store.get_lease(RunKey("acme", "run-2"))) is None  # rolled back
        assert_file_not_locked(path)
    finally:
        await store.aclose()


@pytest.mark.asyncio
async def test_a_cancelled_state_write_leaves_the_shared_connection_to_the_queue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The yard's stores share one connection: the queue's claim and complete after a cancelled
    fenced put_run work (they failed with "cannot start a transaction within a transaction")."""
    path = tmp_path / "yard.db"
    yard = await AsyncYard.from_url(f"sqlite:///{path}")
    try:
        await yard.state.put_run(KEY, {}, expected_version=0)
        lease = await yard.state.acquire_lease(KEY, "me", ttl_seconds=60)
        item = await yard.queue.enqueue("acme", {"job": 1})
        state: Any = yard.state
        connection: AsyncConnection = state.connection
        await connection.call(lambda raw: raw.execute(f"PRAGMA busy_timeout = {60_000}"))

        await cancel_while_waiting_for_the_lock(
            path,
            connection,
            lambda: yard.state.put_run(KEY, {"x": 1}, expected_version=1, fence=lease.epoch),
            monkeypatch,
        )

        claimed = await yard.queue.claim("w1")
        assert claimed is not None and claimed.item_id == item.item_id
        await yard.queue.complete(claimed)
        assert (await yard.queue.stats()).leased == 0
        assert (await yard.state.get_run(KEY)).version == 1  # type: ignore[union-attr]
        assert_file_not_locked(path)
    finally:
        await yard.aclose()


@pytest.mark.asyncio
async def test_a_queue_claim_cancelled_waiting_for_the_lock_leaves_it_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim is one trip to the driver's thread: cancelled, it still runs there whole (its
    transaction committed or rolled back there); the next claim and complete work."""
    path = tmp_path / "queue.db"
    queue = await AsyncSqliteWorkQueue.open(
        path, create_schema=True, busy_timeout_seconds=LONG_BUSY_TIMEOUT
    )
    try:
        for n in range(2):
            await queue.enqueue("acme", {"n": n})
        await cancel_while_waiting_for_the_lock(
            path, queue.connection, lambda: queue.claim("w1"), monkeypatch
        )

        lease = await queue.claim("w2")
        assert lease is not None
        await queue.complete(lease)
        assert not queue.connection.raw.in_transaction
        assert_file_not_locked(path)
    finally:
        await queue.aclose()


def test_in_transaction_rolls_back_what_an_earlier_call_left_open(tmp_path: Path) -> None:
    """A transaction left open on the connection (by a call nobody waited for) is rolled back
    before BEGIN IMMEDIATE, which would fail inside it and leave it holding the lock."""
    raw = sqlite3.connect(tmp_path / "raw.db", isolation_level=None)
    try:
        raw.execute("CREATE TABLE t (n INTEGER)")
        raw.execute("BEGIN IMMEDIATE")
        raw.execute("INSERT INTO t VALUES (1)")  # never committed: its caller went away

        def body(connection: sqlite3.Connection) -> int:
            connection.execute("INSERT INTO t VALUES (2)")
            return 2

        assert in_transaction(raw, body) == 2
        assert not raw.in_transaction
        assert raw.execute("SELECT n FROM t").fetchall() == [(2,)]
    finally:
        raw.close()
