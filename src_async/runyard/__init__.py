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

__all__ = [
    "AsyncMemoryStateStore",
    "AsyncMemoryWorkQueue",
    "AsyncRunPager",
    "AsyncStateStore",
    "AsyncWorkQueue",
    "Clock",
    "ConfigurationError",
    "CounterDelta",
    "DeadLetter",
    "InvalidIdentifierError",
    "Lease",
    "LeaseLostError",
    "ManualClock",
    "MemoryStateStore",
    "MemoryWorkQueue",
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
    "StoreCapabilities",
    "StoreCapabilityError",
    "StoreConflict",
    "StoreOutcomeUnknown",
    "SystemClock",
    "WorkItem",
    "WorkItemNotFoundError",
    "WorkQueue",
    "__version__",
    "validate_capabilities",
]
