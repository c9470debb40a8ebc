"""The worker when a claim loses its reply at shutdown, or claims anew an item it held: a
hand-back or a complete in flight when an adopt re-tokens its lease, a stop waiting on an
adopt, an item enqueued again after it completed, and a lease taken back after it lapsed.
Memory queue, both twins; tasks and threads meet at events, never sleeps."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import pytest
from runyard import ManualClock, QueuePolicy
from runyard._async.worker import AsyncWorker
from runyard._flavours import AsyncEvent, async_gather
from runyard.errors import RunyardError
from runyard.models import Lease, WorkItem
from runyard.worker import Job, WorkerHooks

from tests._async.memory_worker_spy import SAFETY, SpyQueue, make_queue
from tests._async.worker_adopt_support import Endings, adopt_race_worker


class ShutdownAdoptQueue(SpyQueue):
    """Holds the next claim (``hold_next_claim``) until ``proceed``, then loses its reply;
    holds the hand-back (``release_many``, which the worker uses batched or not) of item
    ``n == 1`` until an adopt; a retryable fail of it too."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.hold_next_claim = False
        self.claim_held, self.proceed = AsyncEvent(), AsyncEvent()
        self.handing_back = AsyncEvent()

    async def claim(self, worker: str) -> Lease | None:
        if self.hold_next_claim:
            self.hold_next_claim = False
            self.lose_next_claim_reply = True
            self.claim_held.set()
            assert await self.proceed.wait(SAFETY)
        return await super().claim(worker)

    async def fail(self, tenant: Any, item_id: Any = None, **options: Any) -> WorkItem:
        if isinstance(tenant, Lease):
            await self._hold_first([tenant])
        return await super().fail(tenant, item_id, **options)

    async def release_many(self, leases: Collection[Lease]) -> list[RunyardError | None]:
        await self._hold_first(leases)
        return await super().release_many(leases)

    async def _hold_first(self, leases: Collection[Lease]) -> None:
        first = any(lease.item.payload["n"] == 1 for lease in leases)
        if first and not self.handing_back.is_set():
            self.handing_back.set()
            assert await self.adopted.wait(SAFETY)


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


class StuckAdoptQueue(ShutdownAdoptQueue):
    """An adopt is applied, and its reply held until ``adopt_release``."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.adopt_release = AsyncEvent()

    async def adopt(self, worker: str, *, limit: int = 100) -> list[Lease]:
        leases = await super().adopt(worker, limit=limit)
        assert await self.adopt_release.wait(SAFETY)
        return leases


@pytest.mark.asyncio
async def test_a_hand_back_waiting_on_an_adopt_in_flight_ends_after_handback_seconds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # As in the test above, job 1's hand-back is refused for an adopt in flight, but that
    # adopt's reply never comes: the hand-back's wait for it ends after handback_seconds, and
    # the worker exits (as abort() does); the leases lapse and are recovered.
    queue = StuckAdoptQueue(policy=QueuePolicy(backoff_base=0, random=lambda: 0.5))
    for n in (1, 2):
        await queue.enqueue("acme", {"n": n})
    endings, finish_first, returned = Endings(1), AsyncEvent(), AsyncEvent()

    async def handler(job: Job) -> None:
        if job.payload["n"] == 1:
            await finish_first.wait(SAFETY)  # until given up (a thread: until the test ends)
        elif job.payload["n"] == 2:
            await queue.enqueue("acme", {"n": 3})
            queue.hold_next_claim = True  # the claim of its successor, item 3

    worker = adopt_race_worker(queue, handler, endings, shutdown_grace=0, handback_seconds=0.2)

    async def run() -> None:
        await worker.run()
        returned.set()

    async def drive() -> None:
        assert await queue.claim_held.wait(SAFETY)
        worker.stop()
        assert await queue.handing_back.wait(SAFETY)
        queue.proceed.set()
        ended = await returned.wait(SAFETY)
        queue.adopt_release.set()  # the worker of the code before this bound waits until now
        finish_first.set()
        assert ended

    await async_gather([run, drive])
    assert queue.adopted.is_set()
    stats = worker.stats()
    assert (stats.handed_back, stats.lost) == (0, 0)
    counts = await queue.stats()  # item 2 completed (its job's successor claim never returned)
    assert (counts.leased, counts.ready) == (2, 0)  # items 1 and 3, until their leases lapse
    assert "gave up waiting on the store (adopt)" in caplog.text


class ParkingQueue(SpyQueue):
    """Parks, until an adopt, either the reply of item x's complete (``park="complete"``)
    or that of the claim its job sends next (``park="claim"``)."""

    def __init__(self, *, park: str, **options: Any) -> None:
        super().__init__(**options)
        self.park = park
        self.park_next_claim = False
        self.parked = AsyncEvent()

    async def complete(self, tenant: Any, item_id: Any = None, **options: Any) -> None:
        await super().complete(tenant, item_id, **options)
        if isinstance(tenant, Lease) and tenant.item_id == "x" and not self.parked.is_set():
            if self.park == "claim":
                self.park_next_claim = True
                return
            self.parked.set()
            assert await self.adopted.wait(SAFETY)

    async def claim(self, worker: str) -> Lease | None:
        park, self.park_next_claim = self.park_next_claim, False
        lease = await super().claim(worker)
        if park:
            self.parked.set()
            assert await self.adopted.wait(SAFETY)
        return lease


@pytest.mark.asyncio
@pytest.mark.parametrize("park", ["claim", "complete"])
async def test_an_item_enqueued_again_after_it_completed_is_adopted_as_a_new_claim(
    park: str,
) -> None:
    # Unbatched, concurrency 2. Job 1 completes item x, then waits on its successor claim
    # ("claim": its complete returned) or on its complete's reply ("complete": applied, the
    # reply not read yet; the queue's clock moved on). Meanwhile x is enqueued again (its
    # attempts start over), and job 2's successor claim takes it and loses its reply: the
    # adopted lease is a new claim of x (a later claim time), not job 1's, and must run.
    clock = ManualClock()
    queue = ParkingQueue(
        park=park, policy=QueuePolicy(backoff_base=0, random=lambda: 0.5), clock=clock
    )
    await queue.enqueue("acme", {"n": 1}, item_id="x")
    await queue.enqueue("acme", {"n": 2})
    runs: list[int] = []
    endings, enqueued_again, second_started = Endings(3), AsyncEvent(), AsyncEvent()

    async def handler(job: Job) -> None:
        runs.append(job.payload["n"])
        if job.payload["n"] == 1:
            assert await second_started.wait(SAFETY)  # the loop claimed both first
        elif job.payload["n"] == 2:
            second_started.set()
            assert await enqueued_again.wait(SAFETY)
            queue.lose_next_claim_reply = True  # the claim of its successor: x again

    worker = adopt_race_worker(queue, handler, endings, clock=ManualClock())

    async def drive() -> None:
        assert await queue.parked.wait(SAFETY)
        if park == "complete":
            clock.advance(1)
        await queue.enqueue("acme", {"n": 3}, item_id="x")
        enqueued_again.set()
        done = await endings.all.wait(SAFETY)
        worker.stop()
        assert done, (endings.ended, runs)

    await async_gather([worker.run, drive])
    assert queue.adopted.is_set() and queue.lose_next_claim_reply is False
    assert sorted(endings.ended) == ["1:completed", "2:completed", "3:completed"]
    assert sorted(runs) == [1, 2, 3] and worker.stats().lost == 0
    stats = await queue.stats()
    assert (stats.leased, stats.ready) == (0, 0)


class HeldCompleteQueue(SpyQueue):
    """Holds the reply of item x's first complete (applied) until ``release``."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.parked, self.release = AsyncEvent(), AsyncEvent()

    async def complete(self, tenant: Any, item_id: Any = None, **options: Any) -> None:
        await super().complete(tenant, item_id, **options)
        if isinstance(tenant, Lease) and tenant.item_id == "x" and not self.parked.is_set():
            self.parked.set()
            assert await self.release.wait(SAFETY)


@pytest.mark.asyncio
async def test_a_stop_waits_for_a_complete_in_flight_whose_item_was_claimed_anew() -> None:
    # Unbatched, concurrency 2, no grace. Job 1's complete of x is applied, its reply held;
    # x is enqueued again and job 2's successor claim takes it (job 3). The worker stops:
    # job 3 is handed back at once, and the worker waits for job 1's complete (it counts),
    # not only for the jobs it holds as running.
    queue = HeldCompleteQueue(policy=QueuePolicy(backoff_base=0, random=lambda: 0.5))
    await queue.enqueue("acme", {"n": 1}, item_id="x")
    await queue.enqueue("acme", {"n": 2})
    endings, returned, finish = Endings(3), AsyncEvent(), AsyncEvent()
    started = {n: AsyncEvent() for n in (1, 2, 3)}

    async def handler(job: Job) -> None:
        started[job.payload["n"]].set()
        if job.payload["n"] == 1:
            assert await started[2].wait(SAFETY)  # the loop claimed both first
        elif job.payload["n"] == 2:
            assert await queue.parked.wait(SAFETY)
            await queue.enqueue("acme", {"n": 3}, item_id="x")
        else:
            await finish.wait(SAFETY)  # until given up (a thread: until the test ends)

    worker = adopt_race_worker(queue, handler, endings, shutdown_grace=0)

    async def run() -> None:
        await worker.run()
        returned.set()

    async def drive() -> None:
        assert await started[3].wait(SAFETY)
        worker.stop()
        early = await returned.wait(0.5)  # the code before this fix ended here, uncounted
        queue.release.set()
        ended = await returned.wait(SAFETY)
        finish.set()
        assert ended and not early

    await async_gather([run, drive])
    assert sorted(endings.ended) == ["1:completed", "2:completed", "3:handed_back"]
    stats = worker.stats()
    assert (stats.completed, stats.handed_back, stats.lost) == (2, 1, 0)


@pytest.mark.asyncio
async def test_a_stop_while_a_job_waits_on_an_adopt_ends_after_handback_seconds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Unbatched, one slot: the job's successor claim loses its reply and the adopt's reply
    # never comes, so the job is still sending its settle (it is never given up) when the
    # worker stops: the stop still ends after shutdown_grace + handback_seconds.
    queue = StuckAdoptQueue(policy=QueuePolicy(backoff_base=0, random=lambda: 0.5))
    for n in (1, 2):
        await queue.enqueue("acme", {"n": n})
    returned = AsyncEvent()

    async def handler(job: Job) -> None:
        if job.payload["n"] == 1:
            queue.lose_next_claim_reply = True  # the claim of its successor, item 2

    worker = AsyncWorker(
        queue,
        handler,
        batched=False,
        backstop_seconds=60,
        reap_seconds=600,
        shutdown_grace=0,
        handback_seconds=0.2,
    )

    async def run() -> None:
        await worker.run()
        returned.set()

    async def drive() -> None:
        assert await queue.adopted.wait(SAFETY)
        worker.stop()
        ended = await returned.wait(SAFETY)
        queue.adopt_release.set()  # the worker of the code before this bound waits until now
        assert ended

    await async_gather([run, drive])
    assert "gave up waiting on the store (jobs sending their settles)" in caplog.text
    counts = await queue.stats()  # item 1 completed; item 2 leased until its lease lapses
    assert (counts.leased, counts.ready) == (1, 0)


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
