"""An idle worker is quiet: with its default settings (a 1 s backstop, a reap every 5 s) it
sends a few commands per second to Redis (counted by MONITOR on a server of the test's own)
and a few statements per second to PostgreSQL (counted where the queue sends them).

The bound is per second of the measured window, so a slow machine only makes it looser."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from runyard._async.postgres.wakeup import AsyncPostgresWakeup
from runyard._async.redis.wakeup import AsyncRedisWakeup
from runyard._flavours import AsyncEvent, async_gather, async_sleep
from runyard.postgres import AsyncPsycopgExecutor, StateTables
from runyard.redis import RedisStoreSettings
from runyard.sqlite import AsyncSqliteWorkQueue
from runyard.worker import AsyncWorker, Job

from tests._async.postgres_support import CountingExecutor, open_pool
from tests._async.worker_spies import SpyPostgresQueue, SpyRedisQueue
from tests.support.postgres_plugin import PG_DSN
from tests.support.redis_commands import counting_commands
from tests.support.redis_plugin import AsyncClients, RedisTarget, fresh_namespace

SAFETY = 30.0
IDLE_SECONDS = 3.0
AT_MOST_PER_SECOND = 5  # expected: a claim per backstop, a wait per backstop, a reap per 5 s


async def noop(job: Job) -> None:
    pass


@pytest.mark.asyncio
async def test_an_idle_redis_worker_sends_a_few_commands_per_second(
    dedicated_redis_target: RedisTarget,
) -> None:
    settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
    client = AsyncClients.for_target(dedicated_redis_target)
    queue = SpyRedisQueue(client, settings=settings, owns_client=True)
    listener = AsyncClients.for_target(dedicated_redis_target)
    wakeup = AsyncRedisWakeup(listener, namespace=settings.namespace, owns_client=True)
    worker = AsyncWorker(queue, noop, wakeup=wakeup, concurrency=16)
    window: list[float] = []

    async def watch() -> None:
        try:
            assert await queue.claimed_nothing.wait(SAFETY)
            with counting_commands(dedicated_redis_target.port) as counted:
                started = time.monotonic()
                await async_sleep(IDLE_SECONDS)
                window.append(time.monotonic() - started)
        finally:
            worker.stop()
        assert counted.sent, "the idle worker sent nothing at all: was it running?"
        assert len(counted.sent) <= AT_MOST_PER_SECOND * window[0], counted.sent

    await async_gather([worker.run, watch])
    await queue.aclose()


@pytest.mark.asyncio
async def test_an_idle_postgres_worker_sends_a_few_statements_per_second(
    pg_tables: StateTables,
) -> None:
    executor = CountingExecutor(AsyncPsycopgExecutor(await open_pool()))
    queue = await SpyPostgresQueue.open(executor, tables=pg_tables, close_source=True)
    wakeup = await AsyncPostgresWakeup.connect(PG_DSN, tables=pg_tables)
    worker = AsyncWorker(queue, noop, wakeup=wakeup, concurrency=16)
    window: list[float] = []

    async def watch() -> None:
        try:
            assert await queue.claimed_nothing.wait(SAFETY)
            before = len(executor.statements)
            started = time.monotonic()
            await async_sleep(IDLE_SECONDS)
            window.append(time.monotonic() - started)
            sent = executor.statements[before:]
        finally:
            worker.stop()
        assert sent, "the idle worker sent nothing at all: was it running?"
        assert len(sent) <= AT_MOST_PER_SECOND * window[0], sent

    await async_gather([worker.run, watch])
    await queue.aclose()


@pytest.mark.asyncio
@pytest.mark.parametrize("batched", [False, True])
async def test_a_polling_worker_with_a_job_running_claims_no_more_than_it_needs(
    tmp_path: Path, batched: bool
) -> None:
    # SQLite opens no wake-up: the worker polls. Unbatched, with a job running, the loop
    # turns every 50 ms (jobs go on with their successors), and it claimed on every turn: 20
    # empty claims a second, each a write transaction on the file. Now: the claim that took
    # the job (batched: it asked for 2, so it found all there was), unbatched one more that
    # found nothing (the first was full), then none until a slot frees or the backstop (60 s
    # here) comes.
    queue = await AsyncSqliteWorkQueue.open(tmp_path / "poll.db", create_schema=True)
    release = AsyncEvent()
    started = AsyncEvent()

    async def slow(job: Job) -> None:
        started.set()
        await release.wait(SAFETY)

    worker = AsyncWorker(queue, slow, concurrency=2, batched=batched, backstop_seconds=60)
    await queue.enqueue("acme", {})
    during: list[int] = []

    async def drive() -> None:
        try:
            assert await started.wait(SAFETY)
            await async_sleep(0.5)  # ten turns of the loop at least, with the job running
            during.append(worker.stats().claim_round_trips)
            release.set()
        finally:
            worker.stop()

    await async_gather([worker.run, drive])
    await queue.aclose()
    assert worker.stats().completed == 1
    assert during == [1 if batched else 2]
