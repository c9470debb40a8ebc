"""The worker on the memory queue: settles, retries, heartbeats, timeouts, store errors
(wake-ups: test_worker_wakeups.py; shutdown: test_worker_shutdown.py). Time moves by a
ManualClock; threads and tasks meet at events, never sleeps."""

from __future__ import annotations

from typing import Any

import pytest
from runyard import ManualClock, QueuePolicy
from runyard._async.worker import AsyncWorker
from runyard._flavours import AsyncEvent, async_gather
from runyard.errors import ConfigurationError
from runyard.models import Lease
from runyard.worker import Job, JobTimeoutError, PermanentFailure, WorkerHooks
from runyard.worker.slot import Slot

from tests._async.memory_worker_spy import SAFETY, SpyQueue, make_queue


@pytest.mark.asyncio
async def test_a_retry_waits_out_its_backoff() -> None:
    clock = ManualClock()
    queue = make_queue(clock, backoff_base=10)
    item = await queue.enqueue("acme", {})
    attempts: list[int] = []

    async def handler(job: Job) -> None:
        attempts.append(job.attempt)
        if job.attempt == 1:
            raise RuntimeError("flaky")

    worker = AsyncWorker(queue, handler, clock=clock)
    assert (await worker.run_until_idle()).retried == 1
    waiting = await queue.get_item("acme", item.item_id)
    assert waiting is not None and waiting.available_at == clock.now() + 5
    clock.advance(5)
    assert (await worker.run_until_idle()).completed == 1
    assert attempts == [1, 2]


@pytest.mark.asyncio
@pytest.mark.parametrize("batched", [True, False])
async def test_a_retry_starts_when_its_backoff_ends_not_at_the_backstop(batched: bool) -> None:
    # The system clock: the worker must wake when the 0.1 s backoff ends. A claim sent at
    # the failure finds nothing (not due yet); the 60 s backstop comes after the safety limit.
    queue = SpyQueue(policy=QueuePolicy(backoff_base=0.2, random=lambda: 0.5))
    second = AsyncEvent()
    attempts: list[int] = []

    async def handler(job: Job) -> None:
        attempts.append(job.attempt)
        if job.attempt == 1:
            raise RuntimeError("flaky")
        second.set()

    worker = AsyncWorker(queue, handler, batched=batched, backstop_seconds=60, reap_seconds=600)

    async def drive() -> None:
        await queue.enqueue("acme", {})
        retried = await second.wait(SAFETY)
        worker.stop()
        assert retried

    await async_gather([worker.run, drive])
    assert attempts == [1, 2]


@pytest.mark.asyncio
async def test_a_reaped_item_starts_when_its_backoff_ends_not_at_the_backstop() -> None:
    # A crashed worker's lease lapses; this worker's reap returns the item with a 1 s
    # backoff, longer than its reap interval: it claims when that ends, not at its 60 s
    # backstop (the reaps after the first return nothing).
    queue = SpyQueue(policy=QueuePolicy(lease_seconds=0.2, backoff_base=2, random=lambda: 0.5))
    await queue.enqueue("acme", {})
    assert await queue.claim("crashed") is not None
    started = AsyncEvent()

    async def handler(job: Job) -> None:
        started.set()

    worker = AsyncWorker(queue, handler, backstop_seconds=60, reap_seconds=0.3)

    async def drive() -> None:
        ran = await started.wait(SAFETY)
        worker.stop()
        assert ran

    await async_gather([worker.run, drive])
    assert worker.stats().reaped == 1 and worker.stats().completed == 1


@pytest.mark.asyncio
async def test_permanent_failure_dead_letters_at_once() -> None:
    clock = ManualClock()
    queue = make_queue(clock, max_attempts=5)
    await queue.enqueue("acme", {})
    dead: list[Job] = []

    async def handler(job: Job) -> None:
        raise PermanentFailure("bad input")

    hooks = WorkerHooks(on_dead=lambda job, exc: dead.append(job))
    stats = await AsyncWorker(queue, handler, clock=clock, hooks=hooks).run_until_idle()
    assert (stats.dead, stats.retried) == (1, 0)
    assert [job.attempt for job in dead] == [1]


@pytest.mark.asyncio
@pytest.mark.parametrize("batched", [True, False])
async def test_a_lost_lease_gives_the_job_up_and_is_never_settled(batched: bool) -> None:
    clock = ManualClock()
    queue = make_queue(clock, max_lease_seconds=40, max_attempts=1)
    item = await queue.enqueue("acme", {})
    started, lost, release = AsyncEvent(), AsyncEvent(), AsyncEvent()
    given_up: list[Job] = []

    async def handler(job: Job) -> None:
        started.set()
        await release.wait(SAFETY)

    def ended(job: Job, outcome: str) -> None:
        if outcome == "lost":
            given_up.append(job)
            lost.set()

    worker = AsyncWorker(
        queue, handler, clock=clock, batched=batched, hooks=WorkerHooks(on_job_end=ended)
    )

    async def drive() -> None:
        assert await started.wait(SAFETY)
        clock.advance(41)  # past max_lease_seconds: the next heartbeat is refused (capped)
        worker.wake()
        assert await lost.wait(SAFETY)
        release.set()

    await async_gather([worker.run_until_idle, drive])
    stats = worker.stats()
    assert (stats.lost, stats.completed, stats.failed) == (1, 0, 0)
    assert given_up[0].cancelled
    (letter,) = await queue.dead_letters("acme")  # reaped when it lapsed, never completed
    assert letter.item.item_id == item.item_id and letter.item.last_error == "lease lapsed"


@pytest.mark.asyncio
@pytest.mark.parametrize("batched", [True, False])
async def test_a_job_past_its_timeout_fails_retryably(batched: bool) -> None:
    clock = ManualClock()
    queue = make_queue(clock, backoff_base=10)
    item = await queue.enqueue("acme", {})
    started, failed, release = AsyncEvent(), AsyncEvent(), AsyncEvent()
    errors: list[BaseException] = []

    async def handler(job: Job) -> None:
        started.set()
        await release.wait(SAFETY)

    def on_failure(job: Job, exc: BaseException) -> None:
        errors.append(exc)
        failed.set()

    hooks = WorkerHooks(on_failure=on_failure)
    worker = AsyncWorker(queue, handler, clock=clock, batched=batched, hooks=hooks, job_timeout=5)

    async def drive() -> None:
        assert await started.wait(SAFETY)
        clock.advance(6)
        worker.wake()
        assert await failed.wait(SAFETY)
        release.set()

    await async_gather([worker.run_until_idle, drive])
    stats = worker.stats()
    assert (stats.timed_out, stats.retried, stats.completed) == (1, 1, 0)
    assert isinstance(errors[0], JobTimeoutError)
    stored = await queue.get_item("acme", item.item_id)
    assert stored is not None and stored.state == "ready" and stored.attempts == 1
    assert "JobTimeoutError" in (stored.last_error or "")


@pytest.mark.asyncio
@pytest.mark.parametrize("batched", [True, False])
async def test_jobs_run_concurrently_up_to_the_setting(batched: bool) -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    for n in range(3):
        await queue.enqueue("acme", {"n": n})
    all_started = AsyncEvent()
    seen: list[int] = []

    async def handler(job: Job) -> None:
        seen.append(job.payload["n"])
        if len(seen) == 3:
            all_started.set()
        assert await all_started.wait(SAFETY), "jobs did not run at once"

    stats = await AsyncWorker(
        queue, handler, clock=clock, batched=batched, concurrency=3
    ).run_until_idle()
    assert stats.completed == 3 and sorted(seen) == [0, 1, 2]
    assert stats.claim_round_trips >= 1


@pytest.mark.asyncio
@pytest.mark.parametrize(("items", "filled"), [(3, (3, False)), (9, (8, True))])
async def test_a_batched_claim_says_whether_more_may_be_due(
    items: int, filled: tuple[int, bool]
) -> None:
    # The loop claims again at once only after a full claim: one that took fewer items than
    # it asked for found nothing more, and sent again it would be an empty round trip.
    clock = ManualClock()
    queue = make_queue(clock)
    for n in range(items):
        await queue.enqueue("acme", {"n": n})

    async def handler(job: Job) -> None:
        pass

    worker = AsyncWorker(queue, handler, clock=clock, concurrency=8)
    assert await worker._fill() == filled
    assert (await worker.run_until_idle()).completed == items


class ClaimRaisesQueue(SpyQueue):
    """The claim after the first complete raises an error no store waits out."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.completes = 0
        self.raised = False

    async def complete(self, tenant: Any, item_id: Any = None, **options: Any) -> None:
        await super().complete(tenant, item_id, **options)
        self.completes += 1

    async def claim(self, worker: str) -> Lease | None:
        if self.completes == 1 and not self.raised:
            self.raised = True
            raise ConfigurationError("the test's broken claim")
        return await super().claim(worker)


@pytest.mark.asyncio
async def test_a_jobs_successor_claim_that_raises_still_counts_the_job() -> None:
    # Unbatched, a job claims its successor after its complete: that claim raising (an error
    # the store does not wait out) is logged; the job still counts as completed, and the
    # worker goes on.
    clock = ManualClock()
    queue = ClaimRaisesQueue(policy=QueuePolicy(backoff_base=0, random=lambda: 0.5), clock=clock)
    for n in range(2):
        await queue.enqueue("acme", {"n": n})
    runs: list[int] = []
    returned = AsyncEvent()

    async def handler(job: Job) -> None:
        runs.append(job.payload["n"])

    worker = AsyncWorker(queue, handler, clock=clock, batched=False)

    async def run() -> None:
        await worker.run_until_idle()
        returned.set()

    async def drive() -> None:
        ended = await returned.wait(SAFETY)
        if not ended:
            worker.abort()  # the code before this fix waited for ever
        assert ended

    await async_gather([run, drive])
    assert queue.raised and sorted(runs) == [0, 1]
    assert (worker.stats().completed, worker.stats().lost) == (2, 0)
    assert (await queue.stats()).leased == 0


class CompleteRaisesQueue(SpyQueue):
    """The first complete raises an error no store waits out (before it is applied)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.raised = False

    async def complete(self, tenant: Any, item_id: Any = None, **options: Any) -> None:
        if not self.raised:
            self.raised = True
            raise ConfigurationError("the test's broken complete")
        await super().complete(tenant, item_id, **options)


@pytest.mark.asyncio
async def test_a_complete_that_raises_fails_the_job_for_a_retry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Unbatched, the job sends its own complete; one raising an error the store does not
    # wait out fails the job (retryable, logged with its traceback) instead of leaving its
    # slot settling for ever; the retry completes.
    clock = ManualClock()
    queue = CompleteRaisesQueue(policy=QueuePolicy(backoff_base=0, random=lambda: 0.5), clock=clock)
    await queue.enqueue("acme", {})
    returned = AsyncEvent()
    attempts: list[int] = []

    async def handler(job: Job) -> None:
        attempts.append(job.attempt)

    worker = AsyncWorker(queue, handler, clock=clock, batched=False)

    async def run() -> None:
        await worker.run_until_idle()
        returned.set()

    async def drive() -> None:
        ended = await returned.wait(SAFETY)
        if not ended:
            worker.abort()
        assert ended

    await async_gather([run, drive])
    stats = worker.stats()
    assert queue.raised and attempts == [1, 2]
    assert (stats.failed, stats.retried, stats.completed, stats.lost) == (1, 1, 1, 0)
    assert "a job's complete failed" in caplog.text
    assert (await queue.stats()).leased == 0


@pytest.mark.asyncio
async def test_store_errors_are_waited_out() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    await queue.enqueue("acme", {})
    queue.outages = 3

    async def handler(job: Job) -> None:
        pass

    worker = AsyncWorker(queue, handler, clock=clock, store_backoff_base=0.001)
    stats = await worker.run_until_idle()
    assert (stats.store_errors, stats.completed) == (3, 1)


@pytest.mark.asyncio
async def test_bad_settings_are_configuration_errors() -> None:
    queue = make_queue(ManualClock())

    async def handler(job: Job) -> None:
        pass

    with pytest.raises(ConfigurationError, match="concurrency"):
        AsyncWorker(queue, handler, concurrency=0)
    with pytest.raises(ConfigurationError, match="unknown worker setting"):
        AsyncWorker(queue, handler, poll_seconds=1)
    # An int past a float's range raised a bare OverflowError.
    with pytest.raises(ConfigurationError, match="backstop_seconds must be a finite number"):
        AsyncWorker(queue, handler, backstop_seconds=10**400)
    # The lease is 30 s: a heartbeat every 15 s or more would let it lapse after one round
    # that fails, and the job would run again while it still runs.
    with pytest.raises(ConfigurationError, match=r"heartbeat_seconds .* \(30 s\), not 15"):
        AsyncWorker(queue, handler, heartbeat_seconds=15)
    assert AsyncWorker(queue, handler, heartbeat_seconds=14.9)._heartbeat_every == 14.9


async def _noop(job: Job) -> None:
    pass


@pytest.mark.asyncio
async def test_a_refused_heartbeat_of_a_finished_job_leaves_the_items_next_claim_running() -> None:
    # A finished job (its settle not sent yet) whose lease lapsed, while the item was claimed
    # again and runs in a new slot: the refused heartbeat gives up the finished job only.
    # Before, it removed whatever slot ran the item: the new job ran on unwatched, never
    # heartbeated, settled or counted.
    clock = ManualClock()
    queue = make_queue(clock, lease_seconds=30)
    await queue.enqueue("acme", {})
    worker = AsyncWorker(queue, _noop, clock=clock, reap_seconds=600)
    first = await queue.claim(worker.name)
    assert first is not None
    clock.advance(31)  # the first lease lapsed
    assert len(await queue.reap()) == 1
    clock.advance(60)  # past the retry's backoff
    second = await queue.claim(worker.name)
    assert second is not None and second.token != first.token
    finished, running = Slot(first, None), Slot(second, None)
    finished.outcome = running.outcome = None
    worker._finished.append(finished)
    worker._running[running.key] = running
    worker._next_heartbeat = clock.now()
    await worker._heartbeat_if_due()
    assert worker._running == {running.key: running}
    assert worker._finished == []
    assert worker.stats().lost == 1
    assert running.lease is not second  # renewed by the same round
    assert running.lease.token == second.token
