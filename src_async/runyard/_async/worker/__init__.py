"""The worker's I/O: the claim -> handle -> settle loop, its store calls and wake-ups."""

from runyard._async.worker.loop import AsyncWorker
from runyard._async.worker.wakeup import AsyncConditionWakeup, AsyncWakeup, wakeup_for

__all__ = [
    "AsyncConditionWakeup",
    "AsyncWakeup",
    "AsyncWorker",
    "wakeup_for",
]
