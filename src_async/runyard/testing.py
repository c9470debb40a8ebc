"""The conformance kit, both twins: subclass a base class to certify your own store.

Needs pytest and pytest-asyncio (``pip install runyard[dev]`` or your own test dependencies).
"""

from runyard._async.testing import (
    AsyncExecutionStoreConformance,
    AsyncStateStoreConformance,
    AsyncWorkQueueConformance,
)
from runyard._async.testing.queue import KIT_POLICY
from runyard._sync.testing import (
    ExecutionStoreConformance,
    StateStoreConformance,
    WorkQueueConformance,
)

__all__ = [
    "KIT_POLICY",
    "AsyncExecutionStoreConformance",
    "AsyncStateStoreConformance",
    "AsyncWorkQueueConformance",
    "ExecutionStoreConformance",
    "StateStoreConformance",
    "WorkQueueConformance",
]
