"""The psycopg driver classes, as async/sync pairs.

The async PostgreSQL adapters name the left-hand member; the twin generator strips ``Async``,
so the sync twin names the right-hand one (``AsyncConnectionPool`` -> ``ConnectionPool``).
"""

from __future__ import annotations

from psycopg import AsyncConnection, AsyncRawCursor, Connection, RawCursor
from psycopg.pq import ExecStatus, TransactionStatus
from psycopg_pool import AsyncConnectionPool, ConnectionPool

__all__ = [
    "AsyncConnection",
    "AsyncConnectionPool",
    "AsyncRawCursor",
    "Connection",
    "ConnectionPool",
    "ExecStatus",
    "RawCursor",
    "TransactionStatus",
]
