"""The conformance kit: pytest base classes that certify a store against the protocols."""

from runyard._async.testing.executions import AsyncExecutionStoreConformance
from runyard._async.testing.queue import AsyncWorkQueueConformance
from runyard._async.testing.state import AsyncStateStoreConformance

__all__ = [
    "AsyncExecutionStoreConformance",
    "AsyncStateStoreConformance",
    "AsyncWorkQueueConformance",
]
