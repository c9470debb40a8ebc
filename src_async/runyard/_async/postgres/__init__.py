"""The PostgreSQL backend (psycopg 3): state store, work queue and their executors."""

from runyard._async.postgres.executor import (
    AsyncBoundExecutor,
    AsyncExecutor,
    AsyncPsycopgExecutor,
)
from runyard._async.postgres.queue import AsyncPostgresWorkQueue
from runyard._async.postgres.state import AsyncPostgresStateStore

__all__ = [
    "AsyncBoundExecutor",
    "AsyncExecutor",
    "AsyncPostgresStateStore",
    "AsyncPostgresWorkQueue",
    "AsyncPsycopgExecutor",
]
