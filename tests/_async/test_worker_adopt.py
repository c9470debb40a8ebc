"""The worker when a claim loses its reply: ``adopt`` gives every live lease of the worker a
new token, and each job the worker holds must go on with it, an item must not run twice, and
none may be left unrun (the cases at shutdown and of items claimed anew are in
test_worker_adopt_shutdown.py). Memory queue, both twins; tasks and threads meet at events,
never sleeps."""

from __future__ import annotations

from typing import Any

import pytest
from runyard import ManualClock, QueuePolicy
from runyard._async.worker import AsyncWorker
from runyard._flavours import AsyncEvent, async_gather
from runyard.errors import RunyardError, StoreOutcomeUnknown
from runyard.models import Lease, WorkItem
from runyard.worker import Job, PermanentFailure

from tests._async.memory_worker_spy import SAFETY, SpyQueue, make_queue
from tests._async.worker_adopt_support import Endings, adopt_race_worker


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
    """Holds the complete or the fail of item ``n == held`` (reporting it in flight) until an
    ``adopt`` has given that item's lease a new token: the settle carries the old one."""

    def __init__(self, *, held: int = 1, **options: Any) -> None:
        super().__init__(**options)
        self.in_flight = AsyncEvent()
        self.hold_n = held
        self.held: Lease | None = None

    async def _hold(self, lease: Any) -> None:
        if (
            isinstance(lease, Lease)
            and lease.item.payload["n"] == self.hold_n
            and self.held is None
        ):
            self.held = lease
            self.in_flight.set()
            assert await self.adopted.wait(SAFETY)

    async def complete(self, tenant: Any, item_id: Any = None, **options: Any) -> None:
        await self._hold(tenant)
        await super().complete(tenant, item_id, **options)

    async def fail(self, tenant: Any, item_id: Any = None, **options: Any) -> WorkItem:
        await self._hold(tenant)
        return await super().fail(tenant, item_id, **options)


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


@pytest.mark.asyncio
async def test_an_item_failed_and_claimed_again_during_the_flush_runs_again() -> None:
    # Unbatched, concurrency 3. Jobs 1 and 3 pass their timeout together, and the loop fails
    # them one after the other. Job 1's fail returns (the item is ready again at once) and
    # job 3's is in flight when job 2's successor claim takes item 1 and loses its reply:
    # adopt returns that new claim (attempt 2) and job 3's lease re-tokened. The slot that
    # settled item 1's first attempt holds it no more: the new claim runs; job 3's fail is
    # sent again with its adopted token.
    clock = ManualClock()
    policy = QueuePolicy(lease_seconds=30, backoff_base=0, random=lambda: 0.5)
    queue = HeldSettleQueue(held=3, policy=policy, clock=clock)
    for n in (1, 3):
        await queue.enqueue("acme", {"n": n})
    runs: list[tuple[int, int]] = []
    endings, finish = Endings(5), AsyncEvent()
    started = {n: AsyncEvent() for n in (1, 2, 3)}

    async def handler(job: Job) -> None:
        n = job.payload["n"]
        runs.append((n, job.attempt))
        started[n].set()
        if n == 2:
            assert await queue.in_flight.wait(SAFETY)
            queue.lose_next_claim_reply = True  # the claim of its successor: item 1 again
        elif job.attempt == 1:
            await finish.wait(SAFETY)  # until timed out (a thread: until the test ends)

    worker = adopt_race_worker(queue, handler, endings, clock=clock, concurrency=3, job_timeout=10)

    async def drive() -> None:
        assert await started[1].wait(SAFETY) and await started[3].wait(SAFETY)
        clock.advance(5)
        await queue.enqueue("acme", {"n": 2})
        assert await started[2].wait(SAFETY)
        clock.advance(6)  # jobs 1 and 3 are past their timeout; job 2 is not
        worker.wake()
        done = await endings.all.wait(SAFETY)
        worker.stop()
        finish.set()
        assert done, (endings.ended, runs)

    await async_gather([worker.run, drive])
    assert queue.adopted.is_set() and queue.lose_next_claim_reply is False
    assert sorted(endings.ended) == [
        "1:completed",
        "1:retried",
        "2:completed",
        "3:completed",
        "3:retried",
    ]
    assert sorted(runs) == [(1, 1), (1, 2), (2, 1), (3, 1), (3, 2)]
    stats = await queue.stats()
    assert (stats.leased, stats.ready, worker.stats().lost) == (0, 0, 0)


class AdoptRaceQueue(SpyQueue):
    """Loses the reply of the next claim that finds nothing (``lose_empty_claim_reply``):
    the worker adopts. Then it holds, until ``proceed`` is set, either the adopt's reply
    (``hold_adopt``) or the claim the worker sends after the adopt."""

    def __init__(self, *, hold_adopt: bool, **options: Any) -> None:
        super().__init__(**options)
        self.hold_adopt = hold_adopt
        self.lose_empty_claim_reply = False
        self.hold_next_claim = False
        self.proceed, self.refused = AsyncEvent(), AsyncEvent()

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
        leases = await super().adopt(worker, limit=limit)  # sets adopted
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


@pytest.mark.asyncio
@pytest.mark.parametrize("batched", [True, False])
async def test_a_lost_claim_reply_while_holding_more_than_a_page_runs_every_item(
    batched: bool,
) -> None:
    # adopt returns the oldest leases first: asked for a page smaller than what the worker
    # holds, it would return only the running jobs' leases and leave the lost claim's items
    # leased to the worker, never run.
    clock = ManualClock()
    queue = make_queue(clock)
    release, first_started, all_started = AsyncEvent(), AsyncEvent(), AsyncEvent()
    started: set[int] = set()
    total, first = 150, 120

    async def handler(job: Job) -> None:
        started.add(job.payload["n"])
        if len(started) == first:
            first_started.set()
        if len(started) == total:
            all_started.set()
        assert await release.wait(SAFETY)

    worker = AsyncWorker(queue, handler, clock=clock, concurrency=total, batched=batched)

    async def drive() -> None:
        for n in range(first):
            await queue.enqueue("acme", {"n": n})
        assert await first_started.wait(SAFETY)
        queue.lose_next_claim_reply = True
        for n in range(first, total):
            await queue.enqueue("acme", {"n": n})
        assert await all_started.wait(SAFETY), sorted(set(range(total)) - started)[:5]
        release.set()
        worker.stop()

    await async_gather([worker.run, drive])
    assert queue.lose_next_claim_reply is False  # the reply was lost
    stats = worker.stats()
    assert (stats.completed, stats.lost) == (total, 0)
