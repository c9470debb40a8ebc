"""The PostgreSQL benchmark's setup (benchmarks/bench_postgres.py and its parts): the server it
runs against, the queue's items loaded in one statement, the raw write and the lean table."""

from __future__ import annotations

import os
import time
from typing import Any

import psycopg
from runyard.postgres import StateTables

__all__ = ["DSN", "NOW", "admin", "lean_setup", "load_items", "raw_setup"]

DSN = os.environ.get(
    "RUNYARD_BENCH_PG_DSN",
    "host=127.0.0.1 port=5432 user=postgres dbname=test options='-c statement_timeout=30s'",
)
NOW = time.time()


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
        # Write the load out now: otherwise its writeback (hundreds of MB at 1M items) runs
        # under the timed claims and every commit's WAL flush waits behind it.
        try:
            conn.execute("CHECKPOINT")
        except psycopg.errors.InsufficientPrivilege:
            print("(no CHECKPOINT privilege: the load's writeback may slow the timed claims)")


def raw_setup(tables: StateTables) -> str:
    table = tables.qualified("bench_raw")
    with admin() as conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, n bigint NOT NULL)")
        conn.execute(f"INSERT INTO {table} SELECT g, 0 FROM generate_series(0, 63) AS g")
        lean = tables.qualified("bench_lean")
        conn.execute(
            f"CREATE TABLE {lean} (id bigserial PRIMARY KEY, state text NOT NULL, "
            "priority int NOT NULL DEFAULT 0, token bigint)"
        )
        conn.execute(f"CREATE INDEX ON {lean} (priority DESC, id) WHERE state = 'ready'")
    return f"UPDATE {table} SET n = n + 1 WHERE id = %s RETURNING n"


def lean_setup(tables: StateTables) -> tuple[str, str]:
    """Fill the lean table (100,000 ready rows); its claim and its delete."""
    lean = tables.qualified("bench_lean")
    with admin() as conn:
        conn.execute(f"TRUNCATE {lean}")
        conn.execute(f"INSERT INTO {lean} (state) SELECT 'ready' FROM generate_series(1, 100000)")
        conn.execute(f"VACUUM ANALYZE {lean}")
    claim = (
        f"UPDATE {lean} SET state = 'leased', token = id WHERE id = (SELECT id FROM {lean} "
        "WHERE state = 'ready' ORDER BY priority DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED) "
        "RETURNING id, token"
    )
    return claim, f"DELETE FROM {lean} WHERE id = %s AND token = %s"
