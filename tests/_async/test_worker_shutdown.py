"""The worker's shutdown on the memory queue: a stop lets in-flight jobs finish and claims
nothing more, jobs past the grace are handed back without burning an attempt, and a hand-back
the store refuses ends after handback_seconds."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import pytest
from runyard import ManualClock, QueuePolicy
from runyard._async.worker import AsyncWorker
from runyard._flavours import AsyncEvent, async_gather
from runyard.errors import QueueUnavailableError, RunyardError
from runyard.models import Lease
from runyard.worker import Job

from tests._async.memory_worker_spy import SAFETY, SpyQueue, make_queue


@pytest.mark.asyncio
@pytest.mark.parametrize("batched", [True, False])
async def test_stop_lets_in_flight_jobs_finish_and_claims_nothing_more(batched: bool) -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    for n in range(2):
        await queue.enqueue("acme", {"n": n})
    both, release = AsyncEvent(), AsyncEvent()
    started: list[int] = []

    async def handler(job: Job) -> None:
        started.append(job.payload["n"])
        if len(started) == 2:
            both.set()
        await release.wait(SAFETY)

    worker = AsyncWorker(queue, handler, clock=clock, batched=batched, concurrency=2)

    async def drive() -> None:
        assert await both.wait(SAFETY)
        await queue.enqueue("acme", {"n": 2})
        worker.stop()
        release.set()

    await async_gather([worker.run, drive])
    stats = worker.stats()
    assert (stats.completed, stats.handed_back, stats.in_flight) == (2, 0, 0)
    assert (await queue.stats()).ready == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("handback_seconds", [10.0, 0.0])
async def test_jobs_past_the_grace_are_handed_back_without_burning_an_attempt(
    handback_seconds: float,
) -> None:
    # handback_seconds=0: no time for the store past the grace (a store error would not be
    # waited out), but each hand-back is still sent, once.
    clock = ManualClock()
    queue = make_queue(clock)
    item = await queue.enqueue("acme", {})
    started, release = AsyncEvent(), AsyncEvent()

    async def handler(job: Job) -> None:
        started.set()
        await release.wait(SAFETY)  # until given up (a thread: until the test ends)

    worker = AsyncWorker(
        queue, handler, clock=clock, shutdown_grace=0, handback_seconds=handback_seconds
    )

    async def drive() -> None:
        assert await started.wait(SAFETY)
        worker.stop()

    await async_gather([worker.run, drive])
    stats = worker.stats()
    release.set()
    assert (stats.handed_back, stats.completed, stats.lost) == (1, 0, 0)
    stored = await queue.get_item("acme", item.item_id)
    assert stored is not None and (stored.state, stored.attempts) == ("ready", 0)


class DownAtShutdownQueue(SpyQueue):
    """A memory queue whose hand-backs fail (the store down) while ``down`` is set."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.down = False
        self.refused = 0

    async def release_many(self, leases: Collection[Lease]) -> list[RunyardError | None]:
        if self.down:
            self.refused += 1
            raise QueueUnavailableError("the test's outage")
        return await super().release_many(leases)


@pytest.mark.asyncio
async def test_a_hand_back_the_store_refuses_ends_after_handback_seconds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The store is down when the grace ends: the hand-back is retried for handback_seconds,
    # then the worker exits anyway (as abort() does): the lease lapses and is recovered.
    clock = ManualClock()
    queue = DownAtShutdownQueue(
        policy=QueuePolicy(lease_seconds=30, backoff_base=0, random=lambda: 0.5), clock=clock
    )
    item = await queue.enqueue("acme", {})
    started, release, returned = AsyncEvent(), AsyncEvent(), AsyncEvent()

    async def handler(job: Job) -> None:
        started.set()
        await release.wait(SAFETY)  # until given up (a thread: until the test ends)

    worker = AsyncWorker(
        queue,
        handler,
        clock=clock,
        shutdown_grace=0,
        handback_seconds=0.2,
        store_backoff_base=0.01,
        store_backoff_cap=0.05,
    )

    async def run() -> None:
        await worker.run()
        returned.set()

    async def drive() -> None:
        assert await started.wait(SAFETY)
        queue.down = True
        worker.stop()
        ended = await returned.wait(SAFETY)
        queue.down = False  # the worker of the code before this bound waits until now
        release.set()
        assert ended

    await async_gather([run, drive])
    stats = worker.stats()
    assert queue.refused >= 1 and stats.store_errors >= 1
    assert (stats.handed_back, stats.completed, stats.lost) == (0, 0, 0)
    stored = await queue.get_item("acme", item.item_id)
    assert stored is not None and stored.state == "leased"
    assert "gave up waiting on the store" in caplog.text
