"""Opening an SQLite file for the stores: the connection (WAL, the busy timeout, durability)
and runyard's schema in it."""

from __future__ import annotations

import os
import sqlite3

from runyard.errors import ConfigurationError
from runyard.sqlite.errors import Kind, StoreClosed, closed_error, open_error
from runyard.sqlite.flavours import AsyncConnection, file_missing
from runyard.sqlite.schema import (
    SqliteTables,
    check_tables,
    create_script,
    missing_schema_message,
)
from runyard.sqlite.schema_checks import foreign_refusal, verify_statements
from runyard.sqlite.settings import (
    DEFAULT_BUSY_TIMEOUT_SECONDS,
    check_busy_timeout,
    check_open_flag,
    check_path,
    check_wal,
)

__all__ = ["connect", "connect_file", "connect_yard", "create_schema", "create_tables"]


async def connect(
    path: str | os.PathLike[str],
    *,
    durable: bool = True,
    busy_timeout_seconds: float = DEFAULT_BUSY_TIMEOUT_SECONDS,
    create: bool = True,
) -> AsyncConnection:
    """Open the database at ``path`` in WAL mode with ``synchronous=FULL`` (``NORMAL`` when not
    ``durable``) and the busy timeout; several stores may share the returned connection.

    ``path`` is a file (made when missing unless ``create`` is false), ``:memory:``, or an
    SQLite URI (``file:...``, opened as one). Raises ConfigurationError, before opening
    anything, for a busy timeout that is not a number of seconds in (0, 3600] or an empty
    path; and for a file that cannot be opened, is not a database, or does not take WAL
    (naming the file); a retryable StatePersistenceError when the file is locked.
    """
    return await _connect(
        path,
        durable=durable,
        busy_timeout_seconds=busy_timeout_seconds,
        create=create,
        kind="state",
    )


async def _connect(
    path: str | os.PathLike[str],
    *,
    durable: bool,
    busy_timeout_seconds: float,
    create: bool,
    kind: Kind,
    schema: SqliteTables | None = None,
    empty_ok: bool = False,
) -> AsyncConnection:
    """``connect``, raising ``kind``'s retryable error for a locked file. With ``schema``, a
    database without its schema table (unless it has no object at all and ``empty_ok``) is
    refused before WAL is set: switching another application's database to WAL rewrites its
    header and leaves -wal and -shm files beside it."""
    busy = check_busy_timeout(busy_timeout_seconds)
    where = check_path(path)
    check_open_flag(durable, "durable")
    check_open_flag(create, "create")
    try:
        connection = await AsyncConnection.connect(where, busy_timeout_seconds=busy, create=create)
    except sqlite3.Error as exc:
        raise open_error(exc, where, busy, kind) from exc
    try:
        if schema is not None:
            await _require_schema(connection, schema, where, empty_ok)
        (mode,) = (await connection.fetch("PRAGMA journal_mode = WAL"))[0]
        check_wal(where, mode)
        await connection.fetch(f"PRAGMA synchronous = {'FULL' if durable else 'NORMAL'}")
        connection.durable = durable
    except BaseException as exc:
        await connection.close()
        if isinstance(exc, sqlite3.Error):
            raise open_error(exc, where, busy, kind) from exc
        raise
    return connection


async def _require_schema(
    connection: AsyncConnection, tables: SqliteTables, where: str, empty_ok: bool
) -> None:
    """Refuse a database without ``tables``' schema (see ``foreign_refusal``); reads only."""
    rows = await connection.fetch(verify_statements(tables)[0])
    refusal = foreign_refusal(rows, tables, where, empty_ok)
    if refusal is not None:
        raise ConfigurationError(refusal)


async def connect_yard(path: str, tables: SqliteTables, *, durable: bool) -> AsyncConnection:
    """``connect`` for ``Yard.from_url``: a new, empty database is taken (the yard creates the
    schema in it); one holding other objects but not ``tables``' schema table is refused
    before anything is written to it."""
    return await _connect(
        path,
        durable=durable,
        busy_timeout_seconds=DEFAULT_BUSY_TIMEOUT_SECONDS,
        create=True,
        kind="state",
        schema=tables,
        empty_ok=True,
    )


async def create_schema(connection: AsyncConnection, tables: SqliteTables | None = None) -> None:
    """Create runyard's tables on ``connection`` unless they exist, in one transaction.

    Raises a retryable StatePersistenceError when another writer holds the file past the busy
    timeout, ConfigurationError when the file refuses the schema (naming it) or ``tables`` is
    not a SqliteTables."""
    await create_tables(connection, check_tables(tables), "state")


async def create_tables(
    connection: AsyncConnection, tables: SqliteTables | None, kind: Kind
) -> None:
    """``create_schema`` for a ``kind`` store's ``open``: its errors are that store's, as every
    call of it raises them (a locked file is QueueUnavailableError for a queue, "contended"
    StatePersistenceError for the state store and the executions)."""
    async with connection.lock:
        try:
            await connection.script(create_script(tables))
        except BaseException as exc:
            # On the driver's thread, after the script (still running there if this task was
            # cancelled): a transaction it left open is rolled back, not left holding the lock.
            await connection.end(False)
            if isinstance(exc, sqlite3.Error):
                path, busy = connection.path, connection.busy_timeout_seconds
                raise open_error(exc, path, busy, kind) from exc
            if isinstance(exc, StoreClosed):
                raise closed_error(kind, loop_ended=exc.loop_ended) from exc
            raise


async def connect_file(
    source: str | os.PathLike[str],
    tables: SqliteTables,
    *,
    durable: bool,
    busy_timeout_seconds: float,
    create: bool,
    kind: Kind,
) -> AsyncConnection:
    """``connect`` for a ``kind`` store's ``open`` (its errors that store's): without
    ``create``, a file that does not exist (in a directory that does) is refused as a file
    without the schema, as verify would, and is not made (the connection is ``mode=rw``: a
    file removed meanwhile is refused too, as one not opened)."""
    check_busy_timeout(busy_timeout_seconds)
    where = check_path(source)
    if not create and file_missing(where):
        raise ConfigurationError(
            missing_schema_message(f"table {tables.schema_table} does not exist", where, tables)
        )
    return await _connect(
        source,
        durable=durable,
        busy_timeout_seconds=busy_timeout_seconds,
        create=create,
        kind=kind,
        schema=None if create else tables,
    )
