"""PostgreSQL claim latency while many tenants hold only a delayed item (not a test).

The claim walks the rotation in turn order, so each such tenant ahead of the one with due work
may cost a probe. A script to run before and after a change to the claim: public API only.

    python -m benchmarks.postgres_delayed_tenants [--tenants 0,100,2000,20000] [--claims 800]
        [--first 50] [--steady-after 500] [--out-dir benchmarks/results]

For each N in ``--tenants`` (N=0, the baseline, is always measured, first): a fresh schema
(dropped at the end); N tenants ``idle-000000``... get one item each through ``enqueue``,
delayed by a day; then ``enqueue_many("busy", ...)`` queues ``--claims`` items. The sync
``PostgresWorkQueue`` then claims and completes ``--claims`` times; each lease must be busy's
and only the claim is timed. Prints a Markdown table of the load's wall time and the claim's
p50/p99 in ms over the first ``--first`` claims and over the claims after ``--steady-after``,
and writes them, with each p50's ratio to N=0's, to ``postgres_delayed_tenants.json`` and
``.png`` in ``--out-dir`` (benchmarks/_report.py).
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool
from runyard.models import NewItem
from runyard.postgres import PostgresWorkQueue, StateTables, schema_sql

from benchmarks._report import write_report
from benchmarks.postgres_setup import DSN, admin

DELAY_SECONDS = 86_400.0  # due in a day: never due while the claims are timed
BATCH = 1_000  # enqueue_many takes at most 10,000 items


def _percentiles(timings: list[float]) -> dict[str, float]:
    ordered = sorted(timings)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"p50_ms": statistics.median(ordered), "p99_ms": p99}


def _load(queue: PostgresWorkQueue, tenants: int, claims: int) -> float:
    """Queue the delayed items and busy's due ones; the load's wall time in seconds."""
    start = time.perf_counter()
    for i in range(tenants):
        queue.enqueue(f"idle-{i:06d}", {"i": i}, delay_seconds=DELAY_SECONDS)
        if (i + 1) % 5_000 == 0:
            took = time.perf_counter() - start
            print(f"  N={tenants:,}: {i + 1:,} delayed tenants loaded ({took:.1f} s)", flush=True)
    for first in range(0, claims, BATCH):
        items = [NewItem(payload={"k": k}) for k in range(first, min(claims, first + BATCH))]
        queue.enqueue_many("busy", items)
    return time.perf_counter() - start


def _measure(tenants: int, claims: int) -> tuple[float, list[float]]:
    """The load's seconds and the ms of each of ``claims`` claims, in a fresh schema."""
    tables = StateTables(schema=f"bench_{uuid.uuid4().hex[:8]}")
    with admin() as conn:
        conn.execute(f'CREATE SCHEMA "{tables.schema}"')
    try:
        with admin() as conn:
            conn.execute(schema_sql(tables))
        with ConnectionPool(DSN, min_size=1, max_size=2) as pool:
            queue = PostgresWorkQueue.open(pool, tables=tables)
            load_seconds = _load(queue, tenants, claims)
            with admin() as conn:  # the load's writeback would otherwise run under the claims
                try:
                    conn.execute("CHECKPOINT")
                except psycopg.errors.InsufficientPrivilege:
                    print("(no CHECKPOINT privilege: the load's writeback may slow the claims)")
            timings: list[float] = []
            for _ in range(claims):
                start = time.perf_counter()
                lease = queue.claim("bench")
                timings.append((time.perf_counter() - start) * 1000)
                assert lease is not None and lease.tenant == "busy", lease
                queue.complete(lease)
    finally:
        with admin() as conn:
            conn.execute(f'DROP SCHEMA "{tables.schema}" CASCADE')
    return load_seconds, timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", default="0,100,2000,20000", help="comma-separated Ns")
    parser.add_argument("--claims", type=int, default=800)
    parser.add_argument("--first", type=int, default=50, help="the early claims reported")
    parser.add_argument(
        "--steady-after", type=int, default=500, help="claims before the steady figures"
    )
    parser.add_argument("--out-dir", default="benchmarks/results")
    args = parser.parse_args()
    counts = [int(n) for n in args.tenants.split(",") if n.strip()]
    counts = [0, *(n for n in dict.fromkeys(counts) if n != 0)]  # the baseline first, once
    if min(counts) < 0 or not 0 < args.first <= args.steady_after < args.claims:
        parser.error("need tenants >= 0 and 0 < --first <= --steady-after < --claims")
    early, steady = f"first {args.first}", f"after {args.steady_after}"

    cases: dict[str, dict[str, Any]] = {}
    for tenants in counts:
        load_seconds, timings = _measure(tenants, args.claims)
        cases[f"N={tenants}"] = {
            "tenants": tenants,
            "load seconds": load_seconds,
            early: _percentiles(timings[: args.first]),
            steady: _percentiles(timings[args.steady_after :]),
        }
    base = cases["N=0"]
    for case in cases.values():
        for part in (early, steady):
            case[part]["ratio"] = case[part]["p50_ms"] / base[part]["p50_ms"]

    print(f"{args.claims} claim+complete on tenant busy; claim ms; ratio: p50 over N=0's p50")
    print(
        f"| delayed tenants | load s | {early} claims p50 | p99 | ratio "
        f"| claims {steady} p50 | p99 | ratio |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for case in cases.values():
        cells = [f"{case['tenants']:,}", f"{case['load seconds']:.2f}"]
        for part in (early, steady):
            figures = case[part]
            cells += [f"{figures['p50_ms']:.2f}", f"{figures['p99_ms']:.2f}"]
            cells.append(f"{figures['ratio']:.2f}x")
        print("| " + " | ".join(cells) + " |")
    settings = {"claims": args.claims, "first": args.first, "steady after": args.steady_after}
    report = {"settings": {**settings, "delay seconds": DELAY_SECONDS}, **cases}
    for path in write_report("postgres_delayed_tenants", report, out_dir=args.out_dir):
        print("wrote", path)


if __name__ == "__main__":
    main()
