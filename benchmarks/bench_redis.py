"""Redis backend throughput (``make bench-redis``): both twins, concurrency 1 and 32.

Each operation's ops/s is printed beside the raw redis-py EVALSHA round trip (a one-line
script, same twin, same concurrency, same run) and their ratio; ``claim+complete x16`` counts
items claimed with ``claim_many(limit=16)`` and settled with one ``complete_many`` per batch.
Then the queue's bytes per item. It starts its own redis-server on a free loopback port
(persistence off) and stops it by pid; ``--port`` uses a running one. The figures go to
``<out-dir>/bench-redis.json`` and ``.png`` (benchmarks/_report.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry
from runyard import CounterDelta, RunKey
from runyard.models import NewItem
from runyard.redis import (
    AsyncRedisStateStore,
    AsyncRedisWorkQueue,
    RedisStateStore,
    RedisStoreSettings,
    RedisWorkQueue,
)
from runyard.redis.keys import cleanup_patterns

from benchmarks._report import write_report
from benchmarks.redis_memory import bytes_per_item

RAW_SCRIPT = "return ARGV[1]"
BATCH = 16
OPERATIONS = ("put_run", "patch_run", "claim+complete", f"claim+complete x{BATCH}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_server() -> tuple[subprocess.Popen[bytes], int, str]:
    port, workdir = _free_port(), tempfile.mkdtemp(prefix="runyard-bench-")
    process = subprocess.Popen(
        [
            "redis-server",
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--dir",
            workdir,
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(200):
        try:
            if redis.Redis(port=port).ping():
                return process, port, workdir
        except redis.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError("redis-server did not start")


def _settings() -> RedisStoreSettings:
    return RedisStoreSettings(namespace=f"bench-{uuid.uuid4().hex[:8]}", durable=False)


# The benchmark deletes only its own namespaces (never FLUSHALL: --port may name a real server).
async def _async_purge(client: aioredis.Redis, *namespaces: str) -> None:
    for namespace in namespaces:
        for pattern in cleanup_patterns(namespace):
            keys = [key async for key in client.scan_iter(match=pattern, count=500)]
            for start in range(0, len(keys), 500):
                await client.unlink(*keys[start : start + 500])


def _sync_purge(client: redis.Redis, *namespaces: str) -> None:
    for namespace in namespaces:
        for pattern in cleanup_patterns(namespace):
            keys = list(client.scan_iter(match=pattern, count=500))
            for start in range(0, len(keys), 500):
                client.unlink(*keys[start : start + 500])


# -- async twin ---------------------------------------------------------------------------------
async def _async_rate(
    concurrency: int, total: int, op: Callable[[int], Awaitable[object]]
) -> float:
    per = total // concurrency

    async def worker(w: int) -> None:
        for i in range(per):
            await op(w * per + i)

    start = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return per * concurrency / (time.perf_counter() - start)


async def _async_cell(port: int, concurrency: int, total: int) -> dict[str, float]:
    client = aioredis.Redis(port=port, max_connections=64, retry=AsyncRetry(NoBackoff(), 0))
    store = AsyncRedisStateStore(client, settings=_settings())
    queue = AsyncRedisWorkQueue(client, settings=_settings())
    sha = await client.script_load(RAW_SCRIPT)
    tag = uuid.uuid4().hex[:6]
    out = {
        "raw evalsha": await _async_rate(concurrency, total, lambda i: client.evalsha(sha, 0, i))
    }
    out["put_run"] = await _async_rate(
        concurrency,
        total,
        lambda i: store.put_run(RunKey("t", f"{tag}-{i}"), {"i": i}, expected_version=0),
    )
    delta = CounterDelta(input_tokens=10, output_tokens=3, iterations=1)
    out["patch_run"] = await _async_rate(
        concurrency,
        total,
        lambda i: store.patch_run(RunKey("t", f"{tag}-{i % concurrency}"), delta),
    )
    for i in range(total):
        await queue.enqueue(f"tenant-{i % 8}", {"i": i})

    async def claim_complete(_: int) -> None:
        lease = await queue.claim("bench")
        assert lease is not None
        await queue.complete(lease.tenant, lease.item_id, token=lease.token)

    out["claim+complete"] = await _async_rate(concurrency, total, claim_complete)
    for start in range(0, total, 1000):
        count = min(1000, total - start)
        await queue.enqueue_many(
            f"tenant-{start % 8}", [NewItem(payload={"i": start + n}) for n in range(count)]
        )

    async def claim_complete_batch(_: int) -> None:
        leases = await queue.claim_many("bench", limit=BATCH)
        assert await queue.complete_many(leases) == [None] * len(leases)

    batches = await _async_rate(concurrency, total // BATCH, claim_complete_batch)
    out[f"claim+complete x{BATCH}"] = batches * BATCH
    await _async_purge(client, store.settings.namespace, queue.settings.namespace)
    await client.aclose()
    return out


# -- sync twin ----------------------------------------------------------------------------------
def _sync_rate(concurrency: int, total: int, op: Callable[[int], object]) -> float:
    per = total // concurrency

    def worker(w: int) -> None:
        for i in range(per):
            op(w * per + i)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(worker, range(concurrency)))
    return per * concurrency / (time.perf_counter() - start)


def _sync_cell(port: int, concurrency: int, total: int) -> dict[str, float]:
    client = redis.Redis(port=port, max_connections=64, retry=Retry(NoBackoff(), 0))
    store = RedisStateStore(client, settings=_settings())
    queue = RedisWorkQueue(client, settings=_settings())
    sha = client.script_load(RAW_SCRIPT)
    tag = uuid.uuid4().hex[:6]
    out = {"raw evalsha": _sync_rate(concurrency, total, lambda i: client.evalsha(sha, 0, i))}
    out["put_run"] = _sync_rate(
        concurrency,
        total,
        lambda i: store.put_run(RunKey("t", f"{tag}-{i}"), {"i": i}, expected_version=0),
    )
    delta = CounterDelta(input_tokens=10, output_tokens=3, iterations=1)
    out["patch_run"] = _sync_rate(
        concurrency,
        total,
        lambda i: store.patch_run(RunKey("t", f"{tag}-{i % concurrency}"), delta),
    )
    for i in range(total):
        queue.enqueue(f"tenant-{i % 8}", {"i": i})

    def claim_complete(_: int) -> None:
        lease = queue.claim("bench")
        assert lease is not None
        queue.complete(lease.tenant, lease.item_id, token=lease.token)

    out["claim+complete"] = _sync_rate(concurrency, total, claim_complete)
    for start in range(0, total, 1000):
        count = min(1000, total - start)
        queue.enqueue_many(
            f"tenant-{start % 8}", [NewItem(payload={"i": start + n}) for n in range(count)]
        )

    def claim_complete_batch(_: int) -> None:
        leases = queue.claim_many("bench", limit=BATCH)
        assert queue.complete_many(leases) == [None] * len(leases)

    out[f"claim+complete x{BATCH}"] = _sync_rate(concurrency, total // BATCH, claim_complete_batch)
    out[f"claim+complete x{BATCH}"] *= BATCH
    _sync_purge(client, store.settings.namespace, queue.settings.namespace)
    client.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--port",
        type=int,
        help="use the redis-server on this port (only the benchmark's own keys are touched)",
    )
    parser.add_argument("--ops", type=int, default=4000, help="operations per cell")
    parser.add_argument(
        "--items", type=int, default=20_000, help="queued items for the bytes-per-item figure"
    )
    parser.add_argument(
        "--out-dir",
        default="benchmarks/results",
        help="where bench-redis.json and bench-redis.png go",
    )
    args = parser.parse_args(argv)
    process = workdir = None
    port = args.port
    if port is None:
        if shutil.which("redis-server") is None:
            print("redis-server is not installed; pass --port", file=sys.stderr)
            return 1
        process, port, workdir = _start_server()
    try:
        print(
            f"runyard Redis benchmark: redis-server on 127.0.0.1:{port}, {args.ops} ops per cell, "
            f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, redis-py {redis.__version__}"
        )
        print(
            f"{'twin':<6} {'conc':>4}  {'operation':<19} {'ops/s':>9} "
            f"{'raw EVALSHA/s':>14} {'ratio':>6}"
        )
        figures: dict[str, Any] = {}
        for twin in ("async", "sync"):
            for concurrency in (1, 32):
                if twin == "async":
                    cell = asyncio.run(_async_cell(port, concurrency, args.ops))
                else:
                    cell = _sync_cell(port, concurrency, args.ops)
                raw = cell["raw evalsha"]
                for op in OPERATIONS:
                    ratio = cell[op] / raw
                    print(
                        f"{twin:<6} {concurrency:>4}  {op:<19} {cell[op]:>9.0f} {raw:>14.0f} "
                        f"{ratio:>6.2f}"
                    )
                    figures[f"{twin} c{concurrency} {op}"] = {
                        "ops/s": cell[op],
                        "raw evalsha/s": raw,
                        "ratio": ratio,
                    }
        memory = bytes_per_item(port, args.items)
        print(
            f"queue memory at {args.items} ready items, 100-byte payload: "
            f"{memory['memory_usage']:.0f} B per item (MEMORY USAGE over the namespace's keys), "
            f"{memory['used_memory']:.0f} B per item (used_memory delta)"
        )
        figures["queue memory"] = {
            "items": args.items,
            "payload bytes": 100,
            "bytes per item (MEMORY USAGE)": memory["memory_usage"],
            "bytes per item (used_memory delta)": memory["used_memory"],
        }
        for path in write_report("bench-redis", figures, out_dir=args.out_dir):
            print(f"wrote {path}")
    finally:
        if process is not None:
            os.kill(process.pid, signal.SIGTERM)
            process.wait(timeout=10)
            shutil.rmtree(workdir or "", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
