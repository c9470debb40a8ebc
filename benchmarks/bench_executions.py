"""Execution store throughput (``make bench-executions``): commits/s per path, backend and twin.

Two commit paths, one execution committed again and again at concurrency 1:

- ``fast``: the execution and its processed mark (``commit(exe, processed_event_id=...)``);
- ``full``: the same plus one emitted event, one timer schedule and one trace step.

Beside them, in the same run and twin: the raw redis-py round trip (``EVALSHA`` of a one-line
script) and the same full commit done the WATCH/MULTI/EXEC way (``INCR`` for the outbox seq and
the trace index, ``WATCH`` + ``HGET`` of the version, then ``MULTI``...``EXEC`` with every write),
the baseline the one-script commit beats (the baselines: benchmarks/executions_baselines.py). It
starts its own redis-server on a free loopback port (persistence off) and stops it by pid;
``--port`` uses a running one (only the benchmark's own keys are written and deleted). Writes
``bench-executions.json`` and ``bench-executions.png`` (the ratios as bars) into ``--out-dir``
(benchmarks/results by default).

Backends are the entries of ``BACKENDS``: add one (e.g. PostgreSQL) with a factory per twin.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import psycopg
import redis
import redis.asyncio as aioredis
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry
from runyard import AsyncMemoryExecutionStore, MemoryExecutionStore
from runyard.executions import Execution
from runyard.postgres import (
    AsyncPostgresExecutionStore,
    PostgresExecutionStore,
)
from runyard.redis import AsyncRedisStore, RedisStore, RedisStoreSettings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks._report import write_report
from benchmarks.bench_redis import _start_server
from benchmarks.executions_baselines import (
    CONTEXT,
    PG_DSN,
    PG_RAW,
    async_raw_postgres,
    async_watch_multi_exec,
    full_commit,
    pg_schema,
    rate,
    sync_raw_postgres,
    sync_watch_multi_exec,
)

RAW_SCRIPT = "return ARGV[1]"


@dataclass
class Backend:
    """How to build (and later release) a fresh store of one backend, in each twin.

    ``make_async``/``make_sync`` get the Redis port of the run (a backend may ignore it) and
    return ``(store, close)``.
    """

    name: str
    make_async: Callable[[int], Awaitable[tuple[Any, Callable[[], Awaitable[None]]]]]
    make_sync: Callable[[int], tuple[Any, Callable[[], None]]]


def _settings() -> RedisStoreSettings:
    return RedisStoreSettings(namespace=f"bench-{uuid.uuid4().hex[:8]}", durable=False)


async def _async_memory(_: int) -> tuple[Any, Callable[[], Awaitable[None]]]:
    store = AsyncMemoryExecutionStore()
    return store, store.aclose


def _sync_memory(_: int) -> tuple[Any, Callable[[], None]]:
    store = MemoryExecutionStore()
    return store, store.close


async def _async_redis(port: int) -> tuple[Any, Callable[[], Awaitable[None]]]:
    client = aioredis.Redis(port=port, retry=AsyncRetry(NoBackoff(), 0))
    settings = _settings()
    store = AsyncRedisStore(client, settings=settings, owns_client=True)

    async def close() -> None:
        await _async_purge(client, f"{settings.namespace}:*")
        await store.aclose()

    return store, close


def _sync_redis(port: int) -> tuple[Any, Callable[[], None]]:
    client = redis.Redis(port=port, retry=Retry(NoBackoff(), 0))
    settings = _settings()
    store = RedisStore(client, settings=settings, owns_client=True)

    def close() -> None:
        _sync_purge(client, f"{settings.namespace}:*")
        store.close()

    return store, close


# The benchmark deletes only its own keys (never FLUSHALL: --port may name a real server).
async def _async_purge(client: aioredis.Redis, pattern: str) -> None:
    keys = [key async for key in client.scan_iter(match=pattern, count=500)]
    if keys:
        await client.unlink(*keys)


def _sync_purge(client: redis.Redis, pattern: str) -> None:
    keys = list(client.scan_iter(match=pattern, count=500))
    if keys:
        client.unlink(*keys)


def _postgres_reachable() -> bool:
    try:
        psycopg.connect(PG_DSN, connect_timeout=3).close()
    except psycopg.Error as exc:
        print(f"PostgreSQL skipped (RUNYARD_BENCH_PG_DSN): {exc}", file=sys.stderr)
        return False
    return True


async def _async_postgres(_: int) -> tuple[Any, Callable[[], Awaitable[None]]]:
    tables, drop = pg_schema()
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(PG_DSN, min_size=1, open=False)
    await pool.open(wait=True)
    store = await AsyncPostgresExecutionStore.open(pool, tables=tables, close_source=True)

    async def close() -> None:
        await store.aclose()
        drop()

    return store, close


def _sync_postgres(_: int) -> tuple[Any, Callable[[], None]]:
    tables, drop = pg_schema()
    pool: ConnectionPool[Any] = ConnectionPool(PG_DSN, min_size=1, open=True)
    store = PostgresExecutionStore.open(pool, tables=tables, close_source=True)

    def close() -> None:
        store.close()
        drop()

    return store, close


BACKENDS: list[Backend] = [
    Backend("memory", _async_memory, _sync_memory),
    Backend("redis", _async_redis, _sync_redis),
    Backend("postgres", _async_postgres, _sync_postgres),
]


# -- async twin -----------------------------------------------------------------------------
async def _async_commits(store: Any, n: int, full: bool) -> float:
    exe = Execution(id=f"exe-{uuid.uuid4().hex[:6]}", definition_id="checkout", context=CONTEXT)
    await store.save(exe)
    start = time.perf_counter()
    for i in range(n):
        exe.context["step"] = i
        if full:
            await store.commit(exe, **full_commit(i))
        else:
            await store.commit(exe, processed_event_id=f"in-{i}")
    return rate(n, time.perf_counter() - start)


async def _async_run(port: int, n: int) -> dict[str, float]:
    out: dict[str, float] = {}
    client = aioredis.Redis(port=port, retry=AsyncRetry(NoBackoff(), 0))
    sha = await client.script_load(RAW_SCRIPT)
    start = time.perf_counter()
    for i in range(n):
        await client.evalsha(sha, 0, i)
    out["raw EVALSHA"] = rate(n, time.perf_counter() - start)
    out["redis WATCH/MULTI/EXEC full"] = await async_watch_multi_exec(client, n)
    await _async_purge(client, "wme:*")
    await client.aclose()
    if any(b.name == "postgres" for b in BACKENDS):
        out[PG_RAW] = await async_raw_postgres(n)
    for backend in BACKENDS:
        for path in ("fast", "full"):
            store, close = await backend.make_async(port)
            await _async_commits(store, min(n, 200), path == "full")  # warm up (scripts loaded)
            out[f"{backend.name} {path}"] = await _async_commits(store, n, path == "full")
            await close()
    return out


# -- sync twin ------------------------------------------------------------------------------
def _sync_commits(store: Any, n: int, full: bool) -> float:
    exe = Execution(id=f"exe-{uuid.uuid4().hex[:6]}", definition_id="checkout", context=CONTEXT)
    store.save(exe)
    start = time.perf_counter()
    for i in range(n):
        exe.context["step"] = i
        if full:
            store.commit(exe, **full_commit(i))
        else:
            store.commit(exe, processed_event_id=f"in-{i}")
    return rate(n, time.perf_counter() - start)


def _sync_run(port: int, n: int) -> dict[str, float]:
    out: dict[str, float] = {}
    client = redis.Redis(port=port, retry=Retry(NoBackoff(), 0))
    sha = client.script_load(RAW_SCRIPT)
    start = time.perf_counter()
    for i in range(n):
        client.evalsha(sha, 0, i)
    out["raw EVALSHA"] = rate(n, time.perf_counter() - start)
    out["redis WATCH/MULTI/EXEC full"] = sync_watch_multi_exec(client, n)
    _sync_purge(client, "wme:*")
    client.close()
    if any(b.name == "postgres" for b in BACKENDS):
        out[PG_RAW] = sync_raw_postgres(n)
    for backend in BACKENDS:
        for path in ("fast", "full"):
            store, close = backend.make_sync(port)
            _sync_commits(store, min(n, 200), path == "full")
            out[f"{backend.name} {path}"] = _sync_commits(store, n, path == "full")
            close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--port", type=int, help="use this running redis-server (touches only its own keys)"
    )
    parser.add_argument("--ops", type=int, default=3000, help="commits per cell")
    parser.add_argument(
        "--out-dir", default="benchmarks/results", help="where bench-executions.json/.png go"
    )
    args = parser.parse_args(argv)
    figures: dict[str, Any] = {"commits per cell": args.ops}
    process = workdir = None
    port = args.port
    if port is None:
        if shutil.which("redis-server") is None:
            print("redis-server is not installed; pass --port", file=sys.stderr)
            return 1
        process, port, workdir = _start_server()
    if not _postgres_reachable():
        BACKENDS[:] = [b for b in BACKENDS if b.name != "postgres"]
    try:
        print(
            f"runyard execution store benchmark: redis-server on 127.0.0.1:{port}, "
            f"{args.ops} commits per cell, concurrency 1, {os.cpu_count()} CPUs, "
            f"Python {sys.version.split()[0]}, redis-py {redis.__version__}"
        )
        header = f"{'twin':<6} {'backend / path':<30} {'commits/s':>10}"
        print(f"{header} {'raw EVALSHA/s':>14} {'ratio':>6}")
        if any(b.name == "postgres" for b in BACKENDS):
            print(f"(postgres rows: the raw column is the {PG_RAW} of the same twin and run)")
        for twin in ("async", "sync"):
            cell = (
                asyncio.run(_async_run(port, args.ops))
                if twin == "async"
                else _sync_run(port, args.ops)
            )
            rows = figures[twin] = {}
            for name, rate in cell.items():
                # PostgreSQL rows compare with the raw psycopg round trip, the others with EVALSHA.
                base = PG_RAW if name.startswith(("postgres", PG_RAW)) else "raw EVALSHA"
                raw = cell[base]
                print(f"{twin:<6} {name:<30} {rate:>10.0f} {raw:>14.0f} {rate / raw:>6.2f}")
                rows[name] = {"commits/s": rate, "baseline": base, "ratio": rate / raw}
            beaten = cell["redis full"] / cell["redis WATCH/MULTI/EXEC full"]
            print(f"{twin:<6} redis full path / WATCH/MULTI/EXEC way: {beaten:.2f}x")
            rows["redis full vs WATCH/MULTI/EXEC"] = {"ratio": beaten}
        for path in write_report("bench-executions", figures, out_dir=args.out_dir):
            print(f"wrote {path}")
    finally:
        if process is not None:
            os.kill(process.pid, signal.SIGTERM)
            process.wait(timeout=10)
            shutil.rmtree(workdir or "", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
