"""The worker's wake-ups on the memory queue: woken by an enqueue, not by its backstop; claims on
hints, not after each job; a backlog drained without hints; without wake-ups, a claim after
every settle; jobs going on with their successors wake the loop only now and then."""

from __future__ import annotations

import time

import pytest
from runyard import ManualClock
from runyard._async.worker import AsyncWorker
from runyard._flavours import AsyncEvent, async_gather
from runyard.worker import Job, WorkerHooks
from runyard.worker.timing import SUCCESSOR_NUDGE_SECONDS

from tests._async.memory_worker_spy import SAFETY, make_queue


@pytest.mark.asyncio
async def test_an_idle_worker_is_woken_by_an_enqueue_not_by_its_backstop() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    ran = AsyncEvent()

    async def handler(job: Job) -> None:
        ran.set()

    worker = AsyncWorker(queue, handler, clock=clock, backstop_seconds=60, reap_seconds=600)

    async def drive() -> None:
        assert await queue.claimed_nothing.wait(SAFETY)
        await queue.enqueue("acme", {})
        woken = await ran.wait(SAFETY)  # the 60 s backstop would come after the safety limit
        worker.stop()
        assert woken

    await async_gather([worker.run, drive])
    stats = worker.stats()
    assert stats.completed == 1


@pytest.mark.asyncio
async def test_a_woken_worker_claims_on_hints_not_after_each_job() -> None:
    # A claim that took fewer items than it asked for found nothing more: the job's end and
    # its settle send no claim (it would find nothing, and delay the one the next hint asks
    # for); only the next enqueue's hint does.
    clock = ManualClock()
    queue = make_queue(clock)
    started: list[int] = []
    second, settled = AsyncEvent(), AsyncEvent()

    async def handler(job: Job) -> None:
        started.append(job.payload["n"])
        if len(started) == 2:
            second.set()

    hooks = WorkerHooks(on_job_end=lambda job, outcome: settled.set())
    worker = AsyncWorker(
        queue,
        handler,
        clock=clock,
        concurrency=2,
        hooks=hooks,
        backstop_seconds=60,
        reap_seconds=600,
    )

    async def drive() -> None:
        assert await queue.claimed_nothing.wait(SAFETY)
        await queue.enqueue("acme", {"n": 1})
        assert await settled.wait(SAFETY)
        await queue.enqueue("acme", {"n": 2})
        assert await second.wait(SAFETY)
        worker.stop()

    await async_gather([worker.run, drive])
    assert started == [1, 2]
    assert queue.empty_claims == 1  # the first claim only, before anything was enqueued
    assert worker.stats().claim_round_trips == 3


@pytest.mark.asyncio
async def test_a_backlog_enqueued_before_the_worker_drains_without_hints() -> None:
    # The enqueues came before the worker listened: no hint is left for them. Each claim is
    # full (2 of 2), so the worker claims again as slots free, not at its 60 s backstop.
    clock = ManualClock()
    queue = make_queue(clock)
    for n in range(5):
        await queue.enqueue("acme", {"n": n})
    drained = AsyncEvent()
    started: list[int] = []

    async def handler(job: Job) -> None:
        started.append(job.payload["n"])
        if len(started) == 5:
            drained.set()

    worker = AsyncWorker(
        queue, handler, clock=clock, concurrency=2, backstop_seconds=60, reap_seconds=600
    )

    async def drive() -> None:
        done = await drained.wait(SAFETY)
        worker.stop()
        assert done, f"stalled after {started}"

    await async_gather([worker.run, drive])
    assert sorted(started) == [0, 1, 2, 3, 4]


class _NoNotice:
    """Stands in for the memory queue's condition: enqueues notify nobody."""

    def notify(self) -> None:
        pass


@pytest.mark.asyncio
async def test_without_wake_ups_the_worker_claims_after_every_settle() -> None:
    # No wake-up (the queue offers none): the worker polls, so an item enqueued while a job
    # runs is claimed once that job settles, though its one claim came back short (1 of 2)
    # and its backstop is 60 s.
    clock = ManualClock()
    queue = make_queue(clock)
    queue.wakeups = _NoNotice()  # type: ignore[assignment]
    first_started, release, second_started = AsyncEvent(), AsyncEvent(), AsyncEvent()

    async def handler(job: Job) -> None:
        if job.payload["n"] == 1:
            first_started.set()
            assert await release.wait(SAFETY)
        else:
            second_started.set()

    worker = AsyncWorker(
        queue, handler, clock=clock, concurrency=2, backstop_seconds=60, reap_seconds=600
    )
    assert worker._wakeup is None
    await queue.enqueue("acme", {"n": 1})  # the first claim takes it

    async def drive() -> None:
        assert await first_started.wait(SAFETY)
        await queue.enqueue("acme", {"n": 2})
        release.set()
        polled = await second_started.wait(SAFETY)
        worker.stop()
        assert polled

    await async_gather([worker.run, drive])
    assert worker.stats().completed == 2


async def _noop(job: Job) -> None:
    pass


@pytest.mark.asyncio
async def test_jobs_going_on_with_their_successors_wake_the_loop_only_now_and_then() -> None:
    # Unbatched, a job completes its item and claims its successor itself; the loop counts
    # the outcomes and registers the successors, woken at most every SUCCESSOR_NUDGE_SECONDS
    # (and when a job has no successor). A successor that ended before the loop registered it
    # is collected in that same turn: waking the loop again for each one made it turn about
    # once per job. The bound is per second of the run, so a slow machine only loosens it.
    clock = ManualClock()
    queue = make_queue(clock)
    jobs, concurrency = 400, 4
    for n in range(jobs):
        await queue.enqueue("acme", {"n": n})
    worker = AsyncWorker(
        queue, _noop, clock=clock, concurrency=concurrency, batched=False, reap_seconds=600
    )
    nudges = 0
    nudge = worker._nudge
    set_nudge = nudge.set

    def counted() -> None:
        nonlocal nudges
        nudges += 1
        set_nudge()

    nudge.set = counted  # type: ignore[method-assign]
    began = time.monotonic()
    stats = await worker.run_until_idle()
    elapsed = time.monotonic() - began
    assert stats.completed == jobs
    # one per nudge interval, one per job chain that ran out of successors, a few to spare
    bound = elapsed / SUCCESSOR_NUDGE_SECONDS + 2 * concurrency + 4
    assert nudges <= bound, f"{nudges} nudges for {jobs} jobs in {elapsed:.3f} s"
