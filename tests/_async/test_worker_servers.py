"""The worker on the machine's Redis and PostgreSQL: woken by the hint enqueue sends (the Redis
enqueue script; the PostgreSQL enqueue statements' pg_notify), and surviving an outage."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool
from runyard import QueuePolicy
from runyard._async.postgres.wakeup import AsyncPostgresWakeup
from runyard._async.redis.wakeup import AsyncRedisWakeup
from runyard._flavours import AsyncEvent, async_gather, async_sleep
from runyard.models import NewItem
from runyard.postgres import AsyncPostgresWorkQueue, StateTables
from runyard.postgres.flavours import AsyncConnection
from runyard.redis import AsyncRedisWorkQueue, RedisStoreSettings
from runyard.worker import AsyncWorker, Job

from tests._async.postgres_support import open_pool, open_queue
from tests._async.worker_spies import (
    SpyPostgresQueue,
    SpyPostgresWakeup,
    SpyRedisQueue,
    SpyRedisWakeup,
)
from tests.support.postgres_plugin import PG_DSN, PG_PORT
from tests.support.proxy import running_proxy
from tests.support.redis_plugin import AsyncClients, RedisTarget, fresh_namespace

SAFETY = 30.0


@pytest_asyncio.fixture
async def redis_settings(local_redis_target: RedisTarget) -> AsyncIterator[RedisStoreSettings]:
    settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
    yield settings
    local_redis_target.purge(settings.namespace)


async def _woken_by_the_enqueue_script(
    target: RedisTarget, settings: RedisStoreSettings, *, own: bool = False
) -> None:
    """``own``: the worker is given no wake-up and opens the queue's (open_wakeup)."""
    client = AsyncClients.for_target(target)
    queue = SpyRedisQueue(client, settings=settings, owns_client=True)
    listener = AsyncClients.for_target(target)
    wakeup: AsyncRedisWakeup | None = AsyncRedisWakeup(
        listener, namespace=settings.namespace, owns_client=True
    )
    if own and wakeup is not None:
        await wakeup.aclose()
        wakeup = None
    ran = AsyncEvent()

    async def handler(job: Job) -> None:
        ran.set()

    worker = AsyncWorker(queue, handler, wakeup=wakeup, backstop_seconds=60, reap_seconds=600)

    async def drive() -> None:
        assert await queue.claimed_nothing.wait(SAFETY)
        await queue.enqueue("acme", {})  # its script pushes the hint to the wake key
        woken = await ran.wait(SAFETY)  # the 60 s backstop comes after the safety limit
        worker.stop()
        assert woken

    await async_gather([worker.run, drive])
    assert worker.stats().completed == 1
    await queue.aclose()


@pytest.mark.asyncio
async def test_an_idle_redis_worker_is_woken_by_the_enqueue_script(
    local_redis_target: RedisTarget, redis_settings: RedisStoreSettings
) -> None:
    await _woken_by_the_enqueue_script(local_redis_target, redis_settings)


@pytest.mark.asyncio
async def test_a_redis_worker_given_no_wakeup_opens_the_queues_own(
    local_redis_target: RedisTarget, redis_settings: RedisStoreSettings
) -> None:
    # It polled at its backstop (a 1 s default: 0.3 to 0.6 s from enqueue to start, in the
    # reviewer's run) unless the caller built the wake-up as the CLI does.
    await _woken_by_the_enqueue_script(local_redis_target, redis_settings, own=True)


@pytest.mark.slow
@pytest.mark.asyncio
async def test_an_idle_redis_cluster_worker_is_woken_by_the_enqueue_script(
    cluster_redis_target: RedisTarget,
) -> None:
    settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
    try:
        await _woken_by_the_enqueue_script(cluster_redis_target, settings)
    finally:
        cluster_redis_target.purge(settings.namespace)


@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_redis_cluster_queue_opens_no_wakeup_of_its_own(
    cluster_redis_target: RedisTarget,
) -> None:
    # Shared, its BLPOP took a connection of the one node holding the queue's keys, whose pool
    # the queue's calls share: at max_connections=1 the worker hung as on a single server.
    settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
    client = AsyncClients.for_target(cluster_redis_target)
    queue = AsyncRedisWorkQueue(client, settings=settings, owns_client=True)
    try:
        assert await queue.open_wakeup() is None
    finally:
        await queue.aclose()


@pytest.mark.asyncio
async def test_a_busy_redis_worker_leaves_the_hint_to_an_idle_one(
    local_redis_target: RedisTarget, redis_settings: RedisStoreSettings
) -> None:
    # BLPOP hands a hint to one blocked worker. A, whose one slot is busy, must not block on
    # the wake key: the hint of the next enqueue is B's, who is idle (backstops of 60 s, past
    # the test's safety limit: only a hint starts a job here).
    release, long_started, decided = AsyncEvent(), AsyncEvent(), AsyncEvent()
    started: dict[str, str] = {}

    def member(name: str) -> tuple[AsyncWorker, SpyRedisQueue, SpyRedisWakeup]:
        queue = SpyRedisQueue(
            AsyncClients.for_target(local_redis_target), settings=redis_settings, owns_client=True
        )
        wakeup = SpyRedisWakeup(
            AsyncClients.for_target(local_redis_target),
            namespace=redis_settings.namespace,
            owns_client=True,
        )

        async def handler(job: Job) -> None:
            started[job.payload["n"]] = name
            if job.payload["n"] == "long":
                long_started.set()
                assert await release.wait(SAFETY)
            else:
                decided.set()

        worker = AsyncWorker(
            queue, handler, wakeup=wakeup, concurrency=1, backstop_seconds=60, reap_seconds=600
        )
        return worker, queue, wakeup

    a, queue_a, wakeup_a = member("A")
    b, queue_b, wakeup_b = member("B")

    async def drive() -> None:
        assert await queue_a.claimed_nothing.wait(SAFETY)
        assert await wakeup_a.waiting.wait(SAFETY)
        await queue_a.enqueue("acme", {"n": "long"})
        assert await long_started.wait(SAFETY)
        wakeup_a.hinted = decided  # the hint of "long" was A's; another one decides
        await async_gather([b.run, enqueue_for_b])

    async def enqueue_for_b() -> None:
        assert await queue_b.claimed_nothing.wait(SAFETY)
        assert await wakeup_b.waiting.wait(SAFETY)
        await queue_b.enqueue("acme", {"n": "short"})
        assert await decided.wait(SAFETY)  # B started it, or busy A popped its hint
        release.set()
        a.stop()
        b.stop()

    await async_gather([a.run, drive])
    assert started == {"long": "A", "short": "B"}
    await queue_a.aclose()
    await queue_b.aclose()


@pytest.mark.asyncio
async def test_a_hint_a_worker_pops_once_its_slots_filled_is_given_back(
    local_redis_target: RedisTarget, redis_settings: RedisStoreSettings
) -> None:
    # A (one slot) blocks on the wake key while idle; a retry falling due then fills its slot
    # (not a hint), and its block goes on. B, idle, blocks after A. The next enqueue's hint
    # is popped by A, who is busy: A gives it back and B starts the job (backstops of 60 s,
    # past the test's safety limit: only a hint starts a job here).
    policy = QueuePolicy(backoff_base=2.0, random=lambda: 0.5)  # the retry: 1 s after the fail
    release, retried, short_started = AsyncEvent(), AsyncEvent(), AsyncEvent()
    started: list[tuple[str, str, int]] = []
    blocked_before_retry: list[bool] = []

    def member(name: str) -> tuple[AsyncWorker, SpyRedisQueue, SpyRedisWakeup]:
        queue = SpyRedisQueue(
            AsyncClients.for_target(local_redis_target),
            settings=redis_settings,
            policy=policy,
            owns_client=True,
        )
        wakeup = SpyRedisWakeup(
            AsyncClients.for_target(local_redis_target),
            namespace=redis_settings.namespace,
            owns_client=True,
        )

        async def handler(job: Job) -> None:
            started.append((job.payload["n"], name, job.attempt))
            if job.payload["n"] == "short":
                short_started.set()
            elif job.attempt == 1:
                wakeup.waiting.clear()  # the next block comes after this failure
                raise RuntimeError("flaky")
            else:
                blocked_before_retry.append(wakeup.waiting.is_set())
                retried.set()
                assert await release.wait(SAFETY)

        worker = AsyncWorker(
            queue, handler, wakeup=wakeup, concurrency=1, backstop_seconds=60, reap_seconds=600
        )
        return worker, queue, wakeup

    a, queue_a, wakeup_a = member("A")
    b, queue_b, wakeup_b = member("B")

    async def drive() -> None:
        assert await queue_a.claimed_nothing.wait(SAFETY)
        assert await wakeup_a.waiting.wait(SAFETY)
        await queue_a.enqueue("acme", {"n": "retried"})
        assert await retried.wait(SAFETY)  # A's slot is full: its block from before goes on
        await async_gather([b.run, enqueue_for_b])

    async def enqueue_for_b() -> None:
        assert await queue_b.claimed_nothing.wait(SAFETY)
        assert await wakeup_b.waiting.wait(SAFETY)
        await queue_b.enqueue("acme", {"n": "short"})
        assert await short_started.wait(SAFETY)  # only a hint starts it within the limit
        release.set()
        a.stop()
        b.stop()

    await async_gather([a.run, drive])
    assert blocked_before_retry == [True]  # A was blocked on the key when its slot filled
    assert started == [("retried", "A", 1), ("retried", "A", 2), ("short", "B", 1)]
    await queue_a.aclose()
    await queue_b.aclose()


async def _woken_postgres_worker(
    tables: StateTables,
    enqueue: Callable[[AsyncPostgresWorkQueue], Awaitable[object]],
    *,
    own: bool = False,
    pool: AsyncConnectionPool[Any] | None = None,
) -> None:
    """An idle worker with a 60 s polling backstop runs the job ``enqueue`` adds: woken by the
    enqueue statement's pg_notify at its commit, not by a poll. ``own``: the worker is given
    no wake-up and opens the queue's (open_wakeup, with its pool's conninfo and keywords)."""
    pool = pool or await open_pool()
    queue = await SpyPostgresQueue.open(pool, tables=tables, close_source=True)
    wakeup = None if own else await AsyncPostgresWakeup.connect(PG_DSN, tables=tables)
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
async def test_a_postgres_worker_given_no_wakeup_opens_the_queues_own(
    pg_tables: StateTables,
) -> None:
    async def enqueue(queue: AsyncPostgresWorkQueue) -> object:
        return await queue.enqueue("acme", {})

    await _woken_postgres_worker(pg_tables, enqueue, own=True)


@pytest.mark.asyncio
async def test_a_postgres_worker_listens_where_its_pool_connects(pg_tables: StateTables) -> None:
    # The pool's keywords name the database: the wake-up took the conninfo alone, listened on
    # the database 'postgres' and was never woken (the job started at the backstop).
    where = conninfo_to_dict(PG_DSN)
    dbname = where.pop("dbname")
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        make_conninfo("", **where), kwargs={"dbname": dbname}, min_size=1, open=False
    )
    await pool.open(wait=True)

    async def enqueue(queue: AsyncPostgresWorkQueue) -> object:
        return await queue.enqueue("acme", {})

    await _woken_postgres_worker(pg_tables, enqueue, own=True, pool=pool)


@pytest.mark.asyncio
async def test_a_redis_worker_on_a_pool_of_one_connection_claims_beside_its_wakeup(
    local_redis_target: RedisTarget, redis_settings: RedisStoreSettings
) -> None:
    # The worker's own wake-up blocked on the queue's only connection while the job ran (a
    # slot was free): its settle, and every claim after, waited out the pool timeout.
    settings = redis_settings.model_copy(update={"max_connections": 1, "pool_timeout_seconds": 2})
    url = f"redis://{local_redis_target.host}:{local_redis_target.port}/0"
    queue = await AsyncRedisWorkQueue.from_url(url, settings=settings)
    await queue.enqueue("acme", {})
    done: list[str] = []

    async def handler(job: Job) -> None:
        await async_sleep(1.0)  # the listener blocks meanwhile, on a connection of its own
        done.append(job.item_id)

    worker = AsyncWorker(queue, handler, concurrency=2, backstop_seconds=60, reap_seconds=600)
    stats = await worker.run_until_idle()
    await queue.aclose()
    assert (stats.completed, stats.store_errors, len(done)) == (1, 0, 1)


async def _blpop_clients(client: Any) -> list[str]:
    """The server's connections whose last command was BLPOP (a wake-up's: the queue's own
    calls never send one)."""
    return [str(c["id"]) for c in await client.client_list() if c.get("cmd") == "blpop"]


async def _until(condition: Callable[[], Awaitable[bool]]) -> bool:
    """Whether ``condition`` holds, looked at every 10 ms for up to SAFETY seconds."""
    deadline = time.monotonic() + SAFETY
    while not await condition() and time.monotonic() < deadline:
        await async_sleep(0.01)
    return await condition()


@pytest.mark.asyncio
async def test_closing_a_queues_own_redis_wakeup_ends_a_wait_blocked_on_it(
    dedicated_redis_target: RedisTarget, redis_settings: RedisStoreSettings
) -> None:
    # Its client did not close its pool (redis-py leaves a pool passed in open): the wait
    # went on blocking until its block time (4 s) and the connection stayed open. On a
    # server of the session's own, the close comes once the server shows the wait blocked.
    url = f"redis://{dedicated_redis_target.host}:{dedicated_redis_target.port}/0"
    queue = await AsyncRedisWorkQueue.from_url(url, settings=redis_settings)
    wakeup = await queue.open_wakeup()
    assert wakeup is not None and wakeup.block_seconds == 4.0
    admin = AsyncClients.for_target(dedicated_redis_target)
    outcome: list[object] = []

    async def wait() -> None:
        try:
            outcome.append(await wakeup.wait(4.0))
        except Exception as exc:  # the connection closed under it
            outcome.append(exc)

    async def close() -> None:
        async def blocked() -> bool:
            return bool(await _blpop_clients(admin))

        try:
            assert await _until(blocked)
        finally:
            await wakeup.aclose()

    await async_gather([wait, close])
    await admin.aclose()
    await queue.aclose()
    assert len(outcome) == 1 and isinstance(outcome[0], Exception), outcome


@pytest.mark.asyncio
async def test_a_stopped_redis_worker_leaves_no_listener_on_the_wake_key(
    dedicated_redis_target: RedisTarget, redis_settings: RedisStoreSettings
) -> None:
    # A listener that outlived run() (the thread twin's, blocked in BLPOP) took the hints
    # meant for idle workers and dropped them: theirs started at the backstop instead. On a
    # server of the session's own: a worker on the queue's own wake-up idles (its listener
    # blocked in BLPOP, seen in the server's counts), is woken for a job, and is stopped while
    # idle again; once run() returns no connection whose last command was BLPOP (the wake-up's:
    # the queue's never send one) is left: its client closed, the server drops it (looked at
    # until it is gone, 5 s at most; a listener left behind keeps its connection).
    url = f"redis://{dedicated_redis_target.host}:{dedicated_redis_target.port}/0"
    queue = await AsyncRedisWorkQueue.from_url(url, settings=redis_settings)
    client = AsyncClients.for_target(dedicated_redis_target)
    ran = AsyncEvent()

    async def handler(job: Job) -> None:
        ran.set()

    async def blpops() -> int:
        return int((await client.info("commandstats")).get("cmdstat_blpop", {}).get("calls", 0))

    async def none_left() -> bool:
        return await _blpop_clients(client) == []

    async def one_run() -> None:
        worker = AsyncWorker(queue, handler, backstop_seconds=60, reap_seconds=600)
        ran.clear()
        waits = [await blpops()]

        async def blocked() -> bool:
            return await blpops() > waits[-1] and bool(await _blpop_clients(client))

        async def drive() -> None:
            try:
                assert await _until(blocked)  # idle: its listener waits on the wake key
                await queue.enqueue("acme", {})
                assert await ran.wait(SAFETY)  # woken (the backstop is 60 s)
                waits.append(await blpops())
                assert await _until(blocked)  # idle again
            finally:
                worker.stop()

        await async_gather([worker.run, drive])
        assert worker.stats().completed == 1
        assert await _until(none_left)

    try:
        for _ in range(2):
            await one_run()
    finally:
        await client.aclose()
        await queue.aclose()


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
async def test_a_postgres_worker_listens_again_after_its_listen_connection_is_lost(
    pg_tables: StateTables, caplog: pytest.LogCaptureFixture
) -> None:
    # The LISTEN backend is terminated: the wake-up connects and LISTENs again, and reports a
    # wake for the hints it may have missed meanwhile (the worker claims, finding nothing);
    # then an enqueue's hint starts a job again (backstop 60 s, past the safety limit).
    queue = await SpyPostgresQueue.open(await open_pool(), tables=pg_tables, close_source=True)
    wakeup = await AsyncPostgresWakeup.connect(PG_DSN, tables=pg_tables)
    ran = AsyncEvent()

    async def handler(job: Job) -> None:
        ran.set()

    worker = AsyncWorker(queue, handler, wakeup=wakeup, backstop_seconds=60, reap_seconds=600)

    async def drive() -> None:
        assert await queue.claimed_nothing.wait(SAFETY)
        queue.claimed_nothing.clear()
        async with await AsyncConnection.connect(PG_DSN, autocommit=True) as admin:
            cursor = await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = %s",
                (f'LISTEN "{wakeup.channel}"',),
            )
            assert await cursor.fetchall() == [(True,)]
        relistened = await queue.claimed_nothing.wait(SAFETY)  # the wake after the reconnect
        if relistened:
            await queue.enqueue("acme", {})
        woken = relistened and await ran.wait(SAFETY)
        worker.stop()
        assert woken

    with caplog.at_level(logging.INFO, logger="runyard.worker"):
        await async_gather([worker.run, drive])
    assert worker.stats().completed == 1
    said = [(r.levelname, r.message) for r in caplog.records if "wake-up" in r.message]
    assert [level for level, _ in said] == ["WARNING", "INFO"]
    assert said[0][1].startswith(f"wake-up connection on {wakeup.channel} lost")
    assert said[1][1] == f"wake-up connection on {wakeup.channel} is live again"
    await queue.aclose()


@pytest.mark.asyncio
async def test_a_busy_postgres_worker_keeps_reading_its_notifications(
    pg_tables: StateTables,
) -> None:
    # Every LISTEN connection gets every notification, and one that is not read holds the
    # server's notification queue (its backend blocks writing to it): a worker whose only
    # slot is busy reads the hints of three enqueues all the same, then claims their items
    # once the slot is free (backstop 60 s, past the safety limit).
    queue = await SpyPostgresQueue.open(await open_pool(), tables=pg_tables, close_source=True)
    wakeup = await SpyPostgresWakeup.connect(PG_DSN, tables=pg_tables)
    assert isinstance(wakeup, SpyPostgresWakeup)
    release, long_started, shorts_done = AsyncEvent(), AsyncEvent(), AsyncEvent()
    shorts: list[int] = []

    async def handler(job: Job) -> None:
        if job.payload["n"] == "long":
            long_started.set()
            assert await release.wait(SAFETY)
        else:
            shorts.append(job.payload["n"])
            if len(shorts) == 3:
                shorts_done.set()

    worker = AsyncWorker(
        queue, handler, wakeup=wakeup, concurrency=1, backstop_seconds=60, reap_seconds=600
    )

    async def drive() -> None:
        assert await queue.claimed_nothing.wait(SAFETY)
        await queue.enqueue("acme", {"n": "long"})
        assert await long_started.wait(SAFETY)
        read = True
        for n in range(3):
            # One transaction, one notification, read while the one slot is busy; one at a
            # time: notifications that arrive together are read in one wait, one hint.
            wakeup.expect(1)
            await queue.enqueue("acme", {"n": n})
            read = read and await wakeup.counted.wait(SAFETY)
        release.set()
        done = await shorts_done.wait(SAFETY)
        worker.stop()
        assert read and done

    await async_gather([worker.run, drive])
    assert sorted(shorts) == [0, 1, 2]
    assert worker.stats().completed == 4
    await queue.aclose()


async def _listen_backends(channel: str, *, until_none: bool) -> int:
    """How many backends LISTEN on ``channel``; with ``until_none``, asked again (up to the
    safety limit) until none is left, as a closed or terminated backend takes a moment to
    leave pg_stat_activity."""
    deadline = time.monotonic() + SAFETY
    async with await AsyncConnection.connect(PG_DSN, autocommit=True) as admin:
        while True:
            cursor = await admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE query = %s", (f'LISTEN "{channel}"',)
            )
            row = await cursor.fetchone()
            assert row is not None
            if not until_none or row[0] == 0 or time.monotonic() > deadline:
                return int(row[0])
            await async_sleep(0.05)


@pytest.mark.asyncio
async def test_a_postgres_wakeup_closed_during_its_reconnect_leaves_no_connection(
    pg_tables: StateTables,
) -> None:
    # The LISTEN backend is terminated; the wake-up sees the loss, and its next wait is in
    # the backoff before it reconnects when the worker's shutdown closes it: that wait
    # reports no wake and no LISTEN connection is left behind.
    wakeup = await AsyncPostgresWakeup.connect(PG_DSN, tables=pg_tables)
    assert await _listen_backends(wakeup.channel, until_none=False) == 1
    async with await AsyncConnection.connect(PG_DSN, autocommit=True) as admin:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = %s",
            (f'LISTEN "{wakeup.channel}"',),
        )
    assert not await wakeup.wait(SAFETY)  # the loss: the connection is dropped

    async def reconnecting() -> bool:
        return await wakeup.wait(SAFETY)

    async def closing() -> bool:
        await wakeup.aclose()
        return False

    woke, _ = await async_gather([reconnecting, closing])
    assert not woke
    assert await _listen_backends(wakeup.channel, until_none=True) == 0
    assert not await wakeup.wait(0.01)  # closed: it does not connect again


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


@pytest.mark.asyncio
async def test_a_postgres_outage_through_the_proxy_is_survived(pg_tables: StateTables) -> None:
    """Mid-run every connection is reset and the next two are refused (the pool reconnects
    with its own backoff: a couple of seconds without the server); the worker waits it out
    and every job is completed exactly once."""
    direct = await open_queue(pg_tables)
    items = {(await direct.enqueue("acme", {"n": n})).item_id for n in range(6)}
    runs: list[str] = []

    with running_proxy(PG_PORT) as proxy:

        async def handler(job: Job) -> None:
            runs.append(job.item_id)
            if len(runs) == 1:  # the outage starts while the first job runs
                proxy.refuse_connections(2, how="reset")
                assert proxy.drop_connections() >= 1

        dsn = PG_DSN.replace(f"port={PG_PORT}", f"port={proxy.port}")
        assert dsn != PG_DSN
        # A short wait for a connection: while the pool reconnects, calls fail (pool exhausted)
        # past the queue's own retry, and the worker's backoff takes over.
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            dsn, min_size=1, max_size=4, timeout=0.5, open=False
        )
        await pool.open(wait=True)
        queue = await AsyncPostgresWorkQueue.open(
            pool, tables=pg_tables, policy=QueuePolicy(), close_source=True, retry_attempts=1
        )
        worker = AsyncWorker(queue, handler, store_backoff_base=0.05, concurrency=2)
        stats = await worker.run_until_idle()
        await queue.aclose()
    assert proxy.refused == 2
    assert stats.store_errors >= 1
    assert sorted(runs) == sorted(items) and stats.completed == 6
    after = await direct.stats()
    assert (after.leased, after.ready) == (0, 0)
    await direct.aclose()


@pytest.mark.asyncio
async def test_a_postgres_wakeup_closed_under_a_wait_ends_it_without_a_warning(
    pg_tables: StateTables, caplog: pytest.LogCaptureFixture
) -> None:
    # A worker stopping closes its wake-up while its listener waits on it: that wait ends
    # quietly (False), it is not a lost connection to warn about and reconnect.
    wakeup = await SpyPostgresWakeup.connect(PG_DSN, tables=pg_tables)
    woke: list[bool] = []

    async def listen() -> None:
        woke.append(await wakeup.wait(SAFETY))

    async def close() -> None:
        assert await wakeup.waiting.wait(SAFETY)  # in the wait or about to read: the same
        await wakeup.aclose()

    with caplog.at_level(logging.INFO, logger="runyard"):
        await async_gather([listen, close])
    assert woke == [False]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert await wakeup.wait(0.01) is False  # closed for good: no reconnect
