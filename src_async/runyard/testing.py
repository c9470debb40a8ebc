"""The conformance kit, both twins: subclass a base class to certify your own store.

Also the capability declaration (``StoreCapabilities``) and ``certify``/``validate_capabilities``
(the same objects as in ``runyard.capabilities``, which needs no pytest).

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
from runyard.capabilities import StoreCapabilities, certify, validate_capabilities
from runyard.twin_drivers import BlockingTwin, LoopTwin, TwinDriver

__all__ = [
    "KIT_POLICY",
    "AsyncExecutionStoreConformance",
    "AsyncStateStoreConformance",
    "AsyncWorkQueueConformance",
    "BlockingTwin",
    "ExecutionStoreConformance",
    "LoopTwin",
    "StateStoreConformance",
    "StoreCapabilities",
    "TwinDriver",
    "WorkQueueConformance",
    "certify",
    "validate_capabilities",
]
