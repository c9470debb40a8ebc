"""The PostgreSQL backend's I/O (psycopg 3): state store, work queue, execution store, executors."""

from runyard._async.postgres.executions import AsyncPostgresExecutionStore
from runyard._async.postgres.executor import (
    AsyncBoundExecutor,
    AsyncExecutor,
    AsyncPsycopgExecutor,
)
from runyard._async.postgres.queue import AsyncPostgresWorkQueue
from runyard._async.postgres.state import AsyncPostgresStateStore
from runyard._async.postgres.updates import AsyncPostgresSubscription, AsyncPostgresUpdates

__all__ = [
    "AsyncBoundExecutor",
    "AsyncExecutor",
    "AsyncPostgresExecutionStore",
    "AsyncPostgresStateStore",
    "AsyncPostgresSubscription",
    "AsyncPostgresUpdates",
    "AsyncPostgresWorkQueue",
    "AsyncPsycopgExecutor",
]
