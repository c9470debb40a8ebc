"""Statements that must not walk what piles up: a delayed backlog, a vacuumed but never analyzed
backlog (a sort of the tenant's due entries), lapsed leases reclaimed, claim_many's batch, and
the other queue statements and list_runs by status (no sequential scan); list_runs by session
is in test_postgres_plan_sessions.py."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from runyard.postgres import StateTables
from runyard.postgres.statements import statements
from runyard.postgres.statements.queue import claim_name

from tests.support.postgres_plans import (
    CLAIM_FORMS,
    CLAIM_MANY_FORMS,
    FULL_CLAIM,
    MAX_CLAIM_MANY_PAGES,
    MAX_CLAIM_PAGES,
    NOW,
    RECLAIM_PAGES,
    Conn,
    analyze,
    assert_bounded_generic_plan,
    buffers,
    claim_args,
    claim_many_args,
    explain_plan,
    form_args,
    generic_pages,
    generic_plan,
    join_rotation,
    load,
    prepare,
)
from tests.support.postgres_plugin import admin_connection

BACKLOG, ACTIVE, PER_ACTIVE = 50_000, 200, 20


def _load_delayed_backlog(conn: Conn, tables: StateTables) -> None:
    """One tenant whose 50,000 items are all delayed, first in turn; then 200 tenants with due
    work. Tenants without ready work are not in the rotation at all."""
    work = tables.qualified(tables.work)
    conn.execute(
        f"""INSERT INTO {work} (tenant, item_id, payload, priority, state, attempts,
                                available_at, enqueued_at)
            SELECT 'delayed-0', 'later-' || g, '{{}}'::jsonb, 0, 'ready', 0,
                   {NOW} + 3600 + g, {NOW}
            FROM generate_series(1, {BACKLOG}) AS g"""
    )
    conn.execute(
        f"""INSERT INTO {work} (tenant, item_id, payload, priority, state, attempts,
                                available_at, enqueued_at)
            SELECT 'active-' || (1 + g % {ACTIVE}), 'item-' || g, '{{}}'::jsonb,
                   g % 3, 'ready', 0, {NOW} - 1000 + (g % 2000), {NOW} - 1000
            FROM generate_series(1, {ACTIVE * PER_ACTIVE}) AS g"""
    )
    join_rotation(conn, tables)
    analyze(conn, tables)


@pytest.mark.parametrize("name", CLAIM_FORMS)
def test_a_delayed_backlog_is_not_walked(pg_tables: StateTables, name: str) -> None:
    claim, args = getattr(statements(pg_tables), name), claim_args(name)
    with admin_connection() as conn:
        _load_delayed_backlog(conn, pg_tables)
        custom = explain_plan(conn, claim, args)
        pages, analyzed = buffers(conn, claim, args)
        claimed = psycopg.RawCursor(conn).execute(claim, args).fetchall()
        prepare(conn, claim)
        generic = generic_plan(conn, args)
    for plan in (custom, generic):
        assert f"Seq Scan on {pg_tables.work}" not in plan, plan
        assert f"{pg_tables.work}_due" in plan, plan
        assert f"{pg_tables.turns}_by_turn" in plan, plan
    # Bounded: walking the delayed tenant's 50,000 index entries would touch hundreds of pages.
    assert pages <= MAX_CLAIM_PAGES, analyzed
    # The rotation is unchanged: the tenant with the oldest turn that has due work.
    assert claimed[0][0] == "active-1"


def test_list_runs_with_a_status_reads_the_status_index(pg_tables: StateTables) -> None:
    runs = pg_tables.qualified(pg_tables.runs)
    statement = statements(pg_tables).list_runs_by_status
    with admin_connection() as conn:
        conn.execute(
            f"""INSERT INTO {runs} (tenant, run_id, blob, version, status, created_at, updated_at)
                SELECT 't' || (g % 10), 'r' || g, '{{}}'::jsonb, 1,
                       CASE WHEN g % 100 = 0 THEN 'failed' ELSE 'done' END, 0, 0
                FROM generate_series(1, 100000) AS g"""
        )
        conn.execute(f"PREPARE by_status (text, bigint, text, text, bigint) AS {statement}")
        conn.execute("SET plan_cache_mode = force_generic_plan")
        plan = "\n".join(
            str(row[0])
            for row in conn.execute("EXPLAIN EXECUTE by_status ('t1', 0, 'failed', NULL, 101)")
        )
    assert f"{pg_tables.runs}_by_status" in plan, plan
    assert f"Seq Scan on {pg_tables.runs}" not in plan, plan


def _lapse_leases(conn: Conn, tables: StateTables) -> None:
    """Give every leased item (one in ten) a lease that lapsed: claims reclaim them."""
    work = tables.qualified(tables.work)
    conn.execute(
        f"""UPDATE {work} SET worker = 'gone', token = 1, claimed_at = {NOW} - 100,
                              lease_expires_at = {NOW} - 70, attempts = 1
            WHERE state = 'leased'"""
    )


@pytest.mark.slow
@pytest.mark.parametrize("tenants", [1, 1_000], ids=["one-tenant", "1k-tenants"])
@pytest.mark.parametrize("analyzed", [False, True], ids=["never-analyzed", "analyzed"])
@pytest.mark.parametrize("name", CLAIM_MANY_FORMS)
def test_a_claim_many_touches_a_bounded_number_of_pages(
    pg_tables: StateTables, tenants: int, analyzed: bool, name: str
) -> None:
    # claim_many_16_*: the batch size 16 as a literal (the forms the client sends up to 16).
    assert_bounded_generic_plan(
        pg_tables,
        getattr(statements(pg_tables), name),
        claim_many_args(name),
        tenants,
        analyzed,
        MAX_CLAIM_MANY_PAGES,
    )


def _load_uniform(conn: Conn, tables: StateTables, items: int) -> None:
    """One tenant's backlog of ``items`` ready items of one priority and one due time (a burst
    enqueued at once), vacuumed (the planner knows the table's size) but never analyzed (nor
    by autovacuum, where it runs)."""
    work = tables.qualified(tables.work)
    conn.execute(f"ALTER TABLE {work} SET (autovacuum_enabled = false)")
    conn.execute(
        f"""INSERT INTO {work} (tenant, item_id, payload, priority, state, attempts,
                                available_at, enqueued_at)
            SELECT 'tenant-1', 'item-' || g, '{{}}'::jsonb, 0, 'ready', 0, {NOW} - 10,
                   {NOW} - 10
            FROM generate_series(1, {items}) AS g"""
    )
    join_rotation(conn, tables)
    conn.execute(f"VACUUM {work}")


@pytest.mark.slow
@pytest.mark.parametrize("name", [*CLAIM_FORMS, *CLAIM_MANY_FORMS])
def test_a_claim_does_not_sort_a_vacuumed_backlog(pg_tables: StateTables, name: str) -> None:
    # A table vacuumed (the planner knows its size) but never analyzed: without statistics
    # the planner estimates state = 'ready' at 0.5% of the rows and a tenant at 0.5% of
    # those, one row, so reading the tenant's due entries through the due index and sorting
    # them looked cheaper than the ready index, which gives them in order: at queue version
    # 3 every claim form and every claim_many form read all 40,000 rows (a claim_many_16,
    # 57 ms). Version 4's due index has a condition in its predicate that only its probes
    # state, so the head cannot be read through it.
    claim_many = getattr(statements(pg_tables), name)
    with admin_connection() as conn:
        _load_uniform(conn, pg_tables, 40_000)
        args = form_args(name)
        prepare(conn, claim_many)
        plan = generic_plan(conn, args)
        pages, executed = generic_pages(conn, args)
    assert "$1" in plan  # really the generic plan
    assert f"Seq Scan on {pg_tables.work}" not in plan, plan
    assert pages <= MAX_CLAIM_MANY_PAGES, executed
    # Rows read from the work table: the 16 heads and one more, the due probes, the 16
    # claimed rows found again by ctid; not the backlog.
    assert _rows_read(json.loads(executed), pg_tables.work) <= 100, executed


def _rows_read(node: dict[str, Any], table: str) -> int:
    """Rows the scans of ``table`` in an executed plan (EXPLAIN ANALYZE, JSON) returned."""
    rows = 0
    if node.get("Relation Name") == table and "Scan" in str(node.get("Node Type")):
        rows += int(node.get("Actual Rows", 0)) * int(node.get("Actual Loops", 1))
    for child in node.get("Plans", []):
        rows += _rows_read(child, table)
    return rows


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [claim_name(True, False), FULL_CLAIM, *(f for f in CLAIM_MANY_FORMS if "_reclaim" in f)],
)
def test_a_claim_that_reclaims_lapsed_leases_touches_a_bounded_number_of_pages(
    pg_tables: StateTables, name: str
) -> None:
    statement, args = getattr(statements(pg_tables), name), form_args(name)
    single = name.startswith("claim_reclaim")
    with admin_connection() as conn:
        load(conn, pg_tables, 100_000, 1)
        _lapse_leases(conn, pg_tables)
        prepare(conn, statement)
        plan = generic_plan(conn, args)
        pages, executed = generic_pages(conn, args)
    assert f"Seq Scan on {pg_tables.work}" not in plan, plan
    assert f"{pg_tables.work}_lapsing" in plan, plan
    bound = MAX_CLAIM_PAGES if single else MAX_CLAIM_MANY_PAGES
    assert pages <= bound + RECLAIM_PAGES, executed


# The operator and batched statements that read or write the work table (stats: its due index
# only, once per rotation row), with arguments naming a tenant of the load and items it holds;
# none may scan the table.
def _other_statements() -> list[tuple[str, tuple[object, ...]]]:
    targets = (["tenant-1"] * 3, ["item-1", "item-1001", "item-2001"], [1, 2, 3])
    return [
        ("cancel", ("tenant-1", "item-1", NOW)),
        ("purge_dead", ("tenant-1", NOW, 100)),
        ("prune", (-(2**63), 1000, 100, NOW, "", None)),
        ("complete_many", (*targets, NOW, 3600.0)),
        ("heartbeat_many", (*targets, NOW, 3600.0, NOW + 30)),
        ("release_many", (*targets, NOW, 3600.0, None)),
        (
            "enqueue_many",
            (
                "tenant-1",
                ["n1", "item-1"],
                ["{}", "{}"],
                [0, 0],
                [NOW, NOW],
                NOW,
                ["k1", None],
                [None, 3],
                None,
            ),
        ),
        ("stats", (NOW,)),
    ]


@pytest.mark.slow
@pytest.mark.parametrize("analyzed", [False, True], ids=["never-analyzed", "analyzed"])
def test_the_other_queue_statements_never_scan_the_work_table(
    pg_tables: StateTables, analyzed: bool
) -> None:
    texts = statements(pg_tables)
    with admin_connection() as conn:
        load(conn, pg_tables, 100_000, 1_000)
        if analyzed:
            analyze(conn, pg_tables)
        for n, (name, args) in enumerate(_other_statements()):
            prepare(conn, getattr(texts, name), f"other_{n}")
            plan = generic_plan(conn, args, f"other_{n}")
            assert f"Seq Scan on {pg_tables.work}" not in plan, (name, plan)
