"""Event log benchmark (``make bench-events``): append throughput and follow latency.

Append: ops/s of ``append_event`` on one run (concurrency 1) beside the raw driver's one round
trip in the same run (Redis: EVALSHA of a one-line script; PostgreSQL: ``SELECT $1`` on a pool
connection) and their ratio. Follow: the delay from the moment the write is sent (just before
the ``append_event`` call) to the follower yielding that event, p50/p99, with live updates on
(``poll_seconds`` 0.5, so a hint, not a poll, delivers it) and polling only (``--poll``, 0.5 s
by default: the bar live updates must beat; each write then waits a seeded random part of a
poll first), the writer waiting for each event to arrive before the next; their ratio (polling
p50 / live p50) is the live speed-up. The live figure is also split: the append call itself
(its commit included: no follower can see the event sooner), the hint's delivery to the
listener and the follower's yield, both counted from the moment the append returned, and the
follower's part after the hint (its wake-up and its ``read_events``). Async twin, on the
machine's Redis (a fresh namespace, purged) and PostgreSQL (a fresh schema, dropped). Writes
``bench-events.json`` and ``bench-events.png`` (the ratios as bars) into ``--out-dir``
(``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import redis
import redis.asyncio as aioredis
from psycopg_pool import AsyncConnectionPool
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from runyard import RunKey
from runyard._async.event_protocol import AsyncEventLogStore
from runyard.postgres import AsyncPostgresStateStore, StateTables, schema_sql
from runyard.redis import AsyncRedisStateStore, RedisStoreSettings
from runyard.redis.keys import cleanup_patterns

from benchmarks._report import write_report

PG_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=test options='-c statement_timeout=30s'"
Store = Callable[[bool], Any]


async def _rate(n: int, op: Callable[[int], Awaitable[object]]) -> float:
    start = time.perf_counter()
    for i in range(n):
        await op(i)
    return n / (time.perf_counter() - start)


class _Sample:
    """The moments (perf_counter seconds) of one live sample: the append called and returned
    (its commit included), the first hint the listener read after the call, the follower's
    yield."""

    __slots__ = ("arrived", "committed", "hinted", "sent")

    def __init__(self, sent: float, committed: float, hinted: float | None, arrived: float):
        self.sent, self.committed, self.hinted, self.arrived = sent, committed, hinted, arrived


def _hint_times(store: Any) -> list[float]:
    """The moments the store's updates instance reads a hint for a followed run (its reader
    calling the hub's ``_wake``); empty for a store without live updates."""
    times: list[float] = []
    updates = getattr(store, "live_updates", None)
    if updates is not None:
        wake = updates._wake

        def timed(name: tuple[str, str]) -> None:
            times.append(time.perf_counter())
            wake(name)

        updates._wake = timed
    return times


async def _follow_samples(
    store: AsyncEventLogStore, samples: int, poll: float, pause: bool = False
) -> list[_Sample]:
    """One event at a time: the moments before append_event is called, when it returned,
    when the listener read its hint (live updates only) and when the follower yielded it;
    with ``pause``, each write waits a (seeded) random part of ``poll`` first, so that writes
    land anywhere in the follower's polling cycle, not in lockstep."""
    pauses = random.Random(7)
    key = RunKey("bench", uuid.uuid4().hex[:10])
    await store.put_run(key, {}, expected_version=0)
    arrived: asyncio.Queue[float] = asyncio.Queue()
    hints = _hint_times(store)

    async def follower() -> None:
        async for event in store.follow(key, poll_seconds=poll):
            if not event.terminal:
                arrived.put_nowait(time.perf_counter())

    task = asyncio.create_task(follower())
    out = []
    for i in range(samples):
        if pause:
            await asyncio.sleep(pauses.uniform(0, poll))
        hints.clear()
        sent = time.perf_counter()
        await store.append_event(key, "step", {"i": i})
        committed = time.perf_counter()
        got = await asyncio.wait_for(arrived.get(), 30)
        out.append(_Sample(sent, committed, hints[0] if hints else None, got))
    await store.finalize(key, status="completed", event_type="done", event_data={})
    await asyncio.wait_for(task, 30)
    return out


def _percentiles(delays: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(delays, n=100, method="inclusive")
    return {"p50_ms": cuts[49] * 1000, "p99_ms": cuts[98] * 1000}


def _live_figures(samples: list[_Sample]) -> dict[str, Any]:
    """The live follow latency from before the append call (the headline figure), and split:
    the append call itself (its commit included), the hint's delivery to the listener counted
    from the append's return (below zero when the notification was read before the writer had
    read the commit's reply), the follower's yield counted from the append's return, and from
    the hint (the follower's wake-up and its read_events)."""
    hinted = [s for s in samples if s.hinted is not None]
    out = _percentiles([s.arrived - s.sent for s in samples])
    out["append call"] = _percentiles([s.committed - s.sent for s in samples])
    out["from append return"] = _percentiles([s.arrived - s.committed for s in samples])
    if len(hinted) > 1:
        out["hint delivery from append return"] = _percentiles(
            [s.hinted - s.committed for s in hinted if s.hinted is not None]
        )
        out["hint to follower"] = _percentiles(
            [s.arrived - s.hinted for s in hinted if s.hinted is not None]
        )
    out["samples with a hint"] = len(hinted)
    return out


@asynccontextmanager
async def _redis(url: str) -> AsyncIterator[tuple[Store, Callable[[int], Awaitable[object]]]]:
    client = aioredis.Redis.from_url(url, retry=AsyncRetry(NoBackoff(), 0))
    namespace = f"bench-ev-{uuid.uuid4().hex[:8]}"
    settings = RedisStoreSettings(namespace=namespace, durable=False)
    sha = await client.script_load("return ARGV[1]")

    def store(live: bool) -> AsyncRedisStateStore:
        return AsyncRedisStateStore(client, settings=settings, live_updates=live)

    try:
        yield store, lambda i: client.evalsha(sha, 0, i)
    finally:
        for pattern in cleanup_patterns(namespace):
            keys = [key async for key in client.scan_iter(match=pattern, count=500)]
            for start in range(0, len(keys), 500):
                await client.unlink(*keys[start : start + 500])
        await client.aclose()


@asynccontextmanager
async def _postgres(dsn: str) -> AsyncIterator[tuple[Store, Callable[[int], Awaitable[object]]]]:
    tables = StateTables(schema=f"bench_ev_{uuid.uuid4().hex[:8]}")
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{tables.schema}"')
        admin.execute(schema_sql(tables))
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(dsn, min_size=2, max_size=4, open=False)
    await pool.open(wait=True)

    def store(live: bool) -> AsyncPostgresStateStore:
        return AsyncPostgresStateStore(pool, tables=tables, live_updates=live)

    async def raw(i: int) -> object:
        async with pool.connection() as conn:
            return await (await conn.execute("SELECT %s::int", [i])).fetchone()

    try:
        yield store, raw
    finally:
        await pool.close()
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{tables.schema}" CASCADE')


async def _backend(
    name: str, opened: Any, appends: int, samples: int, poll: float, poll_samples: int
) -> dict[str, Any]:
    async with opened as (make, raw):
        polled, live = make(False), make(True)
        key = RunKey("bench", uuid.uuid4().hex[:10])
        await polled.put_run(key, {}, expected_version=0)
        out: dict[str, Any] = {"raw ops/s": await _rate(appends, raw)}
        out["append ops/s"] = await _rate(
            appends, lambda i: polled.append_event(key, "step", {"i": i})
        )
        out["ratio"] = out["append ops/s"] / out["raw ops/s"]
        # A follower that has subscribed and read once, so the samples time hints alone.
        out["follow live"] = _live_figures(await _follow_samples(live, samples, 0.5))
        polling = await _follow_samples(polled, poll_samples, poll, pause=True)
        out["follow polling"] = _percentiles([s.arrived - s.sent for s in polling])
        out["follow speed-up"] = {
            "ratio": out["follow polling"]["p50_ms"] / out["follow live"]["p50_ms"]
        }
        if live.live_updates is not None:
            await live.live_updates.aclose()
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--pg-dsn", default=os.environ.get("RUNYARD_BENCH_PG_DSN", PG_DSN))
    parser.add_argument("--appends", type=int, default=2000, help="appends per backend")
    parser.add_argument("--samples", type=int, default=200, help="follow latency samples")
    parser.add_argument("--poll", type=float, default=0.5, help="poll_seconds when polling only")
    parser.add_argument(
        "--poll-samples", type=int, default=60, help="follow latency samples when polling only"
    )
    parser.add_argument(
        "--out-dir",
        default="benchmarks/results",
        help="where bench-events.json and bench-events.png go",
    )
    args = parser.parse_args(argv)
    print(
        f"runyard event-log benchmark (async twin): {args.appends} appends, {args.samples} "
        f"live follow samples, {args.poll_samples} polling follow samples every {args.poll} s; "
        f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, redis-py {redis.__version__}, "
        f"psycopg {psycopg.__version__}"
    )
    results: dict[str, Any] = {}
    for name, opened in (("redis", _redis(args.redis_url)), ("postgres", _postgres(args.pg_dsn))):
        results[name] = r = asyncio.run(
            _backend(name, opened, args.appends, args.samples, args.poll, args.poll_samples)
        )
        live = r["follow live"]
        print(
            f"| {name} | append {r['append ops/s']:.0f}/s | raw {r['raw ops/s']:.0f}/s | "
            f"ratio {r['ratio']:.2f} | follow live p50 {live['p50_ms']:.2f} ms "
            f"p99 {live['p99_ms']:.2f} ms | follow polling p50 "
            f"{r['follow polling']['p50_ms']:.2f} ms p99 {r['follow polling']['p99_ms']:.2f} ms | "
            f"polling/live p50 {r['follow speed-up']['ratio']:.0f}x |"
        )
        for part in (
            "append call",
            "from append return",
            "hint delivery from append return",
            "hint to follower",
        ):
            if part in live:
                print(
                    f"    live {part}: p50 {live[part]['p50_ms']:.2f} ms, "
                    f"p99 {live[part]['p99_ms']:.2f} ms"
                )
        print(f"    live samples with a hint: {live['samples with a hint']} of {args.samples}")
    for path in write_report("bench-events", results, out_dir=args.out_dir):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
