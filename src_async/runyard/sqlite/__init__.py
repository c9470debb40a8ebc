"""The SQLite backend, both twins: the durable embedded default (``pip install runyard[sqlite]``).

The sync twin runs on the standard ``sqlite3``, the async twin on aiosqlite; both share one
file format. ``open(path, create_schema=True)`` creates the schema on a new file; otherwise
apply ``SQLITE_SCHEMA`` (or ``schema_sql(SqliteTables(...))``) yourself. See docs/sqlite.md.

The store classes are imported on first use: this package also holds the backend's non-I/O
modules, which the adapters import while they load.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

from runyard.sqlite.schema import (
    SCHEMA_VERSIONS,
    SQLITE_SCHEMA,
    SqliteTables,
    check_tables,
    schema_sql,
)
from runyard.sqlite.settings import DEFAULT_BUSY_TIMEOUT_SECONDS, SqliteStoreSettings

if TYPE_CHECKING:
    from runyard._async.sqlite import (
        AsyncSqliteStateStore,
        AsyncSqliteStore,
        AsyncSqliteWorkQueue,
    )
    from runyard._async.sqlite import connect as connect_async
    from runyard._sync.sqlite import SqliteStateStore, SqliteStore, SqliteWorkQueue, connect

__all__ = [
    "SCHEMA_VERSIONS",
    "SQLITE_SCHEMA",
    "AsyncSqliteStateStore",
    "AsyncSqliteStore",
    "AsyncSqliteWorkQueue",
    "SqliteStateStore",
    "SqliteStore",
    "SqliteStoreSettings",
    "SqliteTables",
    "SqliteWorkQueue",
    "connect",
    "connect_async",
    "create_schema",
    "schema_sql",
]

# public name -> (module, name in that module)
_LAZY = {
    "AsyncSqliteStateStore": ("runyard._async.sqlite", "AsyncSqliteStateStore"),
    "AsyncSqliteStore": ("runyard._async.sqlite", "AsyncSqliteStore"),
    "AsyncSqliteWorkQueue": ("runyard._async.sqlite", "AsyncSqliteWorkQueue"),
    "connect_async": ("runyard._async.sqlite", "connect"),
    "SqliteStateStore": ("runyard._sync.sqlite", "SqliteStateStore"),
    "SqliteStore": ("runyard._sync.sqlite", "SqliteStore"),
    "SqliteWorkQueue": ("runyard._sync.sqlite", "SqliteWorkQueue"),
    "connect": ("runyard._sync.sqlite", "connect"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'runyard.sqlite' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def create_schema(
    path: str | os.PathLike[str],
    tables: SqliteTables | None = None,
    *,
    busy_timeout_seconds: float = DEFAULT_BUSY_TIMEOUT_SECONDS,
) -> None:
    """Create runyard's tables in the SQLite file at ``path`` unless they exist (one
    transaction; safe to run from several processes at once).

    Raises ConfigurationError naming the file when it cannot be opened or is not a database,
    a retryable StatePersistenceError when another writer holds it past
    ``busy_timeout_seconds``."""
    from runyard._sync.sqlite import connect, create_schema

    check_tables(tables)  # before the file is made
    connection = connect(path, busy_timeout_seconds=busy_timeout_seconds)
    try:
        create_schema(connection, tables)
    finally:
        connection.close()
