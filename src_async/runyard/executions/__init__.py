"""The ExecutionStore: protocol twins, models, commit planning and the memory reference store.

See docs/executions.md. ``models`` and ``planning`` are shared by every backend and both twins;
the Redis and PostgreSQL execution stores live with their backends (``runyard.redis.RedisStore``,
``runyard.postgres.PostgresExecutionStore``).
"""

from typing import TYPE_CHECKING

from runyard._lazy import lazy_dir, lazy_exports
from runyard.executions.models import (
    DEFAULT_TRACE_MAX,
    MAX_TRACE_MAX,
    DueTimer,
    Emit,
    Event,
    Execution,
    ExecutionPage,
    ExecutionSummary,
    OutboxEntry,
    SpawnEntry,
    SpawnIntent,
    TimerAction,
    TimerOp,
    TraceEntry,
    TraceStep,
)

if TYPE_CHECKING:
    from runyard._async.execution_protocol import AsyncExecutionStore
    from runyard._async.memory.executions import AsyncMemoryExecutionStore
    from runyard._sync.execution_protocol import ExecutionStore
    from runyard._sync.memory.executions import MemoryExecutionStore

__all__ = [
    "DEFAULT_TRACE_MAX",
    "MAX_TRACE_MAX",
    "AsyncExecutionStore",
    "AsyncMemoryExecutionStore",
    "DueTimer",
    "Emit",
    "Event",
    "Execution",
    "ExecutionPage",
    "ExecutionStore",
    "ExecutionSummary",
    "MemoryExecutionStore",
    "OutboxEntry",
    "SpawnEntry",
    "SpawnIntent",
    "TimerAction",
    "TimerOp",
    "TraceEntry",
    "TraceStep",
]

_LAZY = {
    "AsyncExecutionStore": "runyard._async.execution_protocol",
    "ExecutionStore": "runyard._sync.execution_protocol",
    "AsyncMemoryExecutionStore": "runyard._async.memory.executions",
    "MemoryExecutionStore": "runyard._sync.memory.executions",
}
__getattr__ = lazy_exports(__name__, _LAZY)
__dir__ = lazy_dir(globals(), _LAZY)
