"""What the SQLite stores share: opening the file, transactions, verify, and time."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
from types import TracebackType
from typing import Any, ClassVar, TypeVar

from typing_extensions import Self

from runyard._async.closing import AsyncClosing
from runyard._async.sqlite.connecting import connect_file, create_tables
from runyard.capabilities import StoreCapabilities
from runyard.clock import Clock
from runyard.errors import ConfigurationError, RunyardError
from runyard.sqlite.errors import Kind, closed_error, map_error, open_error
from runyard.sqlite.flavours import (
    AsyncConnection,
    Body,
    Row,
    asks_read_only,
    in_transaction,
    probe_write,
)
from runyard.sqlite.options import check_store_options
from runyard.sqlite.schema import DATABASE_NOW, SqliteTables
from runyard.sqlite.schema_checks import read_objects, schema_refusal, verify_statements
from runyard.sqlite.settings import (
    DEFAULT_BUSY_TIMEOUT_SECONDS,
    SqliteStoreSettings,
    check_connection_options,
    check_open_flag,
    is_memory_path,
)
from runyard.validation import DEFAULT_MAX_VALUE_BYTES

__all__ = ["Source"]

Source = str | os.PathLike[str] | AsyncConnection
T = TypeVar("T")


# The driver begins the transaction itself (BEGIN IMMEDIATE) before these; not before a read.
_DRIVER_BEGINS = ("INSERT", "UPDATE", "DELETE", "REPLACE")


class _AsyncTransaction:
    """One transaction of an adapter, under its connection's lock.

    A write transaction is ``BEGIN IMMEDIATE`` (sent before a first read, else opened by the
    driver before the first write, in the same call) ... ``COMMIT``, rolled back on any error;
    a read transaction runs single statements. ``:now`` is the injected clock's time, or the
    database's: pinned by ``now()`` or ``pin()`` so that every statement after sees the same.
    """

    def __init__(self, adapter: _AsyncSqliteAdapter, *, write: bool) -> None:
        self._adapter = adapter
        self._connection = adapter.connection
        self._write = write
        self._begun = False
        # A call sent to the driver whose answer never came back here (the caller cancelled
        # while it waited): the driver still runs it, later; it may begin a transaction.
        self._pending = False
        clock = adapter.clock
        self._now: float | None = None if clock is None else float(clock.now())

    async def __aenter__(self) -> Self:
        await self._connection.lock.__aenter__()
        try:
            if self._connection.closed:
                raise closed_error(self._adapter._kind, loop_ended=self._connection.loop_ended)
            if not self._adapter._verified:
                await self._adapter._check_schema()
        except BaseException:
            await self._connection.lock.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            # Whether a transaction is open can be read here only when no call of this one is
            # still to run on the driver's thread; else the end is sent there, after that call.
            if self._pending or self._connection.in_transaction:
                try:
                    # Committed only when the body ended normally; never skipped: the end is
                    # waited for even when this task is cancelled (see the connection's end()).
                    await self._connection.end(exc is None and not self._pending)
                except Exception as driver_error:
                    error = self._adapter._mapped(driver_error)
                    if error is None:
                        raise
                    raise error from driver_error
        finally:
            await self._connection.lock.__aexit__(None, None, None)

    async def _send(
        self, sql: str, params: Any, *, last: bool = False, read: str | None = None
    ) -> list[Row]:
        self._pending = True  # until the driver answers (a cancelled wait leaves it queued)
        try:
            if read is not None:
                rows = await self._connection.change_then_read(sql, read, params)
            elif last:
                rows = await self._connection.fetch_then_commit(sql, params)
            else:
                rows = await self._connection.fetch(sql, params)
        except Exception as exc:
            self._pending = False  # the driver ran it and answered with this error
            error = self._adapter._mapped(exc)
            if error is None:
                raise
            raise error from exc
        self._pending = False
        return rows

    async def fetch(self, name: str, **params: Any) -> list[Row]:
        """Run the adapter's statement ``name`` with named ``params``; return its rows."""
        return await self._fetch(name, params, last=False)

    async def finish(self, name: str, **params: Any) -> list[Row]:
        """Run the statement ``name`` and, when it returns rows, commit in the same call: the
        transaction is over (a write that returns nothing leaves it open to explain why)."""
        return await self._fetch(name, params, last=self._write)

    async def finish_read(self, name: str, read: str, **params: Any) -> list[Row]:
        """Run the write ``name`` (a statement that returns nothing) and, when it changed a row,
        the read ``read`` with the same ``params`` and the commit, in the same call: its rows,
        the transaction over. When it changed nothing, return [] and leave the transaction
        open to explain why."""
        self._begun = True  # the driver begins the transaction before a write, if not begun
        sql = self._adapter._sql
        return await self._send(sql[name], params, read=sql[read])

    async def _fetch(self, name: str, params: dict[str, Any], *, last: bool) -> list[Row]:
        sql = self._adapter._sql[name]
        if self._write and not self._begun:
            self._begun = True
            if not sql.startswith(_DRIVER_BEGINS):
                await self._send("BEGIN IMMEDIATE", ())
        return await self._send(sql, params, last=last)

    def stamp(self) -> float | None:
        """The time to bind as ``:now``: the clock's or the pinned one; None lets each
        statement read the database's."""
        return self._now

    def pin(self, now: float) -> float:
        """Use ``now`` (a time a statement of this transaction returned) from here on."""
        if self._now is None:
            self._now = float(now)
        return self._now

    async def now(self) -> float:
        """The injected clock's time, else the database's (read once, then pinned)."""
        if self._now is None:
            if self._write and not self._begun:
                self._begun = True
                await self._send("BEGIN IMMEDIATE", ())
            self._now = float((await self._send(f"SELECT {DATABASE_NOW}", ()))[0][0])
        return self._now


class _AsyncSqliteAdapter(AsyncClosing):
    """The plumbing of a SQLite adapter; subclasses add the protocol's methods.

    Build it with ``await open(path)`` (which also creates the schema when ``create_schema``
    and verifies it), or on a connection from ``connect(path)`` that several stores share.
    """

    _kind: ClassVar[Kind]
    capabilities: StoreCapabilities

    @classmethod
    def _check_options(cls, options: dict[str, Any]) -> None:
        """Refuse an option ``__init__`` would refuse (``check_store_options``): ``open``
        asks before it opens (or creates) the file, ``__init__`` again."""
        check_store_options(cls, options)

    def __init__(
        self,
        connection: AsyncConnection,
        *,
        tables: SqliteTables | None = None,
        clock: Clock | None = None,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        busy_timeout_seconds: float | None = None,
        close_connection: bool = False,
    ) -> None:
        """``busy_timeout_seconds`` is the connection's (set by ``connect``): another value is
        refused (ConfigurationError), as it would be ignored."""
        if not isinstance(connection, AsyncConnection):
            raise ConfigurationError(
                f"a SQLite store is built on a connection from runyard.sqlite connect(path), "
                f"not {type(connection).__name__}; or call open(path)"
            )
        type(self)._check_options({"tables": tables, "max_value_bytes": max_value_bytes})
        check_connection_options(connection, None, busy_timeout_seconds)
        self.connection = connection
        self.tables = tables or SqliteTables()
        self.clock = clock
        self.max_value_bytes = max_value_bytes
        self.busy_timeout_seconds = connection.busy_timeout_seconds
        self._owns_connection = close_connection
        self._verified = False
        self._sql: dict[str, str] = {}
        if is_memory_path(connection.path):
            self.capabilities = dataclasses.replace(
                type(self).capabilities, deployment="single_process"
            )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(path={self.connection.path!r}, tables={self.tables!r})"

    @classmethod
    async def open(
        cls,
        source: Source,
        *,
        create_schema: bool = False,
        durable: bool | None = None,
        busy_timeout_seconds: float | None = None,
        **options: Any,
    ) -> Self:
        """Open the store on a path (owning the connection) or on a shared connection.

        On a path, ``durable`` (default True) and ``busy_timeout_seconds`` (default 5) open the
        connection; a shared connection has its own, set by ``connect``: another value given
        here is refused (ConfigurationError naming it), as it would be ignored. Creates
        runyard's schema first when ``create_schema``, then verifies it. Raises
        ConfigurationError naming the repair when a table is missing or at another version,
        and this store's retryable error (QueueUnavailableError for a queue, else
        StatePersistenceError "contended") when another writer holds the file past the busy
        timeout.
        """
        check_open_flag(create_schema, "create_schema")
        if durable is not None:
            check_open_flag(durable, "durable")
        cls._check_options(options)
        if isinstance(source, AsyncConnection):
            check_connection_options(source, durable, busy_timeout_seconds)
            connection, owned = source, False
        else:
            connection = await connect_file(
                source,
                options.get("tables") or SqliteTables(),
                durable=True if durable is None else durable,
                busy_timeout_seconds=(
                    DEFAULT_BUSY_TIMEOUT_SECONDS
                    if busy_timeout_seconds is None
                    else busy_timeout_seconds
                ),
                create=create_schema,
                kind=cls._kind,
            )
            owned = True
        try:
            adapter = cls(connection, close_connection=owned, **options)
            if create_schema:
                await create_tables(connection, adapter.tables, cls._kind)
            await adapter.verify()
            if not (is_memory_path(connection.path) or asks_read_only(connection.path)):
                schema = adapter.tables.schema_table
                probe = f'UPDATE "{schema}" SET version = version WHERE 0'
                await adapter._call(probe_write, probe)  # a read-only file, refused now
        except BaseException as exc:
            if owned:
                await connection.close()
            if isinstance(exc, sqlite3.Error):  # reading the catalog (a file that is no database)
                path, busy = connection.path, connection.busy_timeout_seconds
                raise open_error(exc, path, busy, cls._kind) from exc
            raise
        return adapter

    @classmethod
    async def from_settings(cls, settings: SqliteStoreSettings, **options: Any) -> Self:
        """Open the store on ``settings.path`` with its tables, pragmas and limits (see open)."""
        options.setdefault("tables", settings.tables())
        options.setdefault("max_value_bytes", settings.max_value_bytes)
        return await cls.open(
            settings.path,
            create_schema=settings.create_schema,
            durable=settings.durable,
            busy_timeout_seconds=settings.busy_timeout_seconds,
            **options,
        )

    # -- verify ------------------------------------------------------------------------------
    async def verify(self) -> None:
        """Check that the tables this store needs exist at the schema version it was written for.

        Raises ConfigurationError naming the missing table or the version and the repair.
        """
        async with self.connection.lock:
            if self.connection.closed:
                raise closed_error(self._kind, loop_ended=self.connection.loop_ended)
            await self._check_schema()

    async def _check_schema(self) -> None:
        where = self.connection.path
        tables_sql, versions_sql = verify_statements(self.tables)
        present, texts = read_objects(await self.connection.fetch(tables_sql))
        versions = None
        if self.tables.schema_table in present:
            versions = {str(r[0]): int(r[1]) for r in await self.connection.fetch(versions_sql)}
        refusal = schema_refusal(self.tables, self._kind, present, versions, where, texts)
        if refusal is not None:
            raise ConfigurationError(refusal)
        self._verified = True

    # -- transactions ------------------------------------------------------------------------
    def _now(self) -> float | None:
        """The injected clock's time, or None: the database's, read by the statements."""
        return None if self.clock is None else float(self.clock.now())

    def _write(self) -> _AsyncTransaction:
        return _AsyncTransaction(self, write=True)

    def _read(self) -> _AsyncTransaction:
        return _AsyncTransaction(self, write=False)

    async def _transact(self, body: Body[T], *args: Any) -> T:
        """Run ``body(raw, *args)`` as one ``BEGIN IMMEDIATE`` transaction in one trip to the
        driver (see ``in_transaction``), under the connection's lock; driver errors mapped."""
        result: T = await self._call(in_transaction, body, *args)
        return result

    async def _view(self, body: Body[T], *args: Any) -> T:
        """Run the read-only ``body(raw, *args)`` in one trip to the driver, under the lock."""
        return await self._call(body, *args)

    async def _call(self, body: Body[T], *args: Any) -> T:
        async with self.connection.lock:
            if self.connection.closed:
                raise closed_error(self._kind, loop_ended=self.connection.loop_ended)
            if not self._verified:
                await self._check_schema()
            try:
                return await self.connection.call(body, *args)
            except Exception as exc:
                error = self._mapped(exc)
                if error is None:
                    raise
                raise error from exc

    def _mapped(self, exc: BaseException) -> RunyardError | None:
        """``map_error`` for this store: its kind, tables and file, and the busy timeout its
        connection waits (a shared connection's own, whatever this store was given)."""
        return map_error(
            exc,
            self._kind,
            self.connection.busy_timeout_seconds,
            tables=self.tables,
            where=self.connection.path,
        )

    # -- lifecycle ---------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Close the connection when this store opened it (``open(path)``); else nothing."""
        if self._owns_connection:
            self._owns_connection = False
            await self.connection.close()
