"""The SQLite driver classes, as an async/sync pair: aiosqlite and the standard ``sqlite3``.

The async adapters name ``AsyncConnection``; the twin generator strips ``Async``, so the sync
twin names ``Connection``. Both have the same shape: ``connect``, ``fetch``, ``call``, ``script``,
``close``, and the ``lock`` that keeps the transactions of the tasks (or threads) sharing the
connection apart. Everything else (pragmas, transactions, SQL) is shared code.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, quote

from runyard._flavours import AsyncLock, Lock
from runyard.errors import ConfigurationError
from runyard.sqlite.errors import StoreClosed
from runyard.sqlite.settings import is_memory_path, is_uri

if TYPE_CHECKING:
    import aiosqlite

__all__ = [
    "AsyncConnection",
    "Body",
    "Connection",
    "Params",
    "Row",
    "connect_target",
    "end_transaction",
    "file_missing",
    "in_transaction",
]

Row = tuple[Any, ...]
Params = Mapping[str, Any] | Sequence[Any]
T = TypeVar("T")
Body = Callable[..., T]
"""A transaction's body: ``body(raw, *args)`` runs its statements on the ``sqlite3`` connection."""


def in_transaction(raw: sqlite3.Connection, body: Body[T], *args: Any) -> T:
    """Run ``body(raw, *args)`` in one ``BEGIN IMMEDIATE`` ... ``COMMIT``; roll back on any error.

    Runs on the connection's own thread (aiosqlite's, or the caller's for ``sqlite3``), so a
    whole transaction is one trip to the driver whatever number of statements it sends. A
    transaction an earlier call left open (one whose caller stopped waiting for it) is rolled
    back first: it has no one left to finish it, and ``BEGIN`` would fail inside it.
    """
    if raw.in_transaction:
        raw.rollback()
    try:
        raw.execute("BEGIN IMMEDIATE")
        result = body(raw, *args)
        raw.commit()
    except BaseException:
        if raw.in_transaction:
            raw.rollback()
        raise
    return result


def end_transaction(raw: sqlite3.Connection, commit: bool) -> None:
    """Commit the open transaction when ``commit``, else roll it back; nothing when none is
    open. A failed commit is rolled back before its error is raised."""
    if not raw.in_transaction:
        return
    if not commit:
        raw.rollback()
        return
    try:
        raw.commit()
    except BaseException:
        if raw.in_transaction:
            raw.rollback()
        raise


def connect_target(path: str, create: bool) -> tuple[str, bool]:
    """(what ``sqlite3.connect`` is given for ``path``, whether it is a URI): ``:memory:`` as
    it is; a file path as itself, or, when not ``create``, as a ``mode=rw`` URI, so that
    opening a file that does not exist fails instead of making an empty one; a URI as it is,
    ``mode=rw`` added when not ``create`` and it names no mode (it made an empty file)."""
    if is_uri(path):
        query = path.partition("#")[0].partition("?")[2]
        if create or is_memory_path(path) or "mode" in dict(parse_qsl(query)):
            return path, True
        location, mark, fragment = path.partition("#")
        joiner = "&" if "?" in location else "?"
        return location + joiner + "mode=rw" + mark + fragment, True
    if create or is_memory_path(path):
        return path, False
    return f"file:{quote(path, safe='/')}?mode=rw", True


def file_missing(path: str) -> bool:
    """Whether ``path`` names a database file that does not exist, in a directory that does
    (not ``""``, ``:memory:`` or a URI)."""
    if not path or is_uri(path) or is_memory_path(path) or os.path.exists(path):
        return False
    return os.path.isdir(os.path.dirname(os.path.abspath(path)))


def _fetch_all(raw: sqlite3.Connection, sql: str, params: Params) -> list[Row]:
    # No row factory is set on runyard's connections: the rows are tuples already.
    rows: list[Row] = raw.execute(sql, params).fetchall()
    return rows


def _fetch_then_commit(raw: sqlite3.Connection, sql: str, params: Params) -> list[Row]:
    rows = _fetch_all(raw, sql, params)
    if rows and raw.in_transaction:
        raw.commit()
    return rows


def asks_read_only(path: str) -> bool:
    """Whether ``path`` is a URI that opens the file read-only on purpose (``mode=ro``): a
    reader, whose writes fail as they come (see ``probe_write``). (``immutable=1`` never
    opens: SQLite keeps such a file out of WAL.)"""
    if not is_uri(path):
        return False
    return dict(parse_qsl(path.partition("#")[0].partition("?")[2])).get("mode") == "ro"


def probe_write(raw: sqlite3.Connection, sql: str) -> None:
    """Run the write ``sql`` (one that changes no row) and roll back: it fails on a file
    SQLite cannot write (read-only, immutable), which ``journal_mode`` does not tell once the
    file is in WAL. It does not wait for the write lock: SQLite refuses a read-only file
    before it asks for the lock, so "locked" (another writer holds it) means writable."""
    (waits,) = raw.execute("PRAGMA busy_timeout").fetchone()
    raw.execute("PRAGMA busy_timeout = 0")
    try:
        raw.execute(sql)
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc) and "busy" not in str(exc):
            raise
    finally:
        try:
            if raw.in_transaction:
                raw.rollback()
        finally:  # the connection's wait comes back whatever the rollback did
            raw.execute(f"PRAGMA busy_timeout = {int(waits)}")


def _change_then_read(raw: sqlite3.Connection, sql: str, read: str, params: Params) -> list[Row]:
    if raw.execute(sql, params).rowcount < 1:
        return []
    rows = _fetch_all(raw, read, params)
    raw.commit()
    return rows


async def _closed_with_its_loop(connection: AsyncConnection) -> AsyncGenerator[None, None]:
    """Suspended at its ``yield`` until ``close()`` ends it (its ``finally`` then has nothing
    to do) or the event loop shuts down: ``loop.shutdown_asyncgens()``, which ``asyncio.run``
    and ``asyncio.Runner`` call once every task is done, ends it and it closes the
    connection, after every call still queued on aiosqlite's thread."""
    try:
        yield
    finally:
        if connection._forget_guard() is not None:
            connection.loop_ended = True  # its later calls say why it is closed
            await connection.close()


class AsyncConnection:
    """One aiosqlite connection (its own thread). The driver opens ``BEGIN IMMEDIATE`` itself
    before the first INSERT/UPDATE/DELETE of a transaction; the adapters send it explicitly
    before a transaction's first read, and ``COMMIT`` at the end, under ``lock``.

    A connection belongs to the event loop that opened it: when that loop shuts down
    (``asyncio.run`` returning) it is closed, if ``close()`` has not closed it already."""

    def __init__(
        self, raw: aiosqlite.Connection, path: str, busy_timeout_seconds: float = 5.0
    ) -> None:
        self.raw = raw
        self.path = path
        self.busy_timeout_seconds = busy_timeout_seconds
        self.durable = True  # synchronous = FULL; set by connect(path, durable=...)
        self.lock = AsyncLock()
        self.closed = False
        self.loop_ended = False  # closed by its event loop's shutdown, not by close()
        self._guard: AsyncGenerator[None, None] | None = None

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (False once closed). Read on the event loop's thread:
        true to what the driver's thread has done so far, not to what is still queued there."""
        return not self.closed and self.raw.in_transaction

    @classmethod
    async def connect(
        cls, path: str, *, busy_timeout_seconds: float, create: bool = True
    ) -> AsyncConnection:
        """Open ``path`` (see ``connect_target``: made when missing only when ``create``); a
        writer waits up to ``busy_timeout_seconds`` for the write lock.

        Raises ConfigurationError when aiosqlite is not installed (the sync twin needs only
        the standard library).
        """
        try:
            import aiosqlite
        except ImportError:
            raise ConfigurationError(
                "the async SQLite twin needs aiosqlite: pip install 'runyard[sqlite]' "
                "(the sync twin, SqliteStateStore ..., needs only the standard library)"
            ) from None
        target, uri = connect_target(path, create)
        pending = aiosqlite.connect(
            target, isolation_level="IMMEDIATE", timeout=busy_timeout_seconds, uri=uri
        )
        # aiosqlite 0.22 keeps its thread in _thread (before, the connection was the thread).
        thread: Any = getattr(pending, "_thread", pending)
        # A daemon, as before aiosqlite 0.22: a connection never closed on a loop that never
        # shut down (closed without shutdown_asyncgens, or left running) does not keep the
        # interpreter from exiting; its thread, idle, waits for nothing. What was committed
        # stays committed; an open transaction is rolled back when the file is next opened.
        thread.daemon = True
        try:
            raw = await pending
        except BaseException:
            # aiosqlite stops its thread after a failed connect without waiting for it: the
            # thread then reports to this loop, which must still run (else "Event loop is
            # closed" is raised in that thread once a caller's asyncio.run has ended).
            deadline = time.monotonic() + 1.0
            while thread.is_alive() and time.monotonic() < deadline:
                await asyncio.sleep(0.001)
            raise
        connection = cls(raw, path, busy_timeout_seconds)
        guard = _closed_with_its_loop(connection)
        # Started here, on the running loop: the loop's first-iteration hook registers it,
        # so that the loop's shutdown_asyncgens() ends it (and closes the connection).
        await guard.asend(None)
        # Not held anywhere else: a store dropped without aclose() is collected while its loop
        # runs, and the loop's async-generator finalizer then ends the guard on the loop,
        # which closes the connection (its thread and file with it).
        connection._guard = guard
        return connection

    def _forget_guard(self) -> AsyncGenerator[None, None] | None:
        """Take the guard away (None when taken already): the connection is being closed."""
        guard, self._guard = self._guard, None
        return guard

    async def fetch(self, sql: str, params: Params = ()) -> list[Row]:
        """Run one statement and return all its rows."""
        return await self.call(_fetch_all, sql, params)

    async def fetch_then_commit(self, sql: str, params: Params = ()) -> list[Row]:
        """Run one statement; when it returns rows, commit the transaction in the same call."""
        # One trip to aiosqlite's thread instead of two (see call).
        return await self.call(_fetch_then_commit, sql, params)

    async def change_then_read(self, sql: str, read: str, params: Params = ()) -> list[Row]:
        """Run the write ``sql``; when it changed a row, return the rows of ``read`` (same
        ``params``) and commit, in the same call; else return [] with the transaction open."""
        return await self.call(_change_then_read, sql, read, params)

    async def call(self, body: Body[T], *args: Any) -> T:
        """Run ``body(raw, *args)`` on aiosqlite's thread, where the ``sqlite3`` connection lives:
        one trip, whatever number of statements ``body`` sends."""
        # aiosqlite has no public way to run a function on its thread; _execute is how its own
        # methods do it (fetch and fetch_then_commit come through here too).
        if self.closed:
            raise StoreClosed(loop_ended=self.loop_ended)
        result: T = await self.raw._execute(  # type: ignore[no-untyped-call]
            body, self.raw._conn, *args
        )
        return result

    async def end(self, commit: bool) -> None:
        """End the open transaction (``end_transaction``) on aiosqlite's thread, after every
        call queued there before, including one whose caller was cancelled (aiosqlite still
        runs it). Cancelling the caller does not stop the end: it is waited for, then the
        cancellation goes on, so the transaction is over before the caller lets the lock go.
        Nothing once closed (closing rolled back what was open)."""
        if self.closed:
            return
        task = asyncio.ensure_future(self.call(end_transaction, commit))
        cancelled = False
        while not task.done():
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                if task.cancelled():
                    raise  # the end itself was cancelled (the loop shutting down)
                cancelled = True
            except Exception:
                break  # the end's own error: raised below
        if cancelled:
            if not task.cancelled():
                task.exception()  # retrieved: the cancellation is what the caller sees
            raise asyncio.CancelledError
        task.result()

    async def script(self, sql: str) -> None:
        """Run several statements (DDL) in one call."""
        if self.closed:
            raise StoreClosed(loop_ended=self.loop_ended)
        await self.raw.executescript(sql)

    async def close(self) -> None:
        """Close the connection (an open transaction is rolled back) after every call queued
        on its thread; every call after raises StoreClosed."""
        self.closed = True
        guard = self._forget_guard()
        if guard is not None:
            await guard.aclose()  # it was suspended at its yield: it ends, closing nothing
        if not getattr(self.raw, "_running", True):
            # aiosqlite's own finalizer stopped it (collected with its guard, unclosed): its
            # thread closes the sqlite3 connection and ends; a close() now would wait on a
            # thread that no longer answers (asyncio: "Task was destroyed but it is pending").
            return
        await self.raw.close()


class Connection:
    """One ``sqlite3`` connection, shareable between threads. The driver opens
    ``BEGIN IMMEDIATE`` itself before the first INSERT/UPDATE/DELETE of a transaction; the
    adapters send it explicitly before a transaction's first read, and ``COMMIT`` at the end,
    under ``lock``."""

    def __init__(
        self, raw: sqlite3.Connection, path: str, busy_timeout_seconds: float = 5.0
    ) -> None:
        self.raw = raw
        self.path = path
        self.busy_timeout_seconds = busy_timeout_seconds
        self.durable = True  # synchronous = FULL; set by connect(path, durable=...)
        self.lock = Lock()
        self.closed = False
        self.loop_ended = False  # as AsyncConnection's: a sync connection has no loop

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (False once closed)."""
        return not self.closed and self.raw.in_transaction

    @classmethod
    def connect(cls, path: str, *, busy_timeout_seconds: float, create: bool = True) -> Connection:
        """Open ``path`` (see ``connect_target``: made when missing only when ``create``); a
        writer waits up to ``busy_timeout_seconds`` for the write lock."""
        target, uri = connect_target(path, create)
        raw = sqlite3.connect(
            target,
            isolation_level="IMMEDIATE",
            timeout=busy_timeout_seconds,
            check_same_thread=False,
            uri=uri,
        )
        return cls(raw, path, busy_timeout_seconds)

    def fetch(self, sql: str, params: Params = ()) -> list[Row]:
        """Run one statement and return all its rows."""
        return self.call(_fetch_all, sql, params)

    def fetch_then_commit(self, sql: str, params: Params = ()) -> list[Row]:
        """Run one statement; when it returns rows, commit the transaction in the same call."""
        return self.call(_fetch_then_commit, sql, params)

    def change_then_read(self, sql: str, read: str, params: Params = ()) -> list[Row]:
        """Run the write ``sql``; when it changed a row, return the rows of ``read`` (same
        ``params``) and commit, in the same call; else return [] with the transaction open."""
        return self.call(_change_then_read, sql, read, params)

    def call(self, body: Body[T], *args: Any) -> T:
        """Run ``body(raw, *args)`` on the ``sqlite3`` connection, in the calling thread."""
        if self.closed:
            raise StoreClosed("the connection is closed")
        return body(self.raw, *args)

    def end(self, commit: bool) -> None:
        """End the open transaction (``end_transaction``), in the calling thread; nothing once
        closed (closing rolled back what was open)."""
        if not self.closed:
            end_transaction(self.raw, commit)

    def script(self, sql: str) -> None:
        """Run several statements (DDL) in one call."""
        if self.closed:
            raise StoreClosed("the connection is closed")
        self.raw.executescript(sql)

    def close(self) -> None:
        """Close the connection (an open transaction is rolled back); every call after raises
        StoreClosed."""
        self.closed = True
        self.raw.close()
