"""What the worker's adopt tests share: the jobs' ends as a hook, and a worker of two jobs that
neither polls nor reaps within a test."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from runyard import AsyncMemoryWorkQueue
from runyard._async.worker import AsyncWorker
from runyard._flavours import AsyncEvent
from runyard.worker import Job, WorkerHooks

__all__ = ["Endings", "adopt_race_worker"]


class Endings:
    """The worker's ``on_job_end`` hook for these tests: each end as "n:outcome" (n from the
    job's payload), ``all`` set once ``expected`` jobs have ended, and ``watched`` once job
    ``watch`` has."""

    def __init__(self, expected: int, *, watch: int | None = None) -> None:
        self.ended: list[str] = []
        self.expected, self.watch = expected, watch
        self.all, self.watched = AsyncEvent(), AsyncEvent()

    def __call__(self, job: Job, outcome: str) -> None:
        self.ended.append(f"{job.payload['n']}:{outcome}")
        if job.payload["n"] == self.watch:
            self.watched.set()
        if len(self.ended) == self.expected:
            self.all.set()


def adopt_race_worker(
    queue: AsyncMemoryWorkQueue,
    handler: Callable[[Job], Awaitable[None]],
    endings: Endings,
    **options: Any,
) -> AsyncWorker:
    """A worker of concurrency 2, unbatched unless told, reporting its jobs' ends to
    ``endings``, that neither polls nor reaps within a test."""
    settings: dict[str, Any] = {"concurrency": 2, "batched": False}
    return AsyncWorker(
        queue,
        handler,
        hooks=WorkerHooks(on_job_end=endings),
        backstop_seconds=60,
        reap_seconds=600,
        **{**settings, **options},
    )
