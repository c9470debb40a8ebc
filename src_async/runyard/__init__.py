"""runyard: durable run state, work queues and execution stores, in async and sync twins.

The top level holds the protocols, models, errors, policy, clock and the memory stores. The
backends are ``runyard.redis`` and ``runyard.postgres``; the execution models are in
``runyard.executions``; the worker is ``runyard.worker``; the conformance kit, capabilities and
certification are in ``runyard.testing``.
"""

from runyard._async.execution_protocol import AsyncExecutionStore
from runyard._async.memory import (
    AsyncMemoryExecutionStore,
    AsyncMemoryStateStore,
    AsyncMemoryWorkQueue,
)
from runyard._async.memory.updates import AsyncMemoryUpdates
from runyard._async.pager import AsyncRunPager
from runyard._async.protocols import AsyncBatchedWorkQueue, AsyncStateStore, AsyncWorkQueue
from runyard._async.yard import AsyncYard
from runyard._lazy import moved_names
from runyard._sync.execution_protocol import ExecutionStore
from runyard._sync.memory import MemoryExecutionStore, MemoryStateStore, MemoryWorkQueue
from runyard._sync.memory.updates import MemoryUpdates
from runyard._sync.pager import RunPager
from runyard._sync.protocols import BatchedWorkQueue, StateStore, WorkQueue
from runyard._sync.yard import Yard
from runyard.clock import Clock, ManualClock, SystemClock
from runyard.errors import (
    ConfigurationError,
    InvalidArgumentError,
    ItemLeasedError,
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
from runyard.keys import InvalidIdentifierError
from runyard.models import (
    CounterDelta,
    DeadLetter,
    Lease,
    NewItem,
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

# Names that lived at the top level before the layout had one package per part: they still
# resolve, with a DeprecationWarning that names their home.
_MOVED = {
    **dict.fromkeys(
        (
            "AsyncRedisStateStore",
            "AsyncRedisWorkQueue",
            "AsyncRedisStore",
            "RedisStateStore",
            "RedisWorkQueue",
            "RedisStore",
            "RedisStoreSettings",
        ),
        "runyard.redis",
    ),
    **dict.fromkeys(
        (
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
        "runyard.postgres",
    ),
    **dict.fromkeys(
        (
            "DEFAULT_TRACE_MAX",
            "DueTimer",
            "Emit",
            "Event",
            "Execution",
            "ExecutionPage",
            "ExecutionSummary",
            "OutboxEntry",
            "SpawnEntry",
            "SpawnIntent",
            "TimerAction",
            "TimerOp",
            "TraceEntry",
            "TraceStep",
        ),
        "runyard.executions",
    ),
    **dict.fromkeys(("StoreCapabilities", "validate_capabilities"), "runyard.capabilities"),
}
__getattr__ = moved_names(__name__, _MOVED)

__all__ = [
    "AsyncBatchedWorkQueue",
    "AsyncExecutionStore",
    "AsyncMemoryExecutionStore",
    "AsyncMemoryStateStore",
    "AsyncMemoryUpdates",
    "AsyncMemoryWorkQueue",
    "AsyncRunPager",
    "AsyncStateStore",
    "AsyncWorkQueue",
    "AsyncYard",
    "BatchedWorkQueue",
    "Clock",
    "ConfigurationError",
    "CounterDelta",
    "DeadLetter",
    "ExecutionStore",
    "InvalidArgumentError",
    "InvalidIdentifierError",
    "ItemLeasedError",
    "Lease",
    "LeaseLostError",
    "ManualClock",
    "MemoryExecutionStore",
    "MemoryStateStore",
    "MemoryUpdates",
    "MemoryWorkQueue",
    "NewItem",
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
    "StateConflictError",
    "StateInUseError",
    "StateNotFoundError",
    "StatePersistenceError",
    "StateStore",
    "StoreCapabilityError",
    "StoreConflict",
    "StoreOutcomeUnknown",
    "SystemClock",
    "WorkItem",
    "WorkItemNotFoundError",
    "WorkQueue",
    "Yard",
    "__version__",
]
