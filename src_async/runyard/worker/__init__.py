"""The worker, both twins: ``AsyncWorker`` (asyncio tasks) and ``Worker`` (threads).

The job, outcomes, hooks, counters and settings are shared; the loop is in
``runyard._async.worker`` and its generated twin ``runyard._sync.worker``. See docs/worker.md.
"""

from typing import TYPE_CHECKING

from runyard._lazy import lazy_dir, lazy_exports
from runyard.worker.job import Job
from runyard.worker.outcomes import (
    JobTimeoutError,
    PermanentFailure,
    WorkerHooks,
    WorkerStats,
    describe_failure,
)
from runyard.worker.settings import WorkerSettings

if TYPE_CHECKING:
    from runyard._async.worker import AsyncWorker
    from runyard._sync.worker import Worker

__all__ = [
    "AsyncWorker",
    "Job",
    "JobTimeoutError",
    "PermanentFailure",
    "Worker",
    "WorkerHooks",
    "WorkerSettings",
    "WorkerStats",
    "describe_failure",
]

_LAZY = {"AsyncWorker": "runyard._async.worker", "Worker": "runyard._sync.worker"}
__getattr__ = lazy_exports(__name__, _LAZY)
__dir__ = lazy_dir(globals(), _LAZY)
