"""The SQLite backend, both twins: the durable embedded default (``pip install runyard[sqlite]``).

The sync twin runs on the standard ``sqlite3``, the async twin on aiosqlite; both share one
file format. ``open(path, create_schema=True)`` creates the schema on a new file; otherwise
apply ``SQLITE_SCHEMA`` (or ``schema_sql(SqliteTables(...))``) yourself. See docs/sqlite.md.
"""

from __future__ import annotations

import os

from runyard._async.sqlite import (
    AsyncSqliteStateStore,
    AsyncSqliteStore,
    AsyncSqliteWorkQueue,
)
from runyard._async.sqlite import connect as connect_async
from runyard._sync.sqlite import SqliteStateStore, SqliteStore, SqliteWorkQueue, connect
from runyard._sync.sqlite import create_schema as _create_on
from runyard.sqlite.schema import SCHEMA_VERSIONS, SQLITE_SCHEMA, SqliteTables, schema_sql
from runyard.sqlite.settings import SqliteStoreSettings

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


def create_schema(path: str | os.PathLike[str], tables: SqliteTables | None = None) -> None:
    """Create runyard's tables in the SQLite file at ``path`` unless they exist (one
    transaction; safe to run from several processes at once)."""
    connection = connect(path)
    try:
        _create_on(connection, tables)
    finally:
        connection.close()
