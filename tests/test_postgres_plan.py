"""The claim stays an index scan on a large queue: no sequential scan of the work table."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from runyard.postgres import StateTables
from runyard.postgres.statements import statements

from tests.support.postgres_plugin import admin_connection

ITEMS, TENANTS, NOW = 200_000, 1_000, 1_700_000_000.0


def _load(conn: psycopg.Connection[tuple[object, ...]], tables: StateTables) -> None:
    work = tables.qualified(tables.work)
    conn.execute(
        f"""INSERT INTO {work} (tenant, item_id, payload, priority, state, attempts,
                                available_at, enqueued_at)
            SELECT 'tenant-' || (g % {TENANTS}), 'item-' || g, '{{}}'::jsonb, 0,
                   CASE WHEN g % 10 = 0 THEN 'leased' ELSE 'ready' END, 0,
                   {NOW} - 1000 + (g % 2000), {NOW} - 1000
            FROM generate_series(1, {ITEMS}) AS g"""
    )
    _count_turns(conn, tables)


def _count_turns(conn: psycopg.Connection[tuple[object, ...]], tables: StateTables) -> None:
    """Give every tenant of the work table a turn (its number) and its ready count, as enqueue
    would have; then ANALYZE."""
    work, turns = tables.qualified(tables.work), tables.qualified(tables.turns)
    conn.execute(
        f"""INSERT INTO {turns} (tenant, turn, ready)
            SELECT w.tenant, substring(w.tenant from '[0-9]+$')::bigint,
                   count(*) FILTER (WHERE w.state = 'ready')
            FROM {work} w GROUP BY w.tenant
            ON CONFLICT (tenant) DO UPDATE SET ready = EXCLUDED.ready"""
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


IDLE, BACKLOG, ACTIVE, PER_ACTIVE = 50_000, 50_000, 200, 20


def _load_idle_and_delayed(
    conn: psycopg.Connection[tuple[object, ...]], tables: StateTables
) -> None:
    """50,000 tenants that had work once and have none now, with the oldest turns; then one
    tenant whose 50,000 items are all delayed, next in turn; then 200 tenants with due work."""
    work, turns = tables.qualified(tables.work), tables.qualified(tables.turns)
    conn.execute(
        f"INSERT INTO {turns} (tenant, turn, ready)"
        f" SELECT 'idle-' || t, t, 0 FROM generate_series(0, {IDLE - 1}) AS t"
    )
    conn.execute(
        f"""INSERT INTO {work} (tenant, item_id, payload, priority, state, attempts,
                                available_at, enqueued_at)
            SELECT 'delayed-{IDLE}', 'later-' || g, '{{}}'::jsonb, 0, 'ready', 0,
                   {NOW} + 3600 + g, {NOW}
            FROM generate_series(1, {BACKLOG}) AS g"""
    )
    conn.execute(
        f"""INSERT INTO {work} (tenant, item_id, payload, priority, state, attempts,
                                available_at, enqueued_at)
            SELECT 'active-' || ({IDLE + 1} + g % {ACTIVE}), 'item-' || g, '{{}}'::jsonb,
                   g % 3, 'ready', 0, {NOW} - 1000 + (g % 2000), {NOW} - 1000
            FROM generate_series(1, {ACTIVE * PER_ACTIVE}) AS g"""
    )
    _count_turns(conn, tables)


def _buffers(conn: psycopg.Connection[tuple[object, ...]], statement: str) -> tuple[int, str]:
    """Run the claim under EXPLAIN (ANALYZE, BUFFERS) and roll it back: the pages it touched."""
    cursor = psycopg.RawCursor(conn)
    with conn.transaction(force_rollback=True):
        cursor.execute(
            f"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, FORMAT JSON) {statement}",
            (NOW, "w1", NOW + 30, []),
        )
        row = cursor.fetchone()
    assert row is not None
    plan: dict[str, Any] = row[0][0]["Plan"]  # type: ignore[index]
    pages = int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0))
    return pages, json.dumps(plan, indent=1)


def test_idle_tenants_and_a_delayed_backlog_are_not_walked(pg_tables: StateTables) -> None:
    claim = statements(pg_tables).claim
    with admin_connection() as conn:
        _load_idle_and_delayed(conn, pg_tables)
        custom = _plan(conn, claim)
        generic = _generic_plan(conn, claim)
        conn.execute("RESET plan_cache_mode")
        pages, analyzed = _buffers(conn, claim)
        claimed = psycopg.RawCursor(conn).execute(claim, (NOW, "w1", NOW + 30, [])).fetchall()
    for plan in (custom, generic):
        assert f"Seq Scan on {pg_tables.work}" not in plan, plan
        assert f"{pg_tables.work}_due" in plan, plan
        assert f"{pg_tables.turns}_by_turn" in plan, plan
    # Bounded: walking the 50,000 idle turns or the delayed tenant's 50,000 index entries
    # would touch hundreds of pages; the claim touches a few dozen.
    assert pages < 100, analyzed
    # The rotation is unchanged: the tenant with the oldest turn that has due work.
    assert claimed[0][0] == f"active-{IDLE + 1}"
