"""PostgreSQL benchmark (`make bench-postgres`): ops/s of both twins beside raw psycopg.

Runs against RUNYARD_BENCH_PG_DSN (default: the local test database) in a schema of its own,
dropped at the end. Each measurement runs for --seconds (default 2). Prints Markdown tables:

1. put_run, patch_run and claim+complete ops/s for the async and sync twins at concurrency 1
   and 16, claim+complete with every item in one tenant and spread over 16 tenants, each beside
   the raw psycopg round trip of a single-row UPDATE that commits (autocommit, prepared),
   measured in the same run at the same concurrency, and the ratio;
2. the latency of one claim (sync twin, concurrency 1) by queue depth (1k and 100k items in one
   tenant; 1M with --large) and by tenant count (100k items over 10 and over 100k tenants),
   each on tables never analyzed and after ANALYZE, in a fresh schema per case (each load
   ends with a CHECKPOINT, so its writeback does not run under the timed claims); then how the
   p50 and p99 grow from the shallowest to the deepest queue of one tenant and from the
   fewest to the most tenants holding the same items (target: at most 1.3x);

3. the batched calls: claim_many(limit=16)+complete_many at concurrency 16, items/s, one tenant
   and 16 tenants, beside the same baseline;
4. the floor of any claim+complete at concurrency 16: the least SKIP LOCKED claim (one UPDATE
   of the head of a lean table's one partial index) and a DELETE, beside the same baseline;
5. the server's side: the baseline, the floor and the queue's own claim and complete statements
   driven by pgbench, a C client, at concurrency 16 (benchmarks/postgres_server_side.py): what
   the SQL costs the server whatever the client.

The figures go to ``bench-postgres.json`` and the ratios to ``bench-postgres.png`` in
``--out-dir`` (default benchmarks/results; benchmarks/_report.py). ``--only latency`` (or
``ops``, or ``server``) runs one part, printed only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

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

from benchmarks._report import write_report
from benchmarks.postgres_latency import GROWTH_HEADER, LATENCY_HEADER, claim_latency, growth
from benchmarks.postgres_server_side import SERVER_HEADER, server_side
from benchmarks.postgres_setup import DSN, admin, lean_setup, load_items, raw_setup

CONCURRENCY = (1, 16)
# claim+complete runs on 100k items held by one tenant, then spread over 16 tenants.
CLAIM_TENANTS = {"claim+complete 1 tenant": 1, "claim+complete 16 tenants": 16}
# the batched calls, n items per round trip; measured at concurrency 16 only (items/s)
BATCH = 16
BATCHED_TENANTS = {
    f"claim_many+complete_many n={BATCH} 1 tenant": 1,
    f"claim_many+complete_many n={BATCH} 16 tenants": 16,
}
# The floor of any claim+complete: the least SKIP LOCKED claim (one UPDATE of the head of one
# partial index, no tenants, rotation or counts) and a DELETE, on a lean table (a bigserial key
# and that one index), at concurrency 16 only: its ratio bounds what a queue that claims and
# completes in two statements (two commits) can reach against the raw write here.
FLOOR = "floor: lean SKIP LOCKED claim+delete"
OPERATIONS = ("put_run", "patch_run", *CLAIM_TENANTS, *BATCHED_TENANTS, FLOOR)


# -- drivers: run `op(worker)` from `concurrency` workers for `seconds`; return ops/s ---------
async def run_async(
    op: Callable[[int], Awaitable[int | None]], concurrency: int, seconds: float
) -> float:
    """Ops/s (an op that returns a count counts as that many: items of a batch)."""
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker(n: int) -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            count = await op(n)
            done += 1 if count is None else count

    start = time.perf_counter()
    await asyncio.gather(*(worker(n) for n in range(concurrency)))
    return done / (time.perf_counter() - start)


def run_sync(op: Callable[[int], int | None], concurrency: int, seconds: float) -> float:
    counts = [0] * concurrency
    deadline = time.perf_counter() + seconds

    def worker(n: int) -> None:
        while time.perf_counter() < deadline:
            count = op(n)
            counts[n] += 1 if count is None else count

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

    async def claim_complete_many(n: int) -> int:
        leases = await queue.claim_many(f"w{n}", limit=BATCH)
        if leases:
            await queue.complete_many(leases)
        return len(leases)

    lean_claim, lean_delete = "", ""

    async def floor(n: int) -> None:
        async with pool.connection() as conn:
            await conn.set_autocommit(True)
            row = await (await conn.execute(lean_claim, prepare=True)).fetchone()
        if row is not None:
            async with pool.connection() as conn:
                await conn.set_autocommit(True)
                await conn.execute(lean_delete, row, prepare=True)

    for concurrency in CONCURRENCY:
        baseline = await run_async(raw, concurrency, seconds)
        for name in OPERATIONS:
            op: Callable[[int], Awaitable[int | None]]
            if name == FLOOR:
                if concurrency == 1:
                    continue
                lean_claim, lean_delete = lean_setup(tables)
                op = floor
            elif name in BATCHED_TENANTS:
                if concurrency == 1:
                    continue
                load_items(tables, 100_000, BATCHED_TENANTS[name])
                op = claim_complete_many
            elif name in CLAIM_TENANTS:
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

    def claim_complete_many(n: int) -> int:
        leases = queue.claim_many(f"w{n}", limit=BATCH)
        if leases:
            queue.complete_many(leases)
        return len(leases)

    lean_claim, lean_delete = "", ""

    def floor(n: int) -> None:
        with pool.connection() as conn:
            conn.autocommit = True
            row = conn.execute(lean_claim, prepare=True).fetchone()
        if row is not None:
            with pool.connection() as conn:
                conn.autocommit = True
                conn.execute(lean_delete, row, prepare=True)

    for concurrency in CONCURRENCY:
        baseline = run_sync(raw, concurrency, seconds)
        for name in OPERATIONS:
            op: Callable[[int], int | None]
            if name == FLOOR:
                if concurrency == 1:
                    continue
                lean_claim, lean_delete = lean_setup(tables)
                op = floor
            elif name in BATCHED_TENANTS:
                if concurrency == 1:
                    continue
                load_items(tables, 100_000, BATCHED_TENANTS[name])
                op = claim_complete_many
            elif name in CLAIM_TENANTS:
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


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


OPS_HEADER = ["twin", "operation", "concurrency", "ops/s", "raw UPDATE+COMMIT/s", "ratio"]


def figures(
    server: str,
    seconds: float,
    ops: list[list[str]],
    latency: list[list[str]],
    server_rows: list[list[str]],
) -> dict[str, Any]:
    """The report: each operation's ops/s, the baseline's and their ratio, by twin and
    concurrency; the SQL through pgbench; the claim latencies and their growth."""
    operations: dict[str, dict[str, dict[str, float]]] = {}
    for twin, name, concurrency, rate, raw, ratio in ops:
        operations.setdefault(f"{twin} {name}", {})[f"c={concurrency}"] = {
            "ops/s": float(rate.replace(",", "")),
            "raw UPDATE+COMMIT/s": float(raw.replace(",", "")),
            "ratio": float(ratio),
        }
    return {
        "server": server,
        "cpus": os.cpu_count(),
        "seconds": seconds,
        "operations": operations,
        "server side (pgbench)": {
            name: {"jobs/s": _number(jobs), "raw UPDATE+COMMIT/s": _number(raw), "ratio": float(r)}
            for name, _, jobs, raw, r in server_rows[1:]
        },
        "claim_latency": [dict(zip(LATENCY_HEADER, r, strict=True)) for r in latency],
        "claim_latency_growth": [dict(zip(GROWTH_HEADER, r, strict=True)) for r in growth(latency)],
    }


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
    parser.add_argument(
        "--only",
        choices=("ops", "latency", "server"),
        help="run one part only (ops/s, claim latency, or the SQL through pgbench); prints, "
        "writes no report",
    )
    parser.add_argument(
        "--out-dir",
        default="benchmarks/results",
        help="where bench-postgres.json and bench-postgres.png go",
    )
    args = parser.parse_args()
    cases = [(int(c.split(":")[0]), int(c.split(":")[1])) for c in args.cases.split(",")]
    if args.large:
        cases.append((1_000_000, 1))
    ops: list[list[str]] = []
    server_rows: list[list[str]] = []
    server = "?"
    if args.only in (None, "ops", "server"):
        schema = f"bench_{uuid.uuid4().hex[:8]}"
        tables = StateTables(schema=schema)
        with admin() as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
            conn.execute(schema_sql(tables))
        try:
            raw_sql = raw_setup(tables)
            if args.only != "server":
                ops = asyncio.run(bench_async(tables, raw_sql, args.seconds))
                ops += bench_sync(tables, raw_sql, args.seconds)
            if args.only != "ops":
                server_rows = server_side(
                    tables,
                    DSN,
                    args.seconds,
                    lambda tenants: load_items(tables, 100_000, tenants),
                    lambda: lean_setup(tables),
                )
        finally:
            with admin() as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    latency = claim_latency(cases, args.samples) if args.only in (None, "latency") else []
    with admin() as conn:
        version = conn.execute("SHOW server_version").fetchone()
        server = version[0] if version else server
    print(f"PostgreSQL {server}, {os.cpu_count()} CPUs, {args.seconds} s per measurement\n")
    if ops:
        print(table(OPS_HEADER, ops))
        print()
    if server_rows:
        print(table(SERVER_HEADER, server_rows))
        print()
    if latency:
        print(table(LATENCY_HEADER, latency))
        print()
        print(table(GROWTH_HEADER, growth(latency)))
    if args.only is None:
        report = figures(server, args.seconds, ops, latency, server_rows)
        for path in write_report("bench-postgres", report, out_dir=args.out_dir):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
