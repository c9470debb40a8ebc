"""The PostgreSQL benchmark's claim latency (part 2 of benchmarks/bench_postgres.py): one claim
timed by queue depth and tenant count, on tables never analyzed and analyzed, and its growth."""

from __future__ import annotations

import statistics
import time
import uuid
from typing import Any

from psycopg_pool import ConnectionPool
from runyard.postgres import PostgresWorkQueue, StateTables, schema_sql

from benchmarks.postgres_setup import DSN, admin, load_items

__all__ = ["GROWTH_HEADER", "LATENCY_HEADER", "claim_latency", "growth"]

LATENCY_HEADER = ["items", "tenants", "analyzed", "claim p50 ms", "claim p99 ms", "claim max ms"]
GROWTH_HEADER = ["growth by", "from -> to", "analyzed", "p50 growth", "p99 growth"]


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


def growth(latency: list[list[str]]) -> list[list[str]]:
    """How the claim latency grows: by depth (one tenant, fewest to most items) and by tenant
    count (the same items, fewest to most tenants), never analyzed and analyzed."""
    cases = [
        (int(r[0].replace(",", "")), int(r[1].replace(",", "")), r[2], float(r[3]), float(r[4]))
        for r in latency
    ]
    rows: list[list[str]] = []
    for analyzed in ("never", "yes"):
        depth = sorted(c for c in cases if c[1] == 1 and c[2] == analyzed)
        if len(depth) >= 2:
            low, high = depth[0], depth[-1]
            rows.append(_growth_row("items, 1 tenant", low[0], high[0], analyzed, low, high))
        for items in sorted({c[0] for c in cases}):
            spread = sorted(
                (c for c in cases if c[0] == items and c[1] > 1 and c[2] == analyzed),
                key=lambda c: c[1],
            )
            if len(spread) >= 2:
                low, high = spread[0], spread[-1]
                label = f"tenants, {items:,} items"
                rows.append(_growth_row(label, low[1], high[1], analyzed, low, high))
    return rows


def _growth_row(
    label: str,
    start: int,
    end: int,
    analyzed: str,
    low: tuple[int, int, str, float, float],
    high: tuple[int, int, str, float, float],
) -> list[str]:
    return [
        label,
        f"{start:,} -> {end:,}",
        analyzed,
        f"{high[3] / low[3]:.2f}x",
        f"{high[4] / low[4]:.2f}x",
    ]
