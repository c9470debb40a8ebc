"""The SQLite backend (aiosqlite in this twin): state store, work queue and execution store."""

from runyard._async.sqlite.connecting import connect, create_schema
from runyard._async.sqlite.executions import AsyncSqliteStore
from runyard._async.sqlite.queue import AsyncSqliteWorkQueue
from runyard._async.sqlite.state import AsyncSqliteStateStore

__all__ = [
    "AsyncSqliteStateStore",
    "AsyncSqliteStore",
    "AsyncSqliteWorkQueue",
    "connect",
    "create_schema",
]
