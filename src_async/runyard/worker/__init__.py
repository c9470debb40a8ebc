"""The worker, both twins: ``AsyncWorker`` (asyncio) and ``Worker`` (threads).

The handler outcomes and reports are shared (``outcomes``); the loop is in
``runyard._async.worker`` and its generated twin ``runyard._sync.worker``.
"""

from typing import TYPE_CHECKING

from runyard._lazy import lazy_dir, lazy_exports
from runyard.worker.outcomes import PermanentFailure, WorkerReport

if TYPE_CHECKING:
    from runyard._async.worker import AsyncWorker
    from runyard._sync.worker import Worker

__all__ = ["AsyncWorker", "PermanentFailure", "Worker", "WorkerReport"]

_LAZY = {"AsyncWorker": "runyard._async.worker", "Worker": "runyard._sync.worker"}
__getattr__ = lazy_exports(__name__, _LAZY)
__dir__ = lazy_dir(globals(), _LAZY)
