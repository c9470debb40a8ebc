"""runyard: durable run state, work queues and execution stores, in async and sync twins."""

from runyard._async.memory import AsyncMemoryStateStore, AsyncMemoryWorkQueue
from runyard._async.pager import AsyncRunPager
from runyard._async.protocols import AsyncStateStore, AsyncWorkQueue
from runyard._sync.memory import MemoryStateStore, MemoryWorkQueue
from runyard._sync.pager import RunPager
from runyard._sync.protocols import StateStore, WorkQueue
from runyard.capabilities import StoreCapabilities, validate_capabilities
from runyard.clock import Clock, ManualClock, SystemClock
from runyard.errors import (
    ConfigurationError,
    LeaseLostError,
    PoolExhaustedError,
    QueueUnavailableError,
    RunLeaseHeldError,
    RunyardError,
    StateConflictError,
    StateInUseError,
    StateNotFoundError,
    StatePersistenceError,
    StoreCapabilityError,
    StoreConflict,
    StoreOutcomeUnknown,
    WorkItemNotFoundError,
)
from runyard.executions import (
    DEFAULT_TRACE_MAX,
    AsyncExecutionStore,
    AsyncMemoryExecutionStore,
    DueTimer,
    Emit,
    Event,
    Execution,
    ExecutionPage,
    ExecutionStore,
    ExecutionSummary,
    MemoryExecutionStore,
    OutboxEntry,
    SpawnEntry,
    SpawnIntent,
    TimerAction,
    TimerOp,
    TraceEntry,
    TraceStep,
)
from runyard.keys import InvalidIdentifierError
from runyard.models import (
    CounterDelta,
    DeadLetter,
    Lease,
    QueueStats,
    RunKey,
    RunLease,
    RunPage,
    RunRecord,
    SessionRecord,
    WorkItem,
)
from runyard.policy import QueuePolicy

__version__ = "0.1.0"

# Backends whose drivers are optional extras load on first use, so `import runyard` needs
# neither redis nor psycopg: `from runyard import AsyncRedisStateStore` imports runyard.redis.
_LAZY = {
    "runyard.redis": (
        "AsyncRedisStateStore",
        "AsyncRedisWorkQueue",
        "AsyncRedisStore",
        "RedisStateStore",
        "RedisWorkQueue",
        "RedisStore",
        "RedisStoreSettings",
    ),
    "runyard.postgres": (
        "AsyncPostgresStateStore",
        "AsyncPostgresWorkQueue",
        "AsyncPostgresExecutionStore",
        "PostgresStateStore",
        "PostgresWorkQueue",
        "PostgresExecutionStore",
        "PostgresStoreSettings",
        "StateTables",
        "EXPECTED_SCHEMA",
    ),
}
_LAZY_NAMES = {name: module for module, names in _LAZY.items() for name in names}


def __getattr__(name: str) -> object:
    module = _LAZY_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'runyard' has no attribute {name!r}")
    import importlib

    try:
        loaded = importlib.import_module(module)
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] == "runyard":
            raise
        extra = module.rpartition(".")[2]
        raise ImportError(
            f"runyard.{name} needs the {extra!r} extra, which is not installed ({exc}); "
            f"install it with: pip install 'runyard[{extra}]'",
            name=exc.name,
        ) from exc
    return getattr(loaded, name)


__all__ = [
    "DEFAULT_TRACE_MAX",
    "AsyncExecutionStore",
    "AsyncMemoryExecutionStore",
    "AsyncMemoryStateStore",
    "AsyncMemoryWorkQueue",
    "AsyncRunPager",
    "AsyncStateStore",
    "AsyncWorkQueue",
    "Clock",
    "ConfigurationError",
    "CounterDelta",
    "DeadLetter",
    "DueTimer",
    "Emit",
    "Event",
    "Execution",
    "ExecutionPage",
    "ExecutionStore",
    "ExecutionSummary",
    "InvalidIdentifierError",
    "Lease",
    "LeaseLostError",
    "ManualClock",
    "MemoryExecutionStore",
    "MemoryStateStore",
    "MemoryWorkQueue",
    "OutboxEntry",
    "PoolExhaustedError",
    "QueuePolicy",
    "QueueStats",
    "QueueUnavailableError",
    "RunKey",
    "RunLease",
    "RunLeaseHeldError",
    "RunPage",
    "RunPager",
    "RunRecord",
    "RunyardError",
    "SessionRecord",
    "SpawnEntry",
    "SpawnIntent",
    "StateConflictError",
    "StateInUseError",
    "StateNotFoundError",
    "StatePersistenceError",
    "StateStore",
    "StoreCapabilities",
    "StoreCapabilityError",
    "StoreConflict",
    "StoreOutcomeUnknown",
    "SystemClock",
    "TimerAction",
    "TimerOp",
    "TraceEntry",
    "TraceStep",
    "WorkItem",
    "WorkItemNotFoundError",
    "WorkQueue",
    "__version__",
    "validate_capabilities",
]
