"""The worker on the memory queue: settles, retries, heartbeats, timeouts, shutdown, wake-ups,
store errors. Time moves by a ManualClock; threads and tasks meet at events, never sleeps."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
from runyard import AsyncMemoryWorkQueue, ManualClock, QueuePolicy
from runyard._async.worker import AsyncWorker
from runyard._flavours import AsyncEvent, async_gather
from runyard.errors import (
    ConfigurationError,
    QueueUnavailableError,
    RunyardError,
    StoreOutcomeUnknown,
)
from runyard.models import Lease, WorkItem
from runyard.worker import Job, JobTimeoutError, PermanentFailure, WorkerHooks

SAFETY = 30.0  # seconds an event may take before the test fails; never reached when it passes


class SpyQueue(AsyncMemoryWorkQueue):
    """A memory queue that reports heartbeat rounds and can fail or lose claims (single or
    batched: the worker claims one way or the other)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.beats = AsyncEvent()
        self.claimed_nothing = AsyncEvent()
        self.empty_claims = 0
        self.outages = 0
        self.lose_next_claim_reply = False

    async def heartbeat_many(self, leases: Sequence[Lease]) -> list[Lease | RunyardError]:
        out = await super().heartbeat_many(leases)
        self.beats.set()
        return out

    async def heartbeat(self, *args: Any, **kwargs: Any) -> Lease:
        out = await super().heartbeat(*args, **kwargs)
        self.beats.set()
        return out

    async def claim(self, worker: str) -> Lease | None:
        self._before_claim()
        lease = await super().claim(worker)
        self._after_claim([lease] if lease else [])
        return lease

    async def claim_many(self, worker: str, *, limit: int) -> list[Lease]:
        self._before_claim()
        leases = await super().claim_many(worker, limit=limit)
        self._after_claim(leases)
        return leases

    def _before_claim(self) -> None:
        if self.outages:
            self.outages -= 1
            raise QueueUnavailableError("the test's outage")

    def _after_claim(self, leases: list[Lease]) -> None:
        if not leases:
            self.empty_claims += 1
            self.claimed_nothing.set()
        if leases and self.lose_next_claim_reply:
            self.lose_next_claim_reply = False
            raise StoreOutcomeUnknown("the test lost this reply")


def make_queue(clock: ManualClock, **policy: Any) -> SpyQueue:
    settings: dict[str, Any] = {"lease_seconds": 30, "backoff_base": 0, "random": lambda: 0.5}
    return SpyQueue(policy=QueuePolicy(**{**settings, **policy}), clock=clock)


@pytest.mark.asyncio
@pytest.mark.parametrize("batched", [True, False])
async def test_returning_completes_and_raising_retries_until_the_dead_letter(
    batched: bool,
) -> None:
    clock = ManualClock()
    queue = make_queue(clock, max_attempts=3)
    ok = await queue.enqueue("acme", {"ok": True})
    bad = await queue.enqueue("acme", {"ok": False})

    async def handler(job: Job) -> None:
        if not job.payload["ok"]:
            raise ValueError(f"boom on attempt {job.attempt}")

    worker = AsyncWorker(queue, handler, clock=clock, batched=batched, concurrency=2)
    stats = await worker.run_until_idle()
    assert (stats.completed, stats.failed, stats.retried, stats.dead) == (1, 3, 2, 1)
    assert await queue.get_item("acme", ok.item_id) is None
    (letter,) = await queue.dead_letters("acme")
    assert letter.item.item_id == bad.item_id
    error = letter.item.last_error or ""
    assert error.startswith("builtins.ValueError: boom on attempt 3")
    assert "Traceback" in error and "in handler" in error


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
async def test_a_job_three_lease_lengths_long_completes_once(batched: bool) -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    item = await queue.enqueue("acme", {})
    runs: list[int] = []
    worker: AsyncWorker

    async def handler(job: Job) -> None:
        runs.append(job.token)
        for _ in range(9):  # 9 x 10 s = 90 s = three 30 s leases
            queue.beats.clear()
            clock.advance(10)
            worker.wake()
            assert await queue.beats.wait(SAFETY), "no heartbeat round"

    worker = AsyncWorker(queue, handler, clock=clock, batched=batched)
    stats = await worker.run_until_idle()
    assert (stats.completed, stats.lost, len(runs)) == (1, 0, 1)
    assert stats.heartbeat_round_trips == 9
    assert await queue.get_item("acme", item.item_id) is None


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
async def test_jobs_past_the_grace_are_handed_back_without_burning_an_attempt() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    item = await queue.enqueue("acme", {})
    started, release = AsyncEvent(), AsyncEvent()

    async def handler(job: Job) -> None:
        started.set()
        await release.wait(SAFETY)

    worker = AsyncWorker(queue, handler, clock=clock, shutdown_grace=0)

    async def drive() -> None:
        assert await started.wait(SAFETY)
        worker.stop()

    await async_gather([worker.run, drive])
    stats = worker.stats()
    release.set()
    assert (stats.handed_back, stats.completed) == (1, 0)
    stored = await queue.get_item("acme", item.item_id)
    assert stored is not None and (stored.state, stored.attempts) == ("ready", 0)


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
@pytest.mark.parametrize("batched", [True, False])
async def test_a_claim_whose_reply_was_lost_is_adopted_and_run_once(batched: bool) -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    item = await queue.enqueue("acme", {})
    queue.lose_next_claim_reply = True
    runs: list[str] = []

    async def handler(job: Job) -> None:
        runs.append(job.item_id)

    stats = await AsyncWorker(queue, handler, clock=clock, batched=batched).run_until_idle()
    assert queue.lose_next_claim_reply is False  # the reply was lost
    assert runs == [item.item_id] and stats.completed == 1


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


@pytest.mark.asyncio
@pytest.mark.parametrize("batched", [True, False])
async def test_a_lost_claim_reply_does_not_cost_a_running_job_its_lease(batched: bool) -> None:
    # adopt gives every live lease of the worker a new token, the running job's too: the
    # worker must go on with that one, or the running job's complete is refused.
    clock = ManualClock()
    queue = make_queue(clock)
    first_started, release, endings = AsyncEvent(), AsyncEvent(), Endings(2)
    runs: list[int] = []

    async def handler(job: Job) -> None:
        runs.append(job.payload["n"])
        if job.payload["n"] == 1:
            first_started.set()
            assert await release.wait(SAFETY)
        else:
            release.set()

    worker = adopt_race_worker(queue, handler, endings, clock=clock, batched=batched)

    async def drive() -> None:
        await queue.enqueue("acme", {"n": 1})
        assert await first_started.wait(SAFETY)
        queue.lose_next_claim_reply = True
        await queue.enqueue("acme", {"n": 2})
        assert await endings.all.wait(SAFETY)
        worker.stop()

    await async_gather([worker.run, drive])
    assert queue.lose_next_claim_reply is False  # the reply was lost
    assert sorted(endings.ended) == ["1:completed", "2:completed"]
    assert sorted(runs) == [1, 2]
    stats = worker.stats()
    assert (stats.completed, stats.lost) == (2, 0)


class HeldSettleQueue(SpyQueue):
    """Holds the complete or the fail of item ``n == 1`` (reporting it in flight) until an
    ``adopt`` has given that item's lease a new token: the settle carries the old one."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.in_flight, self.adopted = AsyncEvent(), AsyncEvent()
        self.held: Lease | None = None

    async def _hold(self, lease: Any) -> None:
        if isinstance(lease, Lease) and lease.item.payload["n"] == 1 and self.held is None:
            self.held = lease
            self.in_flight.set()
            assert await self.adopted.wait(SAFETY)

    async def complete(self, tenant: Any, item_id: Any = None, **options: Any) -> None:
        await self._hold(tenant)
        await super().complete(tenant, item_id, **options)

    async def fail(self, tenant: Any, item_id: Any = None, **options: Any) -> WorkItem:
        await self._hold(tenant)
        return await super().fail(tenant, item_id, **options)

    async def adopt(self, worker: str, *, limit: int = 100) -> list[Lease]:
        leases = await super().adopt(worker, limit=limit)
        self.adopted.set()
        return leases


@pytest.mark.asyncio
async def test_a_complete_in_flight_when_its_lease_is_adopted_is_sent_again() -> None:
    # Unbatched, jobs send their own complete and claim their successor. Job 1's complete is
    # in flight when job 2's successor claim loses its reply: adopt re-tokens job 1's lease,
    # the complete with the old token is refused, and is sent again with the new one.
    queue = HeldSettleQueue(policy=QueuePolicy(backoff_base=0, random=lambda: 0.5))
    for n in (1, 2, 3):
        await queue.enqueue("acme", {"n": n})
    runs: list[int] = []
    endings = Endings(3)

    async def handler(job: Job) -> None:
        runs.append(job.payload["n"])
        if job.payload["n"] == 2:
            assert await queue.in_flight.wait(SAFETY)
            queue.lose_next_claim_reply = True  # the claim of its successor, item 3

    worker = adopt_race_worker(queue, handler, endings)

    async def drive() -> None:
        done = await endings.all.wait(SAFETY)
        worker.stop()
        assert done, (endings.ended, runs, queue.in_flight.is_set(), queue.adopted.is_set())

    await async_gather([worker.run, drive])
    assert queue.adopted.is_set() and queue.lose_next_claim_reply is False
    assert sorted(endings.ended) == ["1:completed", "2:completed", "3:completed"]
    assert sorted(runs) == [1, 2, 3]
    assert worker.stats().lost == 0


@pytest.mark.asyncio
async def test_a_failure_settling_when_its_lease_is_adopted_is_not_run_again() -> None:
    # Unbatched, the loop settles job 1's failure (permanent: it is never run again). While
    # that fail is in flight, job 2's successor claim loses its reply: adopt re-tokens job 1's
    # lease too. The worker still holds it (settling): it is neither started again nor lost.
    queue = HeldSettleQueue(policy=QueuePolicy(backoff_base=0, random=lambda: 0.5))
    for n in (1, 2):
        await queue.enqueue("acme", {"n": n})
    runs: list[int] = []
    endings, second_started = Endings(3), AsyncEvent()

    async def handler(job: Job) -> None:
        runs.append(job.payload["n"])
        if job.payload["n"] == 1:
            assert await second_started.wait(SAFETY)  # the loop claimed both first
            raise PermanentFailure("bad input")
        if job.payload["n"] == 2:
            second_started.set()
            assert await queue.in_flight.wait(SAFETY)
            await queue.enqueue("acme", {"n": 3})  # the loop is busy settling job 1
            queue.lose_next_claim_reply = True  # the claim of its successor, item 3

    worker = adopt_race_worker(queue, handler, endings)

    async def drive() -> None:
        done = await endings.all.wait(SAFETY)
        worker.stop()
        assert done, endings.ended

    await async_gather([worker.run, drive])
    assert queue.adopted.is_set() and queue.lose_next_claim_reply is False
    assert sorted(endings.ended) == ["1:dead", "2:completed", "3:completed"]
    assert sorted(runs) == [1, 2, 3]
    assert worker.stats().lost == 0


class AdoptRaceQueue(SpyQueue):
    """Loses the reply of the next claim that finds nothing (``lose_empty_claim_reply``):
    the worker adopts. Then it holds, until ``proceed`` is set, either the adopt's reply
    (``hold_adopt``) or the claim the worker sends after the adopt."""

    def __init__(self, *, hold_adopt: bool, **options: Any) -> None:
        super().__init__(**options)
        self.hold_adopt = hold_adopt
        self.lose_empty_claim_reply = False
        self.hold_next_claim = False
        self.adopted, self.proceed, self.refused = AsyncEvent(), AsyncEvent(), AsyncEvent()

    async def claim(self, worker: str) -> Lease | None:
        if self.hold_next_claim:
            self.hold_next_claim = False
            assert await self.proceed.wait(SAFETY)
        lease = await super().claim(worker)
        if lease is None and self.lose_empty_claim_reply:
            self.lose_empty_claim_reply = False
            raise StoreOutcomeUnknown("the test lost this reply")
        return lease

    async def adopt(self, worker: str, *, limit: int = 100) -> list[Lease]:
        leases = await super().adopt(worker, limit=limit)
        self.adopted.set()
        if self.hold_adopt:
            assert await self.proceed.wait(SAFETY)
        else:
            self.hold_next_claim = True
        return leases

    async def complete(self, tenant: Any, item_id: Any = None, **options: Any) -> None:
        try:
            await super().complete(tenant, item_id, **options)
        except RunyardError:
            self.refused.set()
            raise

    async def heartbeat(self, *args: Any, **kwargs: Any) -> Lease:
        try:
            return await super().heartbeat(*args, **kwargs)
        except RunyardError:
            self.refused.set()
            raise


@pytest.mark.asyncio
@pytest.mark.parametrize("hold_adopt", [False, True])
async def test_a_settle_refused_before_its_adopt_was_applied_is_sent_again(
    hold_adopt: bool,
) -> None:
    # Unbatched, concurrency 2. Job 2's successor claim finds nothing and loses its reply:
    # adopt re-tokens running job 1's lease. Job 1 then completes while the adopting job has
    # not gone on: held in the adopt's reply (its complete, with the old token, is refused,
    # waits for the adopt, and is sent again), or in the claim that fills the slot after
    # the adopt (the adopted lease was applied before it: the complete carries it).
    queue = AdoptRaceQueue(
        hold_adopt=hold_adopt, policy=QueuePolicy(backoff_base=0, random=lambda: 0.5)
    )
    for n in (1, 2):
        await queue.enqueue("acme", {"n": n})
    runs: list[int] = []
    endings, second_started = Endings(2, watch=1), AsyncEvent()

    async def handler(job: Job) -> None:
        runs.append(job.payload["n"])
        if job.payload["n"] == 1:
            assert await second_started.wait(SAFETY)
            assert await queue.adopted.wait(SAFETY)
        else:
            queue.lose_empty_claim_reply = True  # the claim of its successor finds nothing
            second_started.set()

    worker = adopt_race_worker(queue, handler, endings)

    async def drive() -> None:
        if hold_adopt:
            assert await queue.refused.wait(SAFETY)  # job 1's complete, with the old token
        else:
            assert await endings.watched.wait(SAFETY)
        queue.proceed.set()
        done = await endings.all.wait(SAFETY)
        worker.stop()
        assert done, endings.ended

    await async_gather([worker.run, drive])
    assert queue.adopted.is_set() and queue.lose_empty_claim_reply is False
    assert sorted(endings.ended) == ["1:completed", "2:completed"]
    assert sorted(runs) == [1, 2]
    assert (worker.stats().completed, worker.stats().lost) == (2, 0)
    stats = await queue.stats()
    assert (stats.leased, stats.ready) == (0, 0)


@pytest.mark.asyncio
async def test_a_heartbeat_refused_while_an_adopt_is_in_flight_keeps_the_job() -> None:
    # Unbatched, concurrency 2. Job 2's successor claim finds nothing and loses its reply:
    # adopt re-tokens running job 1's lease, and its reply is held. A heartbeat round falls
    # due: job 1's heartbeat, with the old token, is refused. The loop waits for the adopt
    # and goes on with the adopted lease instead of giving job 1 up.
    clock = ManualClock()
    queue = AdoptRaceQueue(
        hold_adopt=True,
        policy=QueuePolicy(lease_seconds=30, backoff_base=0, random=lambda: 0.5),
        clock=clock,
    )
    for n in (1, 2):
        await queue.enqueue("acme", {"n": n})
    runs: list[int] = []
    endings, second_started, finish_first = Endings(2), AsyncEvent(), AsyncEvent()

    async def handler(job: Job) -> None:
        runs.append(job.payload["n"])
        if job.payload["n"] == 1:
            assert await second_started.wait(SAFETY)
            assert await finish_first.wait(SAFETY)
        else:
            queue.lose_empty_claim_reply = True  # the claim of its successor finds nothing
            second_started.set()

    worker = adopt_race_worker(queue, handler, endings, clock=clock)

    async def drive() -> None:
        assert await queue.adopted.wait(SAFETY)  # its reply held
        clock.advance(11)  # a heartbeat round (every 10 s) is due
        worker.wake()
        assert await queue.refused.wait(SAFETY)  # job 1's heartbeat, with the old token
        queue.proceed.set()
        finish_first.set()
        done = await endings.all.wait(SAFETY)
        worker.stop()
        assert done, endings.ended

    await async_gather([worker.run, drive])
    assert sorted(endings.ended) == ["1:completed", "2:completed"]
    assert sorted(runs) == [1, 2]
    assert (worker.stats().completed, worker.stats().lost) == (2, 0)
    stats = await queue.stats()
    assert (stats.leased, stats.ready) == (0, 0)


class ShutdownAdoptQueue(SpyQueue):
    """Holds the next claim (``hold_next_claim``) until ``proceed``, then loses its reply;
    holds the hand-back (a retryable fail, unbatched) of item ``n == 1`` until an adopt."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.hold_next_claim = False
        self.claim_held, self.proceed = AsyncEvent(), AsyncEvent()
        self.handing_back, self.adopted = AsyncEvent(), AsyncEvent()

    async def claim(self, worker: str) -> Lease | None:
        if self.hold_next_claim:
            self.hold_next_claim = False
            self.lose_next_claim_reply = True
            self.claim_held.set()
            assert await self.proceed.wait(SAFETY)
        return await super().claim(worker)

    async def fail(self, tenant: Any, item_id: Any = None, **options: Any) -> WorkItem:
        first = isinstance(tenant, Lease) and tenant.item.payload["n"] == 1
        if first and not self.handing_back.is_set():
            self.handing_back.set()
            assert await self.adopted.wait(SAFETY)
        return await super().fail(tenant, item_id, **options)

    async def adopt(self, worker: str, *, limit: int = 100) -> list[Lease]:
        leases = await super().adopt(worker, limit=limit)
        self.adopted.set()
        return leases


@pytest.mark.asyncio
async def test_a_hand_back_at_shutdown_in_flight_when_its_lease_is_adopted_is_sent_again() -> None:
    # Unbatched, concurrency 2, no grace. Job 2 completes and claims its successor (item 3);
    # the worker stops meanwhile and hands job 1 back. That hand-back is in flight when job
    # 2's claim loses its reply: adopt re-tokens job 1's lease and item 3's. Job 1 is still
    # held until its hand-back returns: it is sent again with the new token; item 3, claimed
    # after the stop, is handed back unstarted, not run as job 2's successor.
    queue = ShutdownAdoptQueue(policy=QueuePolicy(backoff_base=0, random=lambda: 0.5))
    for n in (1, 2):
        await queue.enqueue("acme", {"n": n})
    runs: list[int] = []
    endings, finish_first = Endings(2), AsyncEvent()

    async def handler(job: Job) -> None:
        runs.append(job.payload["n"])
        if job.payload["n"] == 1:
            await finish_first.wait(SAFETY)  # until given up (a thread: until the test ends)
        elif job.payload["n"] == 2:
            await queue.enqueue("acme", {"n": 3})
            queue.hold_next_claim = True  # the claim of its successor, item 3

    worker = adopt_race_worker(queue, handler, endings, shutdown_grace=0)

    async def drive() -> None:
        assert await queue.claim_held.wait(SAFETY)
        worker.stop()
        assert await queue.handing_back.wait(SAFETY)
        queue.proceed.set()
        assert await endings.all.wait(SAFETY), endings.ended
        finish_first.set()

    await async_gather([worker.run, drive])
    finish_first.set()
    assert queue.adopted.is_set() and queue.lose_next_claim_reply is False
    assert sorted(endings.ended) == ["1:handed_back", "2:completed"]
    assert sorted(runs) == [1, 2]
    stats = worker.stats()
    assert (stats.completed, stats.handed_back, stats.lost) == (1, 2, 0)
    counts = await queue.stats()
    assert (counts.leased, counts.ready + counts.delayed) == (0, 2)


@pytest.mark.asyncio
async def test_bad_settings_are_configuration_errors() -> None:
    queue = make_queue(ManualClock())

    async def handler(job: Job) -> None:
        pass

    with pytest.raises(ConfigurationError, match="concurrency"):
        AsyncWorker(queue, handler, concurrency=0)
    with pytest.raises(ConfigurationError, match="unknown worker setting"):
        AsyncWorker(queue, handler, poll_seconds=1)


@pytest.mark.asyncio
async def test_a_lapsed_lease_claimed_back_gives_the_old_job_up_as_lost() -> None:
    # The worker's clock stands still, so it never heartbeats; the queue's clock moves past
    # the lease, another worker's reap makes the item ready again, and this worker's next
    # claim takes it back with a new token while the first job still runs.
    clock = ManualClock()
    queue = make_queue(clock, lease_seconds=5)
    await queue.enqueue("acme", {}, item_id="x")
    started: list[int] = []
    first, second = AsyncEvent(), AsyncEvent()
    release = AsyncEvent()
    ended: list[str] = []

    async def handler(job: Job) -> None:
        started.append(job.token)
        (second if first.is_set() else first).set()
        await release.wait(SAFETY)

    hooks = WorkerHooks(on_job_end=lambda job, outcome: ended.append(f"{job.token}:{outcome}"))
    worker = AsyncWorker(
        queue,
        handler,
        clock=ManualClock(),
        concurrency=2,
        batched=False,
        wakeup=None,
        hooks=hooks,
    )

    async def drive() -> None:
        assert await first.wait(SAFETY)
        clock.advance(6)
        assert [item.item_id for item in await queue.reap()] == ["x"]
        worker.wake()
        assert await second.wait(SAFETY)
        release.set()
        worker.stop()

    await async_gather([worker.run, drive])
    assert len(started) == 2 and started[0] < started[1]
    assert f"{started[0]}:lost" in ended
    assert worker.stats().lost == 1 and worker.stats().completed == 1
    assert await queue.get_item("acme", "x") is None
