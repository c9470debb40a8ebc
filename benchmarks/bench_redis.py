"""Redis queue benchmark (``make bench-redis``), every figure beside a baseline from the same run.

1. claim+complete by 16 concurrent claimers (tasks on one asyncio client, or threads on one
   blocking client: both twins), on one tenant and on 16, one item per call and 16 per call
   (``claim_many`` + ``complete_many``), in items/s beside the bare redis-py driver doing the
   same round trips at the same concurrency (``LPOP`` of as many entries, then one ``HSET``).
2. Claim latency p50/p99 (async, one caller) at 1k and 100k queued items in one tenant (1M with
   ``--large``) and at 10 and 100k tenants of one item each, the populations taking turns every
   5 claims, with a bare ``EVALSHA`` round trip timed beside each claim and the server's own
   time per claim script (``INFO commandstats``), and the growth ratios (target <= 1.3).
3. put_run and patch_run by 16 concurrent callers, both twins, beside a one-line ``EVALSHA``.
4. Bytes per queued item at 20k items with a 100-byte payload (benchmarks/redis_memory.py).

It starts its own redis-server on a free loopback port (persistence off) and stops it by pid;
``--port`` uses a running one, where it writes only under fresh ``bench-`` namespaces and
deletes them. The figures go to ``<out-dir>/redis.json`` and ``redis.png``
(benchmarks/_report.py; not ``bench-*`` names, which git ignores, so the results are committed).
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
CLAIMERS = 16
BATCH = 16
CHUNK = 1000  # items per enqueue_many while filling a queue
GROWTH_TARGET = 1.3
LATENCY_BLOCK = 5  # claims per turn of a population (10 tenants of one item: at most 10)


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


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _cell(items: int, raw_seconds: float, queue_seconds: float) -> dict[str, float]:
    raw, rate = items / raw_seconds, items / queue_seconds
    return {"items/s": rate, "raw items/s": raw, "ratio": rate / raw}


# -- claim+complete at CLAIMERS concurrent claimers, async twin ---------------------------------
async def _async_fill(queue: AsyncRedisWorkQueue, tenants: int, items: int) -> None:
    for tenant in range(tenants):
        share = items // tenants
        for start in range(0, share, CHUNK):
            count = min(CHUNK, share - start)
            await queue.enqueue_many(
                f"tenant-{tenant}", [NewItem(payload={"i": start + n}) for n in range(count)]
            )


async def _async_throughput(port: int, tenants: int, batch: int, items: int) -> dict[str, float]:
    """claim+complete of ``items`` items by CLAIMERS tasks (``batch`` per call), and the bare
    redis-py baseline doing the same round trips (LPOP of ``batch`` entries, then HSET) just
    before and just after it (their mean time), so a change of load falls on both."""
    client = aioredis.Redis(port=port, max_connections=64, retry=AsyncRetry(NoBackoff(), 0))
    settings = _settings()
    queue = AsyncRedisWorkQueue(client, settings=settings)
    raw_list, raw_done = f"{settings.namespace}:raw-list", f"{settings.namespace}:raw-done"
    rounds = items // (CLAIMERS * batch)
    try:
        for start in range(0, items, CHUNK):
            await client.rpush(raw_list, *[*range(start, min(items, start + CHUNK))] * 2)
        await _async_fill(queue, tenants, items)

        async def raw(_: int) -> None:
            for _ in range(rounds):
                popped = await client.lpop(raw_list, batch)
                await client.hset(raw_done, mapping=dict.fromkeys(popped, 1))

        async def claimer(w: int) -> None:
            for _ in range(rounds):
                if batch == 1:
                    lease = await queue.claim(f"bench-{w}")
                    assert lease is not None
                    await queue.complete(lease)
                else:
                    leases = await queue.claim_many(f"bench-{w}", limit=batch)
                    assert await queue.complete_many(leases) == [None] * batch

        seconds = []
        for run in (raw, claimer, raw):
            start = time.perf_counter()
            await asyncio.gather(*(run(w) for w in range(CLAIMERS)))
            seconds.append(time.perf_counter() - start)
        return _cell(items, (seconds[0] + seconds[2]) / 2, seconds[1])
    finally:
        await _async_purge(client, settings.namespace)
        await client.aclose()


# -- the same, sync twin (CLAIMERS threads on one client) ---------------------------------------
def _sync_throughput(port: int, tenants: int, batch: int, items: int) -> dict[str, float]:
    """The sync twin of _async_throughput."""
    client = redis.Redis(port=port, max_connections=64, retry=Retry(NoBackoff(), 0))
    settings = _settings()
    queue = RedisWorkQueue(client, settings=settings)
    raw_list, raw_done = f"{settings.namespace}:raw-list", f"{settings.namespace}:raw-done"
    rounds = items // (CLAIMERS * batch)
    try:
        for start in range(0, items, CHUNK):
            client.rpush(raw_list, *[*range(start, min(items, start + CHUNK))] * 2)
        for tenant in range(tenants):
            share = items // tenants
            for start in range(0, share, CHUNK):
                count = min(CHUNK, share - start)
                queue.enqueue_many(
                    f"tenant-{tenant}", [NewItem(payload={"i": start + n}) for n in range(count)]
                )

        def raw(_: int) -> None:
            for _ in range(rounds):
                popped = client.lpop(raw_list, batch)
                client.hset(raw_done, mapping=dict.fromkeys(popped, 1))  # type: ignore[arg-type]

        def claimer(w: int) -> None:
            for _ in range(rounds):
                if batch == 1:
                    lease = queue.claim(f"bench-{w}")
                    assert lease is not None
                    queue.complete(lease)
                else:
                    leases = queue.claim_many(f"bench-{w}", limit=batch)
                    assert queue.complete_many(leases) == [None] * batch

        seconds = []
        with ThreadPoolExecutor(max_workers=CLAIMERS) as pool:
            for run in (raw, claimer, raw):
                start = time.perf_counter()
                list(pool.map(run, range(CLAIMERS)))
                seconds.append(time.perf_counter() - start)
        return _cell(items, (seconds[0] + seconds[2]) / 2, seconds[1])
    finally:
        _sync_purge(client, settings.namespace)
        client.close()


# -- run state writes at CLAIMERS concurrent callers, both twins ---------------------------------
async def _async_state(port: int, ops: int) -> dict[str, dict[str, float]]:
    """put_run and patch_run ops/s beside a one-line EVALSHA (one round trip, as each is),
    timed just before and just after each (their mean)."""
    client = aioredis.Redis(port=port, max_connections=64, retry=AsyncRetry(NoBackoff(), 0))
    store = AsyncRedisStateStore(client, settings=_settings())
    sha = await client.script_load(RAW_SCRIPT)
    per = ops // CLAIMERS
    delta = CounterDelta(input_tokens=10, output_tokens=3, iterations=1)

    async def rate(op: Callable[[int], Awaitable[object]]) -> float:
        async def caller(w: int) -> None:
            for i in range(per):
                await op(w * per + i)

        start = time.perf_counter()
        await asyncio.gather(*(caller(w) for w in range(CLAIMERS)))
        return per * CLAIMERS / (time.perf_counter() - start)

    try:
        out = {}
        for name, op in (
            (
                "put_run",
                lambda i: store.put_run(RunKey("t", f"r{i}"), {"i": i}, expected_version=0),
            ),
            ("patch_run", lambda i: store.patch_run(RunKey("t", f"r{i % CLAIMERS}"), delta)),
        ):
            before = await rate(lambda i: client.evalsha(sha, 0, i))
            done = await rate(op)
            raw = (before + await rate(lambda i: client.evalsha(sha, 0, i))) / 2
            out[name] = {"ops/s": done, "raw evalsha/s": raw, "ratio": done / raw}
        return out
    finally:
        await _async_purge(client, store.settings.namespace)
        await client.aclose()


def _sync_state(port: int, ops: int) -> dict[str, dict[str, float]]:
    """The sync twin of _async_state (CLAIMERS threads on one client)."""
    client = redis.Redis(port=port, max_connections=64, retry=Retry(NoBackoff(), 0))
    store = RedisStateStore(client, settings=_settings())
    sha = client.script_load(RAW_SCRIPT)
    per = ops // CLAIMERS
    delta = CounterDelta(input_tokens=10, output_tokens=3, iterations=1)

    def rate(op: Callable[[int], object]) -> float:
        def caller(w: int) -> None:
            for i in range(per):
                op(w * per + i)

        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=CLAIMERS) as pool:
            list(pool.map(caller, range(CLAIMERS)))
        return per * CLAIMERS / (time.perf_counter() - start)

    try:
        out = {}
        for name, op in (
            (
                "put_run",
                lambda i: store.put_run(RunKey("t", f"r{i}"), {"i": i}, expected_version=0),
            ),
            ("patch_run", lambda i: store.patch_run(RunKey("t", f"r{i % CLAIMERS}"), delta)),
        ):
            before = rate(lambda i: client.evalsha(sha, 0, i))
            done = rate(op)
            raw = (before + rate(lambda i: client.evalsha(sha, 0, i))) / 2
            out[name] = {"ops/s": done, "raw evalsha/s": raw, "ratio": done / raw}
        return out
    finally:
        _sync_purge(client, store.settings.namespace)
        client.close()


# -- claim latency against the queue's size -----------------------------------------------------
async def _evalsha_stats(client: aioredis.Redis) -> tuple[int, int]:
    """(calls, microseconds) the server has spent in EVALSHA so far (INFO commandstats)."""
    row = (await client.info("commandstats")).get("cmdstat_evalsha", {})
    return int(row.get("calls", 0)), int(row.get("usec", 0))


async def _async_latency(
    port: int, populations: dict[str, tuple[int, int]], samples: int, rounds: int
) -> dict[str, dict[str, Any]]:
    """p50/p99 of one claim (async twin, one caller) in queues of (tenants, items per tenant),
    the bare redis-py round trip (a one-line EVALSHA) timed beside each claim, and the server's
    own microseconds per claim script (INFO commandstats).

    The populations take turns every LATENCY_BLOCK claims, ``samples`` claims each per round,
    so a change of the machine's load falls on all of them alike; after each block its claimed
    items are released (untimed), so every queue keeps its size.
    """
    client = aioredis.Redis(port=port, max_connections=64, retry=AsyncRetry(NoBackoff(), 0))
    sha = await client.script_load(RAW_SCRIPT)
    queues: dict[str, AsyncRedisWorkQueue] = {}
    timed: dict[str, list[float]] = {name: [] for name in populations}
    medians: dict[str, list[float]] = {name: [] for name in populations}
    raw: dict[str, list[float]] = {name: [] for name in populations}
    server: dict[str, list[int]] = {name: [0, 0] for name in populations}
    try:
        for name, (tenants, per_tenant) in populations.items():
            queue = queues[name] = AsyncRedisWorkQueue(client, settings=_settings())
            if per_tenant > 1:
                await _async_fill(queue, tenants, tenants * per_tenant)
            else:
                gate = asyncio.Semaphore(64)

                async def one(
                    n: int, queue: AsyncRedisWorkQueue = queue, gate: asyncio.Semaphore = gate
                ) -> None:
                    async with gate:
                        await queue.enqueue(f"tenant-{n}", {"i": n})

                await asyncio.gather(*(one(n) for n in range(tenants)))
            warm = await queue.claim("bench")
            assert warm is not None
            await queue.release_many([warm])
        for _ in range(rounds):
            got: dict[str, list[float]] = {name: [] for name in populations}
            for _ in range(0, samples, LATENCY_BLOCK):
                for name, queue in queues.items():
                    leases = []
                    calls, usec = await _evalsha_stats(client)
                    for _ in range(LATENCY_BLOCK):
                        start = time.perf_counter()
                        await client.evalsha(sha, 0, "x")
                        raw[name].append(time.perf_counter() - start)
                        start = time.perf_counter()
                        lease = await queue.claim("bench")
                        got[name].append(time.perf_counter() - start)
                        assert lease is not None
                        leases.append(lease)
                    after_calls, after_usec = await _evalsha_stats(client)
                    # The block's claims, less the raw EVALSHAs beside them (about 1 us each).
                    server[name][0] += after_calls - calls - LATENCY_BLOCK
                    server[name][1] += after_usec - usec
                    await queue.release_many(leases)
            for name in populations:
                timed[name] += got[name]
                medians[name].append(_percentile(got[name], 0.5) * 1000)
        return {
            name: {
                "tenants": populations[name][0],
                "items": populations[name][0] * populations[name][1],
                "p50 ms": _percentile(timed[name], 0.5) * 1000,
                "p99 ms": _percentile(timed[name], 0.99) * 1000,
                "p50 ms per round": medians[name],
                "raw EVALSHA p50 ms": _percentile(raw[name], 0.5) * 1000,
                "server us per claim": server[name][1] / max(server[name][0], 1),
            }
            for name in populations
        }
    finally:
        await _async_purge(client, *(q.settings.namespace for q in queues.values()))
        await client.aclose()


def _growth(latency: dict[str, dict[str, Any]], small: str, large: str) -> dict[str, Any]:
    def grown(figure: str) -> float:
        return float(latency[large][figure] / latency[small][figure])

    return {
        "from": small,
        "to": large,
        "p50 growth ratio": grown("p50 ms"),
        "p99 growth ratio": grown("p99 ms"),
        "server us growth ratio": grown("server us per claim"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--port",
        type=int,
        help="use the redis-server on this port (only the benchmark's own keys are touched)",
    )
    parser.add_argument(
        "--items",
        type=int,
        default=4096,
        help=f"items per claim+complete cell (a multiple of {CLAIMERS * BATCH})",
    )
    parser.add_argument("--samples", type=int, default=300, help="claims timed per round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved latency rounds")
    parser.add_argument(
        "--sizes",
        default="1000,100000",
        help="queued items (one tenant) for claim latency; --large adds 1,000,000",
    )
    parser.add_argument(
        "--tenants", default="10,100000", help="tenants (one item each) for claim latency"
    )
    parser.add_argument("--large", action="store_true", help="also 1,000,000 queued items")
    parser.add_argument(
        "--memory-items", type=int, default=20_000, help="queued items for bytes per item"
    )
    parser.add_argument(
        "--out-dir",
        default="benchmarks/results",
        help="where redis.json and redis.png go",
    )
    args = parser.parse_args(argv)
    if args.items % (CLAIMERS * BATCH):
        parser.error(f"--items must be a multiple of {CLAIMERS * BATCH}")
    sizes = [int(n) for n in args.sizes.split(",")] + ([1_000_000] if args.large else [])
    tenant_counts = [int(n) for n in args.tenants.split(",")]
    if min(sizes + tenant_counts) < LATENCY_BLOCK:
        parser.error(f"--sizes and --tenants hold at least {LATENCY_BLOCK} items (one turn)")
    process = workdir = None
    port = args.port
    if port is None:
        if shutil.which("redis-server") is None:
            print("redis-server is not installed; pass --port", file=sys.stderr)
            return 1
        process, port, workdir = _start_server()
    try:
        print(
            f"runyard Redis benchmark: redis-server on 127.0.0.1:{port}, {os.cpu_count()} CPUs, "
            f"load {os.getloadavg()[0]:.2f}, Python {sys.version.split()[0]}, "
            f"redis-py {redis.__version__}"
        )
        figures: dict[str, Any] = {"load average": os.getloadavg()[0]}
        print(
            f"claim+complete, {CLAIMERS} concurrent claimers, {args.items} items per cell; raw: "
            "bare redis-py LPOP + HSET, the same round trips at the same concurrency"
        )
        print(
            f"{'twin':<6} {'tenants':>7} {'batch':>5} {'items/s':>9} {'raw items/s':>12} "
            f"{'ratio':>6}"
        )
        for twin in ("async", "sync"):
            for batch in (1, BATCH):
                for tenants in (1, CLAIMERS):
                    if twin == "async":
                        cell = asyncio.run(_async_throughput(port, tenants, batch, args.items))
                    else:
                        cell = _sync_throughput(port, tenants, batch, args.items)
                    print(
                        f"{twin:<6} {tenants:>7} {batch:>5} {cell['items/s']:>9.0f} "
                        f"{cell['raw items/s']:>12.0f} {cell['ratio']:>6.2f}"
                    )
                    figures[f"{twin} claim+complete c{CLAIMERS} t{tenants} x{batch}"] = cell
        print(f"run state writes, {CLAIMERS} concurrent callers; raw: a one-line EVALSHA")
        for twin in ("async", "sync"):
            if twin == "async":
                state = asyncio.run(_async_state(port, args.items))
            else:
                state = _sync_state(port, args.items)
            for name, row in state.items():
                print(
                    f"{twin:<6} {name:<10} {row['ops/s']:>9.0f} ops/s, raw "
                    f"{row['raw evalsha/s']:>6.0f}/s, ratio {row['ratio']:.2f}"
                )
                figures[f"{twin} {name} c{CLAIMERS}"] = row
        populations = {f"{n} items": (1, n) for n in sizes}
        populations.update({f"{n} tenants": (n, 1) for n in tenant_counts})
        latency = asyncio.run(_async_latency(port, populations, args.samples, args.rounds))
        print(
            f"claim latency (async, one caller, {args.rounds} interleaved rounds of "
            f"{args.samples}; each claimed item released untimed)"
        )
        print(
            f"{'queue':<16} {'p50 ms':>7} {'p99 ms':>7} {'raw p50 ms':>10} {'server us':>9}  "
            "p50 per round"
        )
        for name, row in latency.items():
            rounds = " ".join(f"{m:.3f}" for m in row["p50 ms per round"])
            print(
                f"{name:<16} {row['p50 ms']:>7.3f} {row['p99 ms']:>7.3f} "
                f"{row['raw EVALSHA p50 ms']:>10.3f} {row['server us per claim']:>9.1f}  {rounds}"
            )
        figures["claim latency"] = latency
        growth = {}
        for small, large in (
            (f"{sizes[0]} items", f"{sizes[-1]} items"),
            (f"{tenant_counts[0]} tenants", f"{tenant_counts[-1]} tenants"),
        ):
            row = growth[f"{small} -> {large}"] = _growth(latency, small, large)
            verdict = "ok" if row["p50 growth ratio"] <= GROWTH_TARGET else "MISSES"
            print(
                f"growth {small} -> {large}: p50 x{row['p50 growth ratio']:.2f}, "
                f"p99 x{row['p99 growth ratio']:.2f}, server time per claim "
                f"x{row['server us growth ratio']:.2f} (target p50 <= {GROWTH_TARGET}: {verdict})"
            )
        figures["claim latency growth"] = growth
        memory = bytes_per_item(port, args.memory_items)
        print(
            f"queue memory at {args.memory_items} ready items, 100-byte payload: "
            f"{memory['memory_usage']:.0f} B per item (MEMORY USAGE over the namespace's keys), "
            f"{memory['used_memory']:.0f} B per item (used_memory delta); target <= 350 B"
        )
        figures["queue memory"] = {
            "items": args.memory_items,
            "payload bytes": 100,
            "bytes per item (MEMORY USAGE)": memory["memory_usage"],
            "bytes per item (used_memory delta)": memory["used_memory"],
        }
        for path in write_report("redis", figures, out_dir=args.out_dir):
            print(f"wrote {path}")
    finally:
        if process is not None:
            os.kill(process.pid, signal.SIGTERM)
            process.wait(timeout=10)
            shutil.rmtree(workdir or "", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
