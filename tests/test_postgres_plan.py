"""The claim's plan is bounded on a large queue, with or without statistics, for one tenant or
many: no sequential scan of the work table, and a claim touches a bounded number of pages; the
plan cache keeps the generic plans (more cases in test_postgres_plan_walks.py)."""

from __future__ import annotations

import pytest
from runyard.postgres import StateTables
from runyard.postgres.statements import statements
from runyard.postgres.statements.queue import claim_name
from runyard.postgres.statements.queue_batched import (
    claim_many_name,
)

from tests.support.postgres_plans import (
    CLAIM_ARGS,
    CLAIM_FORMS,
    CLAIM_MANY_ARGS,
    CLAIM_MANY_FORMS,
    FULL_CLAIM,
    ITEMS,
    MAX_CLAIM_PAGES,
    TENANTS,
    analyze,
    assert_bounded_generic_plan,
    buffers,
    claim_args,
    claim_many_args,
    execute,
    explain_plan,
    form_args,
    generic_pages,
    generic_plan,
    load,
    prepare,
)
from tests.support.postgres_plugin import admin_connection


@pytest.mark.slow
@pytest.mark.parametrize("name", [*CLAIM_FORMS, *CLAIM_MANY_FORMS])
def test_the_claim_plan_never_scans_the_work_table(pg_tables: StateTables, name: str) -> None:
    claim, args = getattr(statements(pg_tables), name), form_args(name)
    with admin_connection() as conn:
        load(conn, pg_tables, ITEMS, TENANTS)
        analyze(conn, pg_tables)
        custom = explain_plan(conn, claim, args)
        prepare(conn, claim)
        generic = generic_plan(conn, args)
    assert "$1" in generic  # really the generic plan
    for plan in (custom, generic):
        assert f"Seq Scan on {pg_tables.work}" not in plan, plan
        assert f"{pg_tables.work}_ready" in plan, plan


@pytest.mark.slow
@pytest.mark.parametrize("tenants", [1, 1_000], ids=["one-tenant", "1k-tenants"])
@pytest.mark.parametrize("analyzed", [False, True], ids=["never-analyzed", "analyzed"])
@pytest.mark.parametrize("name", CLAIM_FORMS)
def test_a_claim_touches_a_bounded_number_of_pages(
    pg_tables: StateTables, tenants: int, analyzed: bool, name: str
) -> None:
    assert_bounded_generic_plan(
        pg_tables,
        getattr(statements(pg_tables), name),
        claim_args(name),
        tenants,
        analyzed,
        MAX_CLAIM_PAGES,
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", [claim_name(False, False), FULL_CLAIM])
def test_a_claim_on_a_million_items_never_analyzed_touches_a_bounded_number_of_pages(
    pg_tables: StateTables, name: str
) -> None:
    """The custom plan (the first runs of a prepared claim) on one tenant's 1,000,000 items,
    never analyzed: the planner's guess of a few rows once made a bitmap scan and a sort of
    the whole backlog the cheaper plan for a probe that wanted 16 (17,000 pages, 0.5 s)."""
    claim, args = getattr(statements(pg_tables), name), claim_args(name)
    with admin_connection() as conn:
        conn.execute(
            f"ALTER TABLE {pg_tables.qualified(pg_tables.work)} SET (autovacuum_enabled = false)"
        )
        load(conn, pg_tables, 1_000_000, 1)
        plan = explain_plan(conn, claim, args)
        pages, executed = buffers(conn, claim, args)
    assert f"Seq Scan on {pg_tables.work}" not in plan, plan
    assert f"Bitmap Heap Scan on {pg_tables.work}" not in plan, plan
    assert pages <= MAX_CLAIM_PAGES, executed


# The smallest load on which the plan cache once chose custom plans for the claim: one
# tenant's 300,000 items, never analyzed (200,000 still got the generic plan).
PLAN_CACHE_ITEMS, PLAN_CACHE_RUNS = 300_000, 12


@pytest.mark.slow
@pytest.mark.parametrize("name", CLAIM_FORMS)
def test_the_plan_cache_keeps_the_generic_claim_plan_on_a_large_table_never_analyzed(
    pg_tables: StateTables, name: str
) -> None:
    """A prepared claim gets five custom plans, then the generic one if it is costed no
    dearer than they were. The reclaim's LIMIT was the jitter array's length, a parameter,
    costed as a tenth of the lapsed leases the planner guessed: on a large table never
    analyzed the generic plan looked dearer, so every claim was planned afresh (about 1 ms a claim
    at 1,000,000 items). Run as the client sends each form: the full form once with NULL
    jitters and no tenant to retire, as a statement taking every part may be sent."""
    claim = getattr(statements(pg_tables), name)
    with admin_connection() as conn:
        load(conn, pg_tables, PLAN_CACHE_ITEMS, 1)
        conn.execute(f"PREPARE claim_cached AS {claim}")
        for run in range(PLAN_CACHE_RUNS):
            given = (*CLAIM_ARGS[:4], [0.5 + run / 100] * 8, *CLAIM_ARGS[5:8], ["tenant-0"])
            args = claim_args(name, given)
            if name == FULL_CLAIM and run == 1:
                args = (*args[:4], None, *args[5:8], None, *args[9:])
            with conn.transaction(force_rollback=True):
                conn.execute(execute(conn, "claim_cached", args)).fetchall()
        row = conn.execute(
            """SELECT generic_plans, custom_plans FROM pg_prepared_statements
               WHERE name = 'claim_cached'"""
        ).fetchone()
        pages, executed = generic_pages(conn, claim_args(name), "claim_cached")
    assert row == (PLAN_CACHE_RUNS - 5, 5)
    assert pages <= MAX_CLAIM_PAGES, executed


@pytest.mark.slow
@pytest.mark.parametrize("items", [1_000, PLAN_CACHE_ITEMS])
@pytest.mark.parametrize("name", [claim_many_name(16, False), claim_many_name(16, True)])
def test_the_plan_cache_keeps_the_generic_claim_many_plan_for_a_literal_batch_size(
    pg_tables: StateTables, items: int, name: str
) -> None:
    """claim_many with its batch size as a parameter ($5 in every LIMIT) was planned afresh on
    every call (LIMIT $n is costed as a tenth of the rows: the generic plan looked dearer),
    about 0.6 ms of an idle claim_many(1); up to CLAIM_MANY_LITERAL_UP_TO the client sends
    the size as a literal, and the plan cache keeps the generic plan, empty queue or large.
    Run as the client sends each form: tenants to retire, or none (NULL)."""
    literal = getattr(statements(pg_tables), name)
    with admin_connection() as conn:
        load(conn, pg_tables, items, 1)
        conn.execute(f"PREPARE claim_many_cached AS {literal}")
        for run in range(PLAN_CACHE_RUNS):
            drained = ["tenant-0"] if run % 2 else None
            given = (*CLAIM_MANY_ARGS[:5], [0.5 + run / 100] * 8, *CLAIM_MANY_ARGS[6:9], drained)
            args = claim_many_args(name, given)
            with conn.transaction(force_rollback=True):
                conn.execute(execute(conn, "claim_many_cached", args)).fetchall()
        row = conn.execute(
            """SELECT generic_plans, custom_plans FROM pg_prepared_statements
               WHERE name = 'claim_many_cached'"""
        ).fetchone()
    assert row == (PLAN_CACHE_RUNS - 5, 5)
