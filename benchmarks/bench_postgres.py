"""PostgreSQL benchmark (`make bench-postgres`): ops/s of both twins beside raw psycopg.

Runs against RUNYARD_BENCH_PG_DSN (default: the local test database) in a schema of its own,
dropped at the end. Each measurement runs for --seconds (default 2). Prints Markdown tables:

1. put_run, patch_run and claim+complete ops/s for the async and sync twins at concurrency 1
   and 16, claim+complete with every item in one tenant and spread over 16 tenants, each beside
   the raw psycopg round trip of a single-row UPDATE that commits (autocommit, prepared),
   measured in the same run at the same concurrency, and the ratio;
2. the latency of one claim (sync twin, concurrency 1) by queue depth (1k and 100k items in one
   tenant; 1M with --large) and by tenant count (100k items over 10 and over 100k tenants),
   each on tables never analyzed and after ANALYZE, in a fresh schema per case.

With --json PATH the figures are also written as JSON, and with --png PATH (when matplotlib is
installed) as a chart.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from runyard import CounterDelta, RunKey
from runyard.postgres import (
    AsyncPostgresStateStore,
    AsyncPostgresWorkQueue,
    PostgresStateStore,
    PostgresWorkQueue,
    StateTables,
    schema_sql,
)

DSN = os.environ.get(
    "RUNYARD_BENCH_PG_DSN",
    "host=127.0.0.1 port=5432 user=postgres dbname=test options='-c statement_timeout=30s'",
)
CONCURRENCY = (1, 16)
NOW = time.time()
# claim+complete runs on 100k items held by one tenant, then spread over 16 tenants.
CLAIM_TENANTS = {"claim+complete 1 tenant": 1, "claim+complete 16 tenants": 16}
OPERATIONS = ("put_run", "patch_run", *CLAIM_TENANTS)


def admin() -> psycopg.Connection[Any]:
    return psycopg.connect(DSN, autocommit=True)


def load_items(tables: StateTables, count: int, tenants: int = 1_000, analyze: bool = True) -> None:
    """Queue ``count`` ready items over ``tenants`` tenants with one INSERT ... SELECT."""
    work, turns = tables.qualified(tables.work), tables.qualified(tables.turns)
    with admin() as conn:
        conn.execute(f"TRUNCATE {work}, {turns}")
        conn.execute(
            f"""INSERT INTO {work} (tenant, item_id, payload, priority, state, attempts,
                                    available_at, enqueued_at)
                SELECT 't' || (g % {tenants}), 'i' || g, '{{"n":1}}', 0, 'ready', 0,
                       {NOW - 10}, {NOW - 10}
                FROM generate_series(1, {count}) AS g"""
        )
        conn.execute(
            f"INSERT INTO {turns} (tenant, turn) SELECT DISTINCT w.tenant, 0 FROM {work} w"
        )
        if analyze:
            conn.execute(f"VACUUM ANALYZE {work}")
            conn.execute(f"ANALYZE {turns}")


def raw_setup(tables: StateTables) -> str:
    table = tables.qualified("bench_raw")
    with admin() as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, n bigint NOT NULL)")
        conn.execute(f"INSERT INTO {table} SELECT g, 0 FROM generate_series(0, 63) AS g")
    return f"UPDATE {table} SET n = n + 1 WHERE id = %s RETURNING n"


# -- drivers: run `op(worker)` from `concurrency` workers for `seconds`; return ops/s ---------
async def run_async(
    op: Callable[[int], Awaitable[object]], concurrency: int, seconds: float
) -> float:
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker(n: int) -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await op(n)
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker(n) for n in range(concurrency)))
    return done / (time.perf_counter() - start)


def run_sync(op: Callable[[int], object], concurrency: int, seconds: float) -> float:
    counts = [0] * concurrency
    deadline = time.perf_counter() + seconds

    def worker(n: int) -> None:
        while time.perf_counter() < deadline:
            op(n)
            counts[n] += 1

    start = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - start)


# -- the async twin ---------------------------------------------------------------------------
async def bench_async(tables: StateTables, raw_sql: str, seconds: float) -> list[list[str]]:
    rows: list[list[str]] = []
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(DSN, min_size=16, max_size=16, open=False)
    await pool.open(wait=True)
    store = await AsyncPostgresStateStore.open(pool, tables=tables)
    queue = await AsyncPostgresWorkQueue.open(pool, tables=tables)
    versions: dict[int, int] = {}
    for n in range(16):
        record = await store.put_run(RunKey("bench", f"a{n}"), {"n": 0}, expected_version=0)
        versions[n] = record.version

    async def raw(n: int) -> None:
        async with pool.connection() as conn:
            await conn.set_autocommit(True)
            await conn.execute(raw_sql, (n,), prepare=True)

    async def put(n: int) -> None:
        record = await store.put_run(
            RunKey("bench", f"a{n}"), {"n": n}, expected_version=versions[n]
        )
        versions[n] = record.version

    async def patch(n: int) -> None:
        await store.patch_run(RunKey("bench", f"a{n}"), CounterDelta(input_tokens=1))

    async def claim_complete(n: int) -> None:
        lease = await queue.claim(f"w{n}")
        if lease is not None:
            await queue.complete(lease.tenant, lease.item_id, token=lease.token)

    for concurrency in CONCURRENCY:
        baseline = await run_async(raw, concurrency, seconds)
        for name in OPERATIONS:
            if name in CLAIM_TENANTS:
                load_items(tables, 100_000, CLAIM_TENANTS[name])
                op = claim_complete
            else:
                op = put if name == "put_run" else patch
            # put_run re-reads nothing: after patches, refresh the versions it CASes on.
            for n in range(16):
                got = await store.get_run(RunKey("bench", f"a{n}"))
                versions[n] = got.version if got else 0
            ops = await run_async(op, concurrency, seconds)
            rows.append(_row("async", name, concurrency, ops, baseline))
    await pool.close()
    return rows


# -- the sync twin ----------------------------------------------------------------------------
def bench_sync(tables: StateTables, raw_sql: str, seconds: float) -> list[list[str]]:
    rows: list[list[str]] = []
    pool: ConnectionPool[Any] = ConnectionPool(DSN, min_size=16, max_size=16, open=True)
    pool.wait()
    store = PostgresStateStore.open(pool, tables=tables)
    queue = PostgresWorkQueue.open(pool, tables=tables)
    versions: dict[int, int] = {}
    for n in range(16):
        versions[n] = store.put_run(RunKey("bench", f"s{n}"), {"n": 0}, expected_version=0).version

    def raw(n: int) -> None:
        with pool.connection() as conn:
            conn.autocommit = True
            conn.execute(raw_sql, (n,), prepare=True)

    def put(n: int) -> None:
        versions[n] = store.put_run(
            RunKey("bench", f"s{n}"), {"n": n}, expected_version=versions[n]
        ).version

    def patch(n: int) -> None:
        store.patch_run(RunKey("bench", f"s{n}"), CounterDelta(input_tokens=1))

    def claim_complete(n: int) -> None:
        lease = queue.claim(f"w{n}")
        if lease is not None:
            queue.complete(lease.tenant, lease.item_id, token=lease.token)

    for concurrency in CONCURRENCY:
        baseline = run_sync(raw, concurrency, seconds)
        for name in OPERATIONS:
            if name in CLAIM_TENANTS:
                load_items(tables, 100_000, CLAIM_TENANTS[name])
                op = claim_complete
            else:
                op = put if name == "put_run" else patch
            for n in range(16):
                got = store.get_run(RunKey("bench", f"s{n}"))
                versions[n] = got.version if got else 0
            ops = run_sync(op, concurrency, seconds)
            rows.append(_row("sync", name, concurrency, ops, baseline))
    pool.close()
    return rows


def _row(twin: str, name: str, concurrency: int, ops: float, baseline: float) -> list[str]:
    return [
        twin,
        name,
        str(concurrency),
        f"{ops:,.0f}",
        f"{baseline:,.0f}",
        f"{ops / baseline:.2f}",
    ]


# -- claim latency by queue depth and tenant count ----------------------------------------------
def claim_latency(cases: list[tuple[int, int]], samples: int) -> list[list[str]]:
    """p50/p99/max of one claim for each (items, tenants), never analyzed and analyzed; each
    case in a fresh schema, so "never analyzed" really has no statistics."""
    rows: list[list[str]] = []
    for items, tenants in cases:
        for analyze in (False, True):
            schema = f"bench_{uuid.uuid4().hex[:8]}"
            tables = StateTables(schema=schema)
            with admin() as conn:
                conn.execute(f'CREATE SCHEMA "{schema}"')
                conn.execute(schema_sql(tables))
            pool: ConnectionPool[Any] = ConnectionPool(DSN, min_size=1, max_size=2, open=True)
            try:
                queue = PostgresWorkQueue.open(pool, tables=tables)
                load_items(tables, items, tenants, analyze=analyze)
                for _ in range(20):  # warm the prepared statement and the cache
                    queue.claim("warm")
                timings = []
                for _ in range(samples):
                    start = time.perf_counter()
                    lease = queue.claim("probe")
                    timings.append((time.perf_counter() - start) * 1000)
                    assert lease is not None
            finally:
                pool.close()
                with admin() as conn:
                    conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
            timings.sort()
            p99 = timings[min(len(timings) - 1, int(len(timings) * 0.99))]
            rows.append(
                [
                    f"{items:,}",
                    f"{tenants:,}",
                    "yes" if analyze else "never",
                    f"{statistics.median(timings):.2f}",
                    f"{p99:.2f}",
                    f"{timings[-1]:.2f}",
                ]
            )
    return rows


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


OPS_HEADER = ["twin", "operation", "concurrency", "ops/s", "raw UPDATE+COMMIT/s", "ratio"]
LATENCY_HEADER = ["items", "tenants", "analyzed", "claim p50 ms", "claim p99 ms", "claim max ms"]


def write_png(path: str, ops: list[list[str]]) -> bool:
    """Chart the ratios to the raw baseline; False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    labels = [f"{r[0]} {r[1]} c={r[2]}" for r in ops]
    figure, axes = plt.subplots(figsize=(9, 0.35 * len(ops) + 1))
    axes.barh(labels, [float(r[5]) for r in ops])
    axes.set_xlabel("ops/s / raw UPDATE+COMMIT/s (same run, same concurrency)")
    figure.tight_layout()
    figure.savefig(path)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="per measurement")
    parser.add_argument(
        "--cases",
        default="1000:1,100000:1,100000:10,100000:100000",
        help="claim latency cases, items:tenants",
    )
    parser.add_argument("--large", action="store_true", help="add 1M items in one tenant")
    parser.add_argument("--samples", type=int, default=300, help="claims timed per case")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    parser.add_argument("--png", help="also chart the ratios to this PNG (needs matplotlib)")
    args = parser.parse_args()
    cases = [(int(c.split(":")[0]), int(c.split(":")[1])) for c in args.cases.split(",")]
    if args.large:
        cases.append((1_000_000, 1))
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    tables = StateTables(schema=schema)
    with admin() as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(schema_sql(tables))
        version = conn.execute("SHOW server_version").fetchone()
    try:
        raw_sql = raw_setup(tables)
        ops = asyncio.run(bench_async(tables, raw_sql, args.seconds))
        ops += bench_sync(tables, raw_sql, args.seconds)
    finally:
        with admin() as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    latency = claim_latency(cases, args.samples)
    server = version[0] if version else "?"
    print(f"PostgreSQL {server}, {os.cpu_count()} CPUs, {args.seconds} s per measurement\n")
    print(table(OPS_HEADER, ops))
    print()
    print(table(LATENCY_HEADER, latency))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(
                {
                    "server": server,
                    "cpus": os.cpu_count(),
                    "seconds": args.seconds,
                    "operations": [dict(zip(OPS_HEADER, r, strict=True)) for r in ops],
                    "claim_latency": [dict(zip(LATENCY_HEADER, r, strict=True)) for r in latency],
                },
                out,
                indent=1,
            )
    if args.png and not write_png(args.png, ops):
        print(f"\n(no {args.png}: matplotlib is not installed)")


if __name__ == "__main__":
    main()
