"""The worker on every backend, memory, Redis, PostgreSQL and SQLite: a job three lease lengths
long completes once, and a handler that keeps failing is retried after each backoff and
dead-lettered at max_attempts. Time moves by an injected ManualClock, the stores' explicit
override of the server's clock."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from pathlib import Path
from typing import Any, cast

import pytest
import pytest_asyncio
from runyard import AsyncMemoryWorkQueue, ManualClock, QueuePolicy
from runyard._async.protocols import AsyncWorkQueue
from runyard._flavours import AsyncEvent, async_sleep
from runyard.models import Lease
from runyard.redis import AsyncRedisWorkQueue, RedisStoreSettings
from runyard.sqlite import AsyncSqliteWorkQueue
from runyard.worker import AsyncWorker, Job

from tests._async.postgres_support import open_queue
from tests.support.redis_plugin import AsyncClients, RedisTarget, fresh_namespace

SAFETY = 30.0
Opener = Callable[[ManualClock, QueuePolicy], Awaitable[AsyncWorkQueue]]


class Beating:
    """Delegates to a queue; sets ``beats`` after each heartbeat round trip."""

    def __init__(self, inner: AsyncWorkQueue) -> None:
        self._inner = inner
        self.beats = AsyncEvent()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def heartbeat(self, *args: Any, **kwargs: Any) -> Lease:
        lease: Lease = await self._inner.heartbeat(*args, **kwargs)
        self.beats.set()
        return lease

    async def heartbeat_many(self, leases: Collection[Lease]) -> list[Any]:
        renewed: list[Any] = await self._inner.heartbeat_many(leases)  # type: ignore[attr-defined]
        self.beats.set()
        return renewed


@pytest_asyncio.fixture(params=["memory", "redis", "postgres", "sqlite"])
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    opened: list[AsyncWorkQueue] = []
    cleanup: list[Callable[[], Any]] = []

    async def open_one(clock: ManualClock, policy: QueuePolicy) -> AsyncWorkQueue:
        queue: AsyncWorkQueue
        if request.param == "memory":
            queue = AsyncMemoryWorkQueue(clock=clock, policy=policy)
        elif request.param == "redis":
            target: RedisTarget = request.getfixturevalue("local_redis_target")
            settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
            cleanup.append(lambda: target.purge(settings.namespace))
            queue = AsyncRedisWorkQueue(
                AsyncClients.for_target(target),
                settings=settings,
                clock=clock,
                policy=policy,
                owns_client=True,
            )
        elif request.param == "postgres":
            queue = await open_queue(request.getfixturevalue("pg_tables"), clock, policy)
        else:
            queue = await AsyncSqliteWorkQueue.open(
                tmp_path / "worker.db", create_schema=True, clock=clock, policy=policy
            )
        opened.append(queue)
        return queue

    yield open_one
    for queue in opened:
        await queue.aclose()
    for clean in cleanup:
        clean()


@pytest.mark.asyncio
@pytest.mark.parametrize("batched", [True, False])
async def test_a_job_three_lease_lengths_long_completes_once(opener: Opener, batched: bool) -> None:
    clock = ManualClock()
    queue = Beating(await opener(clock, QueuePolicy(lease_seconds=30)))
    item = await queue.enqueue("acme", {})
    runs: list[int] = []
    worker: AsyncWorker

    async def handler(job: Job) -> None:
        runs.append(job.token)
        for _ in range(9):  # 9 x 10 s = 90 s = three 30 s leases, each 10 s renewed
            queue.beats.clear()
            clock.advance(10)
            worker.wake()
            assert await queue.beats.wait(SAFETY), "no heartbeat round"

    worker = AsyncWorker(cast(AsyncWorkQueue, queue), handler, clock=clock, batched=batched)
    stats = await worker.run_until_idle()
    assert (stats.completed, stats.lost, len(runs)) == (1, 0, 1)
    assert stats.heartbeat_round_trips == 9
    assert await queue.get_item("acme", item.item_id) is None


@pytest.mark.asyncio
@pytest.mark.parametrize("batched", [True, False])
async def test_a_job_whose_lease_reaches_its_cap_is_given_up_at_the_cap(
    opener: Opener, batched: bool
) -> None:
    """A lease stops at max_lease_seconds (45 s here) whatever the heartbeats: the job is
    given up then (a task is cancelled, a thread sees ``job.cancelled``), counted lost, and no
    settle is sent. It ran on until the next heartbeat round (50 s here; lease/3 after the
    cap at worst), while the lapsed item could be claimed and run again beside it."""
    clock = ManualClock()
    queue = Beating(await opener(clock, QueuePolicy(lease_seconds=30, max_lease_seconds=45)))
    item = await queue.enqueue("acme", {})
    runs: list[int] = []
    seen: list[bool] = []
    ended = AsyncEvent()
    worker: AsyncWorker

    async def handler(job: Job) -> None:
        runs.append(job.token)
        for _ in range(4):  # renewed at 10 s (to 40 s), then at 20, 30, 40 s to the cap, 45 s
            queue.beats.clear()
            clock.advance(10)
            worker.wake()
            assert await queue.beats.wait(SAFETY), "no heartbeat round"
        clock.advance(5)  # 45 s: the cap; the next heartbeat round is due at 50 s
        worker.wake()
        try:
            deadline = time.monotonic() + SAFETY
            while not job.cancelled and time.monotonic() < deadline:
                await async_sleep(0.005)
        finally:
            seen.append(job.cancelled)
            ended.set()

    worker = AsyncWorker(cast(AsyncWorkQueue, queue), handler, clock=clock, batched=batched)
    stats = await worker.run_until_idle()
    assert await ended.wait(SAFETY)  # the thread twin's job ends after the worker gave it up
    assert (stats.completed, stats.lost, runs, seen) == (0, 1, runs[:1], [True])
    assert stats.heartbeat_round_trips == 4
    held = await queue.get_item("acme", item.item_id)
    assert held is not None and held.state == "leased"  # not settled: it lapses, then is reaped


@pytest.mark.asyncio
@pytest.mark.parametrize("batched", [True, False])
async def test_a_failing_handler_is_retried_after_each_backoff_then_dead_lettered(
    opener: Opener, batched: bool
) -> None:
    clock = ManualClock()
    policy = QueuePolicy(max_attempts=3, backoff_base=10, random=lambda: 0.5)
    queue = await opener(clock, policy)
    ok = await queue.enqueue("acme", {"ok": True})
    bad = await queue.enqueue("acme", {"ok": False})
    attempts: list[int] = []

    async def handler(job: Job) -> None:
        if not job.payload["ok"]:
            attempts.append(job.attempt)
            raise ValueError(f"boom on attempt {job.attempt}")

    worker = AsyncWorker(queue, handler, clock=clock, batched=batched, concurrency=2)
    for attempt in (1, 2):
        await worker.run_until_idle()  # idle: the retry is not due until its backoff ends
        waiting = await queue.get_item("acme", bad.item_id)
        assert waiting is not None and (waiting.state, waiting.attempts) == ("ready", attempt)
        assert waiting.available_at == clock.now() + policy.backoff(attempt)
        clock.advance(policy.backoff(attempt))
    stats = await worker.run_until_idle()
    assert attempts == [1, 2, 3]
    assert (stats.completed, stats.failed, stats.retried, stats.dead) == (1, 3, 2, 1)
    assert await queue.get_item("acme", ok.item_id) is None
    (letter,) = await queue.dead_letters("acme")
    assert letter.item.item_id == bad.item_id
    error = letter.item.last_error or ""
    assert error.startswith("builtins.ValueError: boom on attempt 3")
    assert "Traceback" in error and "in handler" in error
