"""The claim stays an index scan on a large queue: no sequential scan of the work table."""

from __future__ import annotations

import psycopg
import pytest
from runyard._postgres_sql import statements
from runyard.postgres import StateTables

from tests.support.postgres_plugin import admin_connection

ITEMS, TENANTS, NOW = 200_000, 1_000, 1_700_000_000.0


def _load(conn: psycopg.Connection[tuple[object, ...]], tables: StateTables) -> None:
    work, turns = tables.qualified(tables.work), tables.qualified(tables.turns)
    conn.execute(
        f"""INSERT INTO {work} (tenant, item_id, payload, priority, state, attempts,
                                available_at, enqueued_at)
            SELECT 'tenant-' || (g % {TENANTS}), 'item-' || g, '{{}}'::jsonb, 0,
                   CASE WHEN g % 10 = 0 THEN 'leased' ELSE 'ready' END, 0,
                   {NOW} - 1000 + (g % 2000), {NOW} - 1000
            FROM generate_series(1, {ITEMS}) AS g"""
    )
    conn.execute(
        f"INSERT INTO {turns} (tenant, turn)"
        f" SELECT 'tenant-' || t, t FROM generate_series(0, {TENANTS - 1}) AS t"
    )
    conn.execute(f"ANALYZE {work}")
    conn.execute(f"ANALYZE {turns}")


def _plan(conn: psycopg.Connection[tuple[object, ...]], statement: str) -> str:
    cursor = psycopg.RawCursor(conn)
    cursor.execute(f"EXPLAIN {statement}", (NOW, "w1", NOW + 30, []))
    return "\n".join(str(row[0]) for row in cursor.fetchall())


def _generic_plan(conn: psycopg.Connection[tuple[object, ...]], statement: str) -> str:
    # Prepared statements switch to a generic plan after a few runs: force one and read it.
    conn.execute(f"PREPARE claim_plan (float8, text, float8, text[]) AS {statement}")
    conn.execute("SET plan_cache_mode = force_generic_plan")
    rows = conn.execute(f"EXPLAIN EXECUTE claim_plan ({NOW}, 'w1', {NOW + 30}, '{{}}')")
    return "\n".join(str(row[0]) for row in rows)


@pytest.mark.slow
def test_the_claim_plan_never_scans_the_work_table(pg_tables: StateTables) -> None:
    claim = statements(pg_tables).claim
    with admin_connection() as conn:
        _load(conn, pg_tables)
        custom = _plan(conn, claim)
        generic = _generic_plan(conn, claim)
    assert "$1" in generic  # really the generic plan
    for plan in (custom, generic):
        assert f"Seq Scan on {pg_tables.work}" not in plan, plan
        assert f"{pg_tables.work}_ready" in plan, plan
