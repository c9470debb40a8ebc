"""The worker on the memory queue: its name, a handler that raises a BaseException, a failure
stored with its frames despite a long note and cause, a job's own complete sent again through
store errors, hooks for every job a predecessor's job claimed, a hand-back that burns no
attempt unbatched too, and a dead worker's items recovered while the worker is busy. Time
moves by a ManualClock."""

from __future__ import annotations

import os
import re
import socket
import sys
from typing import Any

import pytest
from runyard import AsyncMemoryWorkQueue, ManualClock, QueuePolicy
from runyard._async.worker import AsyncWorker
from runyard._flavours import AsyncEvent, async_gather
from runyard.errors import InvalidArgumentError, QueueUnavailableError, StoreOutcomeUnknown
from runyard.models import Lease
from runyard.validation import MAX_ERROR_BYTES
from runyard.worker import Job, WorkerHooks, WorkerStats

SAFETY = 30.0  # seconds an event may take before the test fails; never reached when it passes


class SpyQueue(AsyncMemoryWorkQueue):
    """A memory queue that reports a claim that found nothing (the worker went idle)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.claims_that_found_nothing = 0

    async def claim(self, worker: str) -> Lease | None:
        lease = await super().claim(worker)
        if lease is None:
            self.claims_that_found_nothing += 1
        return lease

    async def claim_many(self, worker: str, *, limit: int) -> list[Lease]:
        leases = await super().claim_many(worker, limit=limit)
        if not leases:
            self.claims_that_found_nothing += 1
        return leases


def make_queue(clock: ManualClock) -> SpyQueue:
    policy = QueuePolicy(lease_seconds=30, backoff_base=0, random=lambda: 0.5)
    return SpyQueue(policy=policy, clock=clock)


class Interrupted(BaseException):
    """A BaseException of the handler's own (a task's own cancellation is tested in
    tests/test_worker_cancelled.py)."""


async def noop(job: Job) -> None:
    pass


async def run_until_idle_or_abort(worker: AsyncWorker) -> WorkerStats:
    """``run_until_idle``, aborted after SAFETY seconds (the test then fails, not hangs)."""
    done = AsyncEvent()

    async def work() -> WorkerStats:
        try:
            return await worker.run_until_idle()
        finally:
            done.set()

    async def watch() -> None:
        if not await done.wait(SAFETY):
            worker.abort()

    stats, _ = await async_gather([work, watch])
    assert isinstance(stats, WorkerStats)
    return stats


def test_default_names_are_host_pid_random_and_differ_per_worker() -> None:
    queue = make_queue(ManualClock())
    first, second = AsyncWorker(queue, noop), AsyncWorker(queue, noop)
    prefix = re.escape(f"{socket.gethostname()[:200]}-{os.getpid()}-")
    assert re.fullmatch(prefix + "[0-9a-f]{6}", first.name)
    assert re.fullmatch(prefix + "[0-9a-f]{6}", second.name)
    assert first.name != second.name


@pytest.mark.parametrize("name", ["", "w\x00", "w" * 257])
def test_a_bad_name_is_refused_naming_the_argument(name: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        AsyncWorker(make_queue(ManualClock()), noop, name=name)
    assert caught.value.argument == "worker"


@pytest.mark.asyncio
async def test_a_named_worker_claims_under_its_name() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    await queue.enqueue("acme", {})
    workers: list[str] = []

    async def handler(job: Job) -> None:
        workers.append(job.lease.worker)

    await AsyncWorker(queue, handler, clock=clock, name="billing-1").run_until_idle()
    assert workers == ["billing-1"]


@pytest.mark.asyncio
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize(
    "raised",
    [SystemExit(3), KeyboardInterrupt(), Interrupted()],
    ids=lambda exc: type(exc).__name__,
)
async def test_a_handler_raising_a_base_exception_fails_the_job_and_frees_its_slot(
    raised: BaseException, batched: bool
) -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    items = [(await queue.enqueue("acme", {"n": n})).item_id for n in range(3)]
    runs: list[tuple[str, int]] = []
    failures: list[BaseException] = []

    async def handler(job: Job) -> None:
        runs.append((job.item_id, job.attempt))
        if job.item_id == items[0] and job.attempt == 1:
            raise raised

    hooks = WorkerHooks(on_failure=lambda job, exc: failures.append(exc))
    worker = AsyncWorker(queue, handler, clock=clock, batched=batched, hooks=hooks)  # one slot
    stats = await run_until_idle_or_abort(worker)  # a leaked slot would never go idle
    assert (stats.failed, stats.retried, stats.completed, stats.in_flight) == (1, 1, 3, 0)
    assert failures == [raised]
    assert sorted(runs) == sorted([(items[0], 1), (items[0], 2), (items[1], 1), (items[2], 1)])
    assert (await queue.stats()).leased == 0


@pytest.mark.asyncio
async def test_a_base_exception_is_stored_with_its_type() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    item = await queue.enqueue("acme", {})

    async def handler(job: Job) -> None:
        if job.attempt == 1:
            raise SystemExit("the handler called sys.exit")
        stored = await queue.get_item(job.tenant, job.item_id)
        assert stored is not None
        assert (stored.last_error or "").startswith("builtins.SystemExit: the handler called")

    stats = await AsyncWorker(queue, handler, clock=clock).run_until_idle()
    assert (stats.retried, stats.completed) == (1, 1)
    assert await queue.get_item("acme", item.item_id) is None


@pytest.mark.asyncio
@pytest.mark.skipif(sys.version_info < (3, 11), reason="notes: Python 3.11 and later")
async def test_a_failure_with_a_long_note_and_cause_is_stored_with_its_frames() -> None:
    clock = ManualClock()
    queue = make_queue(clock)
    item = await queue.enqueue("acme", {})
    errors: list[str] = []

    async def handler(job: Job) -> None:
        if job.attempt == 2:  # the retry reads what the first attempt's fail stored
            stored = await queue.get_item(job.tenant, job.item_id)
            assert stored is not None
            errors.append(stored.last_error or "")
            return
        try:
            raise KeyError("c" * 20_000)
        except KeyError as cause:
            error: Any = ValueError("the handler failed")
            error.add_note("n" * 20_000)
            raise error from cause

    stats = await AsyncWorker(queue, handler, clock=clock).run_until_idle()
    assert (stats.retried, stats.completed) == (1, 1)
    assert await queue.get_item("acme", item.item_id) is None
    (error,) = errors
    assert error.startswith("builtins.ValueError: the handler failed\n\n")
    assert 'raise KeyError("c" * 20_000)' in error and "raise error from cause" in error
    assert "n... (19000 more characters)" in error  # the note
    assert "c... (19002 more characters)" in error  # the cause's message: str(KeyError) quotes
    assert len(error.encode()) <= MAX_ERROR_BYTES


@pytest.mark.asyncio
async def test_a_busy_worker_returns_a_dead_workers_lapsed_lease_to_work() -> None:
    """A steady inflow keeps the worker busy (it never finds the queue empty); a lease held
    by a worker that died lapses and is served again within one lease and one reap interval
    of the clock, without the worker going idle first: a claim takes it back (or the worker's
    reap, whichever comes first; the queue's own claims take back a few lapses each)."""
    clock = ManualClock()
    queue = make_queue(clock)
    orphan = await queue.enqueue("acme", {"orphan": True})
    dead = await queue.claim("dead-worker")
    assert dead is not None and dead.item_id == orphan.item_id
    claimed_at = clock.now()
    await queue.enqueue("acme", {})
    served_again: list[tuple[int, float]] = []
    worker: AsyncWorker

    async def handler(job: Job) -> None:
        if job.item_id == orphan.item_id:
            served_again.append((job.attempt, clock.now()))
            worker.stop()
            return
        if clock.now() - claimed_at > 200:
            worker.stop()  # the safety limit, in clock time: never reached when it passes
            return
        clock.advance(1)  # each job takes a second of the clock
        await queue.enqueue("acme", {})  # and brings the next one: the inflow never stops

    worker = AsyncWorker(queue, handler, clock=clock, reap_seconds=5, backstop_seconds=60)
    stats = await worker.run()
    assert queue.claims_that_found_nothing == 0  # busy all along
    assert stats.reaped <= 1
    assert stats.completed >= 2
    ((attempt, at),) = served_again
    assert attempt == 2
    assert at - claimed_at <= 30 + 5 + 1  # a lease, a reap interval, and the job in between


class ScriptedCompleteQueue(SpyQueue):
    """The first completes go as ``script`` says: "outage" raises before the complete is
    applied, "lost" applies it and loses the reply; the rest go through."""

    def __init__(self, script: list[str], **options: Any) -> None:
        super().__init__(**options)
        self.script = script
        self.completes = 0

    async def complete(self, tenant: Any, item_id: Any = None, **options: Any) -> None:
        self.completes += 1
        step = self.script[self.completes - 1] if self.completes <= len(self.script) else "ok"
        if step == "outage":
            raise QueueUnavailableError("the test's outage")
        await super().complete(tenant, item_id, **options)
        if step == "lost":
            raise StoreOutcomeUnknown("the test lost this reply")


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("script", "store_errors", "completes"),
    [
        # The job's own first send meets an outage; its first resend (through the store's
        # backoff) is applied and its reply lost; the next resend finds the item gone.
        (["outage", "lost"], 2, 4),
        # The job's own first send (the one made in the job, before any retry) is applied
        # and its reply lost; the resend finds the item gone.
        (["lost"], 1, 3),
    ],
)
async def test_a_jobs_own_complete_sent_again_through_store_errors_counts_it_once(
    script: list[str], store_errors: int, completes: int
) -> None:
    # Unbatched, each job sends its own complete. An outage is waited out, a lost reply is
    # sent again, and an item then found gone is the earlier send's doing: completed, not
    # lost, and run once.
    clock = ManualClock()
    queue = ScriptedCompleteQueue(
        script,
        policy=QueuePolicy(lease_seconds=30, backoff_base=0, random=lambda: 0.5),
        clock=clock,
    )
    first = await queue.enqueue("acme", {})
    await queue.enqueue("acme", {})
    ran: list[str] = []

    async def handler(job: Job) -> None:
        ran.append(job.item_id)

    worker = AsyncWorker(
        queue, handler, clock=clock, batched=False, concurrency=1, store_backoff_base=0.001
    )
    stats = await run_until_idle_or_abort(worker)
    assert ran[0] == first.item_id and len(ran) == len(set(ran)) == 2
    assert (stats.completed, stats.lost, stats.failed) == (2, 0, 0)
    assert stats.store_errors == store_errors
    assert queue.completes == completes  # the scripted sends, then the second job's
    assert (await queue.stats()).leased == 0
    assert await queue.get_item("acme", first.item_id) is None


@pytest.mark.asyncio
@pytest.mark.parametrize("concurrency", [1, 3])
async def test_hooks_see_every_job_a_predecessor_claimed(concurrency: int) -> None:
    # Unbatched, most jobs are claimed by their predecessor's job and many have ended by the
    # time the loop takes them in: each still gets on_job_start, then on_job_end, once.
    clock = ManualClock()
    queue = make_queue(clock)
    n = 60
    for _ in range(n):
        await queue.enqueue("acme", {})
    starts: list[str] = []
    ends: list[tuple[str, str]] = []
    hooks = WorkerHooks(
        on_job_start=lambda job: starts.append(job.item_id),
        on_job_end=lambda job, outcome: ends.append((job.item_id, outcome)),
    )
    worker = AsyncWorker(
        queue, noop, clock=clock, batched=False, concurrency=concurrency, hooks=hooks
    )
    stats = await run_until_idle_or_abort(worker)
    assert stats.completed == n and len(starts) == len(set(starts)) == n
    assert sorted(ends) == sorted((item_id, "completed") for item_id in starts)


@pytest.mark.asyncio
@pytest.mark.parametrize("batched", [True, False])
async def test_a_hand_back_at_shutdown_burns_no_attempt_batched_or_not(batched: bool) -> None:
    # The queue declares batched_operations: its release_many hands the item back without
    # counting the attempt whether or not the worker batches (fail() would count it, and
    # dead-letter an item on its last attempt).
    clock = ManualClock()
    queue = SpyQueue(
        policy=QueuePolicy(lease_seconds=30, max_attempts=1, backoff_base=0), clock=clock
    )
    item = await queue.enqueue("acme", {})
    started, release = AsyncEvent(), AsyncEvent()

    async def handler(job: Job) -> None:
        started.set()
        await release.wait(SAFETY)

    worker = AsyncWorker(queue, handler, clock=clock, shutdown_grace=0, batched=batched)

    async def drive() -> None:
        assert await started.wait(SAFETY)
        worker.stop()

    await async_gather([worker.run, drive])
    release.set()
    stats = worker.stats()
    stored = await queue.get_item("acme", item.item_id)
    assert stored is not None and (stored.state, stored.attempts) == ("ready", 0)
    assert (stats.handed_back, stats.dead) == (1, 0)
