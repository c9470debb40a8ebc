"""The worker on the machine's Redis and PostgreSQL: woken by the hint enqueue sends (on Redis
sent by hand here until the enqueue script sends it; on PostgreSQL the enqueue statements'
pg_notify), and surviving an outage."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio
from runyard import QueuePolicy
from runyard._async.postgres.wakeup import AsyncPostgresWakeup
from runyard._async.redis.wakeup import AsyncRedisWakeup
from runyard._flavours import AsyncEvent, async_gather
from runyard.models import Lease, NewItem
from runyard.postgres import AsyncPostgresWorkQueue, StateTables
from runyard.postgres.flavours import AsyncConnection
from runyard.redis import AsyncRedisWorkQueue, RedisStoreSettings
from runyard.worker import AsyncWorker, Job

from tests._async.postgres_support import open_pool
from tests.support.postgres_plugin import PG_DSN
from tests.support.proxy import running_proxy
from tests.support.redis_plugin import AsyncClients, RedisTarget, fresh_namespace

SAFETY = 30.0


class SpyRedisQueue(AsyncRedisWorkQueue):
    """Reports a claim that found nothing (the worker is idle from then on)."""

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self.claimed_nothing = AsyncEvent()

    async def claim(self, worker: str) -> Lease | None:
        lease = await super().claim(worker)
        if lease is None:
            self.claimed_nothing.set()
        return lease


class SpyPostgresQueue(AsyncPostgresWorkQueue):
    """Reports a claim (single or batched) that found nothing: the worker is idle from then on."""

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self.claimed_nothing = AsyncEvent()

    async def claim(self, worker: str) -> Lease | None:
        lease = await super().claim(worker)
        if lease is None:
            self.claimed_nothing.set()
        return lease

    async def claim_many(self, worker: str, *, limit: int) -> list[Lease]:
        leases = await super().claim_many(worker, limit=limit)
        if not leases:
            self.claimed_nothing.set()
        return leases


@pytest_asyncio.fixture
async def redis_settings(local_redis_target: RedisTarget) -> AsyncIterator[RedisStoreSettings]:
    settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
    yield settings
    local_redis_target.purge(settings.namespace)


@pytest.mark.asyncio
async def test_an_idle_redis_worker_is_woken_by_a_push_to_the_wake_key(
    local_redis_target: RedisTarget, redis_settings: RedisStoreSettings
) -> None:
    client = AsyncClients.for_target(local_redis_target)
    queue = SpyRedisQueue(client, settings=redis_settings, owns_client=True)
    listener = AsyncClients.for_target(local_redis_target)
    wakeup = AsyncRedisWakeup(listener, namespace=redis_settings.namespace, owns_client=True)
    ran = AsyncEvent()

    async def handler(job: Job) -> None:
        ran.set()

    worker = AsyncWorker(queue, handler, wakeup=wakeup, backstop_seconds=60, reap_seconds=600)

    async def drive() -> None:
        assert await queue.claimed_nothing.wait(SAFETY)
        await queue.enqueue("acme", {})
        await client.lpush(wakeup.key, "1")  # what the enqueue script will send
        woken = await ran.wait(SAFETY)  # the 60 s backstop comes after the safety limit
        worker.stop()
        assert woken

    await async_gather([worker.run, drive])
    assert worker.stats().completed == 1
    await queue.aclose()


async def _woken_postgres_worker(
    tables: StateTables, enqueue: Callable[[AsyncPostgresWorkQueue], Awaitable[object]]
) -> None:
    """An idle worker with a 60 s polling backstop runs the job ``enqueue`` adds: woken by the
    enqueue statement's pg_notify at its commit, not by a poll."""
    queue = await SpyPostgresQueue.open(await open_pool(), tables=tables, close_source=True)
    wakeup = await AsyncPostgresWakeup.connect(PG_DSN, tables=tables)
    ran = AsyncEvent()

    async def handler(job: Job) -> None:
        ran.set()

    worker = AsyncWorker(queue, handler, wakeup=wakeup, backstop_seconds=60, reap_seconds=600)

    async def drive() -> None:
        assert await queue.claimed_nothing.wait(SAFETY)
        await enqueue(queue)
        woken = await ran.wait(SAFETY)  # the 60 s backstop comes after the safety limit
        worker.stop()
        assert woken

    await async_gather([worker.run, drive])
    assert worker.stats().completed == 1
    await queue.aclose()


@pytest.mark.asyncio
async def test_an_idle_postgres_worker_is_woken_by_enqueue(pg_tables: StateTables) -> None:
    async def enqueue(queue: AsyncPostgresWorkQueue) -> object:
        return await queue.enqueue("acme", {})

    await _woken_postgres_worker(pg_tables, enqueue)


@pytest.mark.asyncio
async def test_an_idle_postgres_worker_is_woken_by_enqueue_many(pg_tables: StateTables) -> None:
    async def enqueue(queue: AsyncPostgresWorkQueue) -> object:
        return await queue.enqueue_many("acme", [NewItem(payload={})])

    await _woken_postgres_worker(pg_tables, enqueue)


@pytest.mark.asyncio
async def test_an_idle_postgres_worker_is_woken_when_a_bound_enqueue_commits(
    pg_tables: StateTables,
) -> None:
    async def enqueue(queue: AsyncPostgresWorkQueue) -> object:
        async with (
            await AsyncConnection.connect(PG_DSN) as conn,
            conn.transaction(),
        ):
            return await queue.bound(conn).enqueue("acme", {})

    await _woken_postgres_worker(pg_tables, enqueue)


@pytest.mark.asyncio
async def test_a_redis_outage_through_the_proxy_is_survived(
    local_redis_target: RedisTarget, redis_settings: RedisStoreSettings
) -> None:
    direct = AsyncRedisWorkQueue(
        AsyncClients.for_target(local_redis_target), settings=redis_settings, owns_client=True
    )
    items = {(await direct.enqueue("acme", {"n": n})).item_id for n in range(3)}
    runs: list[str] = []

    async def handler(job: Job) -> None:
        runs.append(job.item_id)

    with running_proxy(local_redis_target.port) as proxy:
        target = RedisTarget(kind="server", host="127.0.0.1", port=proxy.port)
        queue = AsyncRedisWorkQueue(
            AsyncClients.for_target(target),
            settings=redis_settings.model_copy(update={"retry_attempts": 2}),
            policy=QueuePolicy(),
            owns_client=True,
        )
        proxy.refuse_connections(8, how="reset")  # past the store's own retry budget
        proxy.drop_next_reply()  # and the first request that gets through loses its reply
        worker = AsyncWorker(queue, handler, store_backoff_base=0.01, concurrency=2)
        stats = await worker.run_until_idle()
        await queue.aclose()
    assert proxy.refused == 8 and proxy.dropped == 1
    assert stats.store_errors >= 1
    assert sorted(runs) == sorted(items) and stats.completed == 3
    assert (await direct.stats()).leased == 0
    await direct.aclose()
