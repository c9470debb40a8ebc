"""The worker against the bare claim -> complete loop (``make bench-worker``).

For each backend (memory, the machine's Redis and PostgreSQL) and twin: burn down N no-op
jobs at concurrency C with the bare loop (C tasks or threads doing claim -> complete), then
with the worker unbatched and batched (where the queue declares ``batched_operations``);
jobs/s, CPU per job and the ratio to the bare loop of the same run. Then, with an idle worker,
enqueue -> handler start latency (p50/p99) and the commands the idle worker sends per second.
Redis and PostgreSQL enqueues do not send their wake-up hint yet, so the benchmark sends it
right after each enqueue (one extra command the real enqueue will fold in). Writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import redis
from pydantic import SecretStr
from runyard import AsyncMemoryWorkQueue, MemoryWorkQueue
from runyard._async.postgres.wakeup import AsyncPostgresWakeup
from runyard._async.redis.wakeup import AsyncRedisWakeup
from runyard._sync.postgres.wakeup import PostgresWakeup
from runyard._sync.redis.wakeup import RedisWakeup
from runyard.postgres import (
    AsyncPostgresWorkQueue,
    PostgresStoreSettings,
    PostgresWorkQueue,
    StateTables,
    schema_sql,
)
from runyard.redis import AsyncRedisWorkQueue, RedisStoreSettings, RedisWorkQueue
from runyard.redis.keys import cleanup_patterns
from runyard.worker import AsyncWorker, Job, Worker

REDIS_URL = "redis://127.0.0.1:6379/0"
PG_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=test options='-c statement_timeout=30s'"


class Counting:
    """Delegates to a queue or wake-up and counts the calls the worker makes."""

    def __init__(self, inner: Any) -> None:
        self._inner, self.calls = inner, 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr) or name in ("aclose", "close"):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return attr(*args, **kwargs)

        return counted


class Lane:
    """One backend: opens its twins' queues and wake-ups in a namespace of its own."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.tag = f"benchw_{uuid.uuid4().hex[:8]}"
        if name == "postgres":
            self.tables = StateTables(schema=self.tag)
            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                conn.execute(f'CREATE SCHEMA "{self.tag}"')
                conn.execute(schema_sql(self.tables))  # type: ignore[arg-type]

    def pg_settings(self) -> PostgresStoreSettings:
        return PostgresStoreSettings(dsn=SecretStr(PG_DSN), db_schema=self.tag, pool_max_size=20)

    def redis_settings(self) -> RedisStoreSettings:
        return RedisStoreSettings(namespace=self.tag, durable=False)

    async def open_async(self) -> tuple[Any, Any]:
        if self.name == "memory":
            return AsyncMemoryWorkQueue(), None
        if self.name == "redis":
            settings = self.redis_settings()
            queue = await AsyncRedisWorkQueue.from_url(REDIS_URL, settings=settings)
            return queue, AsyncRedisWakeup.from_url(REDIS_URL, settings=settings)
        queue = await AsyncPostgresWorkQueue.from_settings(self.pg_settings())
        return queue, await AsyncPostgresWakeup.connect(PG_DSN, tables=self.tables)

    def open_sync(self) -> tuple[Any, Any]:
        if self.name == "memory":
            return MemoryWorkQueue(), None
        if self.name == "redis":
            settings = self.redis_settings()
            queue = RedisWorkQueue.from_url(REDIS_URL, settings=settings)
            return queue, RedisWakeup.from_url(REDIS_URL, settings=settings)
        queue = PostgresWorkQueue.from_settings(self.pg_settings())
        return queue, PostgresWakeup.connect(PG_DSN, tables=self.tables)

    def hint(self) -> Callable[[], None] | None:
        """Sends what the enqueue will send, for backends whose enqueue does not yet."""
        if self.name == "redis":
            client = redis.Redis.from_url(REDIS_URL)
            key = AsyncRedisWakeup(client, namespace=self.tag).key  # type: ignore[arg-type]
            return lambda: client.lpush(key, "1") and None
        if self.name == "postgres":
            conn = psycopg.connect(PG_DSN, autocommit=True)
            channel = f"{self.tag}.{self.tables.work}_wake"
            return lambda: conn.execute("SELECT pg_notify(%s, '')", (channel,)) and None
        return None

    def drop(self) -> None:
        if self.name == "redis":
            client = redis.Redis.from_url(REDIS_URL)
            for pattern in cleanup_patterns(self.tag):
                keys = list(client.scan_iter(match=pattern, count=1000))
                if keys:
                    client.delete(*keys)
        elif self.name == "postgres":
            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{self.tag}" CASCADE')


def _cell(n: int, wall: float, cpu: float) -> dict[str, float]:
    return {"jobs_per_s": n / wall, "cpu_us_per_job": cpu / n * 1e6}


async def _async_burn(lane: Lane, n: int, conc: int, mode: str) -> dict[str, float]:
    queue, wakeup = await lane.open_async()
    for i in range(n):
        await queue.enqueue("bench", {"i": i})
    wall, cpu = time.perf_counter(), time.process_time()
    if mode == "bare":

        async def loop() -> None:
            while (lease := await queue.claim("bare")) is not None:
                await queue.complete(lease)

        await asyncio.gather(*(loop() for _ in range(conc)))
    else:

        async def noop(job: Job) -> None:
            pass

        worker = AsyncWorker(
            queue, noop, concurrency=conc, batched=mode == "batched", wakeup=wakeup
        )
        await worker.run_until_idle()
    out = _cell(n, time.perf_counter() - wall, time.process_time() - cpu)
    await queue.aclose()
    return out


def _sync_burn(lane: Lane, n: int, conc: int, mode: str) -> dict[str, float]:
    queue, wakeup = lane.open_sync()
    for i in range(n):
        queue.enqueue("bench", {"i": i})
    wall, cpu = time.perf_counter(), time.process_time()
    if mode == "bare":

        def loop() -> None:
            while (lease := queue.claim("bare")) is not None:
                queue.complete(lease)

        threads = [threading.Thread(target=loop) for _ in range(conc)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        worker = Worker(
            queue, lambda job: None, concurrency=conc, batched=mode == "batched", wakeup=wakeup
        )
        worker.run_until_idle()
    out = _cell(n, time.perf_counter() - wall, time.process_time() - cpu)
    queue.close()
    return out


def _latency_sync(lane: Lane, samples: int, idle_seconds: float) -> dict[str, float]:
    """Enqueue -> handler start with an idle sync worker; then its commands per idle second."""
    queue, wakeup = lane.open_sync()
    counted_queue = Counting(queue)
    counted_wakeup = Counting(wakeup) if wakeup is not None else None
    started = threading.Event()
    seen: list[float] = []

    def handler(job: Job) -> None:
        seen.append(time.perf_counter())
        started.set()

    worker = Worker(counted_queue, handler, wakeup=counted_wakeup)  # type: ignore[arg-type]
    runner = threading.Thread(target=worker.run)
    runner.start()
    hint = lane.hint()
    producer = queue if lane.name == "memory" else lane.open_sync()[0]
    delays = []
    for i in range(samples):
        started.clear()
        time.sleep(0.005)  # let the worker go idle again
        t0 = time.perf_counter()
        producer.enqueue("bench", {"i": i})
        if hint is not None:
            hint()
        started.wait(10)
        delays.append(seen[-1] - t0)
    counted_queue.calls = 0
    if counted_wakeup is not None:
        counted_wakeup.calls = 0
    time.sleep(idle_seconds)
    calls = counted_queue.calls + (counted_wakeup.calls if counted_wakeup else 0)
    worker.stop()
    runner.join()
    if producer is not queue:
        producer.close()
    queue.close()
    delays.sort()
    return {
        "p50_ms": statistics.median(delays) * 1e3,
        "p99_ms": delays[min(len(delays) - 1, int(len(delays) * 0.99))] * 1e3,
        "idle_commands_per_s": calls / idle_seconds,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--idle-seconds", type=float, default=3.0)
    parser.add_argument("--backends", default="memory,redis,postgres")
    parser.add_argument("--out", default="benchmarks/results/worker.json")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"items": args.items, "concurrency": args.concurrency}
    print(f"worker burn-down: {args.items} no-op jobs at concurrency {args.concurrency}")
    print(f"{'backend':<9}{'twin':<6}{'mode':<9}{'jobs/s':>9}{'cpu us/job':>12}{'x bare':>8}")
    for name in args.backends.split(","):
        lane = Lane(name)
        try:
            for twin in ("async", "sync"):
                bare: dict[str, float] | None = None
                for mode in ("bare", "unbatched", "batched"):
                    if mode == "batched" and name != "memory":
                        continue  # Redis and PostgreSQL do not declare batched_operations yet
                    if twin == "async":
                        cell = asyncio.run(_async_burn(lane, args.items, args.concurrency, mode))
                    else:
                        cell = _sync_burn(lane, args.items, args.concurrency, mode)
                    bare = bare or cell
                    cell["ratio_to_bare"] = cell["jobs_per_s"] / bare["jobs_per_s"]
                    results[f"{name}/{twin}/{mode}"] = cell
                    print(
                        f"{name:<9}{twin:<6}{mode:<9}{cell['jobs_per_s']:>9.0f}"
                        f"{cell['cpu_us_per_job']:>12.0f}{cell['ratio_to_bare']:>8.2f}"
                    )
            latency = _latency_sync(lane, args.samples, args.idle_seconds)
            results[f"{name}/sync/idle"] = latency
            print(
                f"{name:<9}sync  idle worker: enqueue->start p50 {latency['p50_ms']:.2f} ms, "
                f"p99 {latency['p99_ms']:.2f} ms; {latency['idle_commands_per_s']:.1f} commands/s"
            )
        finally:
            lane.drop()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
