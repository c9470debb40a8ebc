"""The worker's I/O: the claim -> handle -> settle loop."""

from runyard._async.worker.loop import AsyncWorker

__all__ = ["AsyncWorker"]
