"""The PostgreSQL backend, both twins: ``pip install runyard[postgres]`` (psycopg 3, psycopg_pool).

runyard never applies DDL: apply ``EXPECTED_SCHEMA`` (or ``schema_sql(StateTables(...))`` for
your own table names) with your migration tool; ``open()`` verifies it. See docs/postgres.md.
"""

from runyard._async.postgres import (
    AsyncBoundExecutor,
    AsyncExecutor,
    AsyncPostgresStateStore,
    AsyncPostgresWorkQueue,
    AsyncPsycopgExecutor,
)
from runyard._async.postgres.executions import AsyncPostgresExecutionStore
from runyard._postgres_schema import EXPECTED_SCHEMA, SCHEMA_VERSIONS, StateTables, schema_sql
from runyard._postgres_settings import PostgresStoreSettings
from runyard._sync.postgres import (
    BoundExecutor,
    Executor,
    PostgresStateStore,
    PostgresWorkQueue,
    PsycopgExecutor,
)
from runyard._sync.postgres.executions import PostgresExecutionStore

__all__ = [
    "EXPECTED_SCHEMA",
    "SCHEMA_VERSIONS",
    "AsyncBoundExecutor",
    "AsyncExecutor",
    "AsyncPostgresExecutionStore",
    "AsyncPostgresStateStore",
    "AsyncPostgresWorkQueue",
    "AsyncPsycopgExecutor",
    "BoundExecutor",
    "Executor",
    "PostgresExecutionStore",
    "PostgresStateStore",
    "PostgresStoreSettings",
    "PostgresWorkQueue",
    "PsycopgExecutor",
    "StateTables",
    "schema_sql",
]
