"""The PostgreSQL backend, both twins: ``pip install runyard[postgres]`` (psycopg 3, psycopg_pool).

runyard never applies DDL: apply ``EXPECTED_SCHEMA`` (or ``schema_sql(StateTables(...))`` for
your own table names) with your migration tool; ``open()`` verifies it. See docs/postgres.md.

This folder holds what both twins share and is not I/O (settings, the schema and its SQL, the
statements in ``statements/``, error mapping, row decoding, the driver pair); the I/O is in
``runyard._async.postgres`` and its generated twin ``runyard._sync.postgres``.
"""

from typing import TYPE_CHECKING

from runyard._lazy import lazy_dir, lazy_exports
from runyard.postgres.schema import EXPECTED_SCHEMA, SCHEMA_VERSIONS, StateTables, schema_sql
from runyard.postgres.settings import PostgresStoreSettings

if TYPE_CHECKING:
    from runyard._async.postgres import (
        AsyncBoundExecutor,
        AsyncExecutor,
        AsyncPostgresExecutionStore,
        AsyncPostgresStateStore,
        AsyncPostgresUpdates,
        AsyncPostgresWorkQueue,
        AsyncPsycopgExecutor,
    )
    from runyard._async.postgres.wakeup import AsyncPostgresWakeup
    from runyard._sync.postgres import (
        BoundExecutor,
        Executor,
        PostgresExecutionStore,
        PostgresStateStore,
        PostgresUpdates,
        PostgresWorkQueue,
        PsycopgExecutor,
    )
    from runyard._sync.postgres.wakeup import PostgresWakeup

__all__ = [
    "EXPECTED_SCHEMA",
    "SCHEMA_VERSIONS",
    "AsyncBoundExecutor",
    "AsyncExecutor",
    "AsyncPostgresExecutionStore",
    "AsyncPostgresStateStore",
    "AsyncPostgresUpdates",
    "AsyncPostgresWakeup",
    "AsyncPostgresWorkQueue",
    "AsyncPsycopgExecutor",
    "BoundExecutor",
    "Executor",
    "PostgresExecutionStore",
    "PostgresStateStore",
    "PostgresStoreSettings",
    "PostgresUpdates",
    "PostgresWakeup",
    "PostgresWorkQueue",
    "PsycopgExecutor",
    "StateTables",
    "schema_sql",
]

_ASYNC = (
    "AsyncBoundExecutor",
    "AsyncExecutor",
    "AsyncPostgresExecutionStore",
    "AsyncPostgresStateStore",
    "AsyncPostgresUpdates",
    "AsyncPostgresWorkQueue",
    "AsyncPsycopgExecutor",
)
_LAZY = {
    **dict.fromkeys(_ASYNC, "runyard._async.postgres"),
    **{name.removeprefix("Async"): "runyard._sync.postgres" for name in _ASYNC},
    "AsyncPostgresWakeup": "runyard._async.postgres.wakeup",
    "PostgresWakeup": "runyard._sync.postgres.wakeup",
}
__getattr__ = lazy_exports(__name__, _LAZY, extra="postgres")
__dir__ = lazy_dir(globals(), _LAZY)
