"""list_runs(session_id=...) on PostgreSQL: ms per page in a session of 100,000 runs, with
state version 6's session index (tenant, session_id, seq) beside version 5's (tenant,
session_id). Not a test: a script whose figures docs/postgres.md quotes.

    python -m benchmarks.postgres_session_pages [--runs 100000] [--pages 20]

Each index gets a fresh schema (dropped at the end) holding one tenant's runs: ``--runs`` in
session "big" (one in ten 'failed', the rest 'done'), as many again in 10,000 other sessions
and in none. Pages of 100 are read through the sync store (prepared statements: the generic
plan after five runs), from the first page on, never analyzed and then after ANALYZE; then the
same with status='failed' (ten runs per page are failed, so a page walks about 1,000 of the
session's runs) and with status='running' (no run matches: the page walks the rest of the
session). Prints the median ms per page of each, and writes them with each case's speed-up over
version 5 (the baseline: "ratio", version 5's ms over version 6's) to
``postgres-session-pages.json`` and ``.png`` in ``--out-dir`` (benchmarks/_report.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid

import psycopg
from psycopg_pool import ConnectionPool
from runyard.postgres import PostgresStateStore, StateTables, schema_sql

from benchmarks._report import write_report

DSN = os.environ.get(
    "RUNYARD_BENCH_PG_DSN",
    "host=127.0.0.1 port=5432 user=postgres dbname=test options='-c statement_timeout=120s'",
)
NEW_INDEX = "(tenant, session_id, seq)\n    WHERE session_id IS NOT NULL"
OLD_INDEX = "(tenant, session_id) WHERE session_id IS NOT NULL"


def _ddl(tables: StateTables, version: int) -> str:
    ddl = schema_sql(tables)
    assert NEW_INDEX in ddl
    if version == 6:
        return ddl
    ddl = ddl.replace(NEW_INDEX, OLD_INDEX)
    return ddl.replace("VALUES ('state', 6)", f"VALUES ('state', {version})")


def _load(conn: psycopg.Connection[tuple[object, ...]], tables: StateTables, runs: int) -> None:
    table = tables.qualified(tables.runs)
    conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    conn.execute(
        f"""INSERT INTO {table} (tenant, run_id, blob, version, status, session_id,
                                 created_at, updated_at)
            SELECT 't', 'r' || g, '{{}}', 1,
                   CASE WHEN g % 30 = 0 THEN 'failed' ELSE 'done' END,
                   CASE WHEN g % 3 = 0 THEN 'big'
                        WHEN g % 3 = 1 THEN 'other-' || (g % 10000) END, 0, 0
            FROM generate_series(1, {3 * runs}) AS g"""
    )


def _pages(store: PostgresStateStore, status: str | None, pages: int) -> list[float]:
    """Milliseconds of each of ``pages`` consecutive pages of session "big"."""
    took, cursor = [], None
    for _ in range(pages):
        start = time.perf_counter()
        page = store.list_runs("t", session_id="big", status=status, limit=100, cursor=cursor)
        took.append((time.perf_counter() - start) * 1000)
        cursor = page.next_cursor
        if cursor is None:
            break
    return took


def _measure(version: int, runs: int, pages: int) -> dict[str, float]:
    """The median ms per page of each case ("analyzed=no, status=None", ...), printed too."""
    medians: dict[str, float] = {}
    tables = StateTables(schema=f"ry_bench_{uuid.uuid4().hex[:10]}")
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{tables.schema}"')
        try:
            conn.execute(_ddl(tables, version))
            _load(conn, tables, runs)
            conn.execute(f"VACUUM {tables.qualified(tables.runs)}")
            with ConnectionPool(DSN, min_size=1, max_size=1) as pool:
                store = PostgresStateStore(pool, tables=tables)  # no verify(): either version
                for analyzed in (False, True):
                    if analyzed:
                        conn.execute(f"ANALYZE {tables.qualified(tables.runs)}")
                    for status in (None, "failed", "running"):
                        _pages(store, status, 6)  # past the custom plans, caches warm
                        took = _pages(store, status, pages)
                        case = f"analyzed={'yes' if analyzed else 'no'}, status={status}"
                        medians[case] = statistics.median(took)
                        print(
                            f"| {version} | {'yes' if analyzed else 'no'} | {status} "
                            f"| {len(took)} | {statistics.median(took):.2f} |"
                        )
        finally:
            conn.execute(f'DROP SCHEMA "{tables.schema}" CASCADE')
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--out-dir", default="benchmarks/results")
    args = parser.parse_args()
    print(f"{args.runs} runs in the session; pages of 100")
    print("| state version | analyzed | status | pages | median ms per page |")
    print("| --- | --- | --- | --- | --- |")
    old, new = (_measure(version, args.runs, args.pages) for version in (5, 6))
    figures = {
        "runs in the session": args.runs,
        "page": 100,
        "cases": {
            case: {
                "state 5 ms per page": old[case],
                "state 6 ms per page": new[case],
                "ratio": old[case] / new[case],
            }
            for case in old
        },
    }
    for path in write_report("postgres-session-pages", figures, out_dir=args.out_dir):
        print("wrote", path)


if __name__ == "__main__":
    main()
