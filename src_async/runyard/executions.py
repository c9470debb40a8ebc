"""The ExecutionStore: protocol twins, shared models and the memory reference store.

See docs/executions.md. The Redis and PostgreSQL execution stores live with their backends.
"""

from runyard._async.executions import AsyncExecutionStore
from runyard._async.memory.executions import AsyncMemoryExecutionStore
from runyard._sync.executions import ExecutionStore
from runyard._sync.memory.executions import MemoryExecutionStore
from runyard.execution_models import (
    DEFAULT_TRACE_MAX,
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

__all__ = [
    "DEFAULT_TRACE_MAX",
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
