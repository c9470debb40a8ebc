"""The claim's plan is bounded on a large queue, with or without statistics, for one tenant or
many: no sequential scan of the work table, and a claim touches a bounded number of pages."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import sql
from runyard.postgres import StateTables
from runyard.postgres.statements import statements
from runyard.postgres.statements.queue import claim_call, claim_name
from runyard.postgres.statements.queue_batched import (
    CLAIM_MANY_LITERAL_UP_TO,
    claim_many_call,
    claim_many_name,
)

from tests.support.postgres_plugin import admin_connection

ITEMS, TENANTS, NOW = 200_000, 1_000, 1_700_000_000.0
# The most pages one claim may touch (shared buffers hit or read) on the loads below, with or
# without statistics, once the session's caches are warm: about 20 to find and lock the item,
# the rest to write it (the new row version and its index entries) and advance the turn; 35
# to 38 measured. Reading one
# tenant's backlog of 100,000 index entries touches about 90,000.
MAX_CLAIM_PAGES = 100
# The most pages one claim_many(limit=16) may touch: 16 items found, locked and written, about
# 50 pages each; 730 to 840 measured on the loads below.
MAX_CLAIM_MANY_PAGES = 1_000
# What reclaiming RECLAIM_PER_CLAIM (8) lapsed leases may add to a claim: about 40 pages each.
RECLAIM_PAGES = 8 * 40
Conn = psycopg.Connection[tuple[object, ...]]


def _load(conn: Conn, tables: StateTables, items: int, tenants: int) -> None:
    work = tables.qualified(tables.work)
    conn.execute(
        f"""INSERT INTO {work} (tenant, item_id, payload, priority, state, attempts,
                                available_at, enqueued_at)
            SELECT 'tenant-' || (g % {tenants}), 'item-' || g, '{{}}'::jsonb, 0,
                   CASE WHEN g % 10 = 0 THEN 'leased' ELSE 'ready' END, 0,
                   {NOW} - 1000 + (g % 2000), {NOW} - 1000
            FROM generate_series(1, {items}) AS g"""
    )
    _join_rotation(conn, tables)


def _join_rotation(conn: Conn, tables: StateTables) -> None:
    """Give every tenant with ready items a turn (its number), as enqueue would have."""
    work, turns = tables.qualified(tables.work), tables.qualified(tables.turns)
    conn.execute(
        f"""INSERT INTO {turns} (tenant, turn)
            SELECT DISTINCT w.tenant, substring(w.tenant from '[0-9]+$')::bigint
            FROM {work} w WHERE w.state = 'ready'"""
    )


def _analyze(conn: Conn, tables: StateTables) -> None:
    conn.execute(f"ANALYZE {tables.qualified(tables.work)}")
    conn.execute(f"ANALYZE {tables.qualified(tables.turns)}")


# The claim's arguments: now, worker, lease expiry, tenants passed over, the reclaim jitters
# (RECLAIM_PER_CLAIM of them), backoff base and cap, the policy's max_attempts, the tenants
# earlier claims drained (one with ready items, which stays, and one without a row).
CLAIM_ARGS: tuple[object, ...] = (
    NOW,
    "w1",
    NOW + 30,
    [],
    [0.5] * 8,
    1.0,
    300.0,
    5,
    ["tenant-7", "gone"],
)
# The claim's forms (see claim_name): the client sends the reclaim's and the retire's parts
# only when it has them.
CLAIM_FORMS = [claim_name(r, d) for r in (False, True) for d in (False, True)]
FULL_CLAIM = claim_name(True, True)


def _claim_args(name: str, args: tuple[object, ...] = CLAIM_ARGS) -> tuple[object, ...]:
    """The arguments of the claim form ``name`` (CLAIM_ARGS laid out as the client sends
    them: its reclaim's part with jitters, its retire's with tenants)."""
    jitters = args[4] if "_reclaim" in name else None
    drained = args[8] if "_retire" in name else None
    assert drained is None or isinstance(drained, list)
    form, sent = claim_call(args[:4], (jitters, *args[5:8]), drained)
    assert form == name
    return sent


# claim_many's: the same with the batch size after the tenants passed over.
CLAIM_MANY_ARGS: tuple[object, ...] = (*CLAIM_ARGS[:4], 16, *CLAIM_ARGS[4:])
# claim_many's forms (see claim_many_name) for a batch of 16, the size as a literal, and for
# one beyond CLAIM_MANY_LITERAL_UP_TO, the size as a parameter: the client sends the
# reclaim's part only when it looks for lapses.
CLAIM_MANY_FORMS = [
    claim_many_name(size, reclaiming)
    for size in (16, CLAIM_MANY_LITERAL_UP_TO + 1)
    for reclaiming in (False, True)
]


def _claim_many_args(name: str, args: tuple[object, ...] = CLAIM_MANY_ARGS) -> tuple[object, ...]:
    """The arguments of claim_many's form ``name`` (CLAIM_MANY_ARGS laid out as the client
    sends them: the reclaim's part with jitters in the forms that reclaim). The batch size is
    args[4] (16) in the form that takes it as a parameter too, whose plans the tests bound."""
    literal = 16 if name.startswith("claim_many_16_") else CLAIM_MANY_LITERAL_UP_TO + 1
    jitters = args[5] if "_reclaim" in name else None
    drained = args[9]
    assert drained is None or isinstance(drained, list)
    form, sent = claim_many_call(args[:4], literal, (jitters, *args[6:9]), drained)
    assert form == name
    return (*sent[:4], args[4], *sent[5:])


def _form_args(name: str) -> tuple[object, ...]:
    """The arguments of the claim's or claim_many's form ``name``."""
    return _claim_many_args(name) if name.startswith("claim_many") else _claim_args(name)


def _plan(conn: Conn, statement: str, args: tuple[object, ...] = CLAIM_ARGS) -> str:
    cursor = psycopg.RawCursor(conn)
    cursor.execute(f"EXPLAIN {statement}", args)
    return "\n".join(str(row[0]) for row in cursor.fetchall())


def _prepare(conn: Conn, statement: str, name: str = "claim_plan") -> None:
    # Prepared statements switch to a generic plan after a few runs: force one. Every
    # placeholder carries a cast, so PREPARE infers the parameter types.
    conn.execute(f"PREPARE {name} AS {statement}")
    conn.execute("SET plan_cache_mode = force_generic_plan")


def _execute(conn: Conn, name: str, args: tuple[object, ...]) -> str:
    values = ", ".join(sql.Literal(arg).as_string(conn) for arg in args)
    return f"EXECUTE {name} ({values})"


def _generic_plan(
    conn: Conn, args: tuple[object, ...] = CLAIM_ARGS, name: str = "claim_plan"
) -> str:
    rows = conn.execute(f"EXPLAIN {_execute(conn, name, args)}")
    return "\n".join(str(row[0]) for row in rows)


def _generic_pages(
    conn: Conn, args: tuple[object, ...] = CLAIM_ARGS, name: str = "claim_plan"
) -> tuple[int, str]:
    """Run the generic plan under EXPLAIN (ANALYZE, BUFFERS), rolled back: the pages touched
    (the second of two runs, see _warm_pages)."""
    query = f"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, FORMAT JSON) {_execute(conn, name, args)}"
    return _warm_pages(conn, lambda: conn.execute(query).fetchone())


def _warm_pages(conn: Conn, explain: Callable[[], Any]) -> tuple[int, str]:
    """Pages touched by the second of two runs of ``explain`` (each rolled back), with the
    executed plan. A session's first execution also reads catalog pages (its relation and
    function caches filling), as many as the catalog is deep, and the catalog grows with
    every schema the suite creates (105 pages first, 36 warm, measured): the bound is on the
    statement's own pages."""
    pages, plan = 0, ""
    for _ in range(2):
        with conn.transaction(force_rollback=True):
            row = explain()
        assert row is not None
        executed: dict[str, Any] = row[0][0]["Plan"]
        pages = int(executed.get("Shared Hit Blocks", 0)) + int(
            executed.get("Shared Read Blocks", 0)
        )
        plan = json.dumps(executed, indent=1)
    return pages, plan


@pytest.mark.slow
@pytest.mark.parametrize("name", [*CLAIM_FORMS, *CLAIM_MANY_FORMS])
def test_the_claim_plan_never_scans_the_work_table(pg_tables: StateTables, name: str) -> None:
    claim, args = getattr(statements(pg_tables), name), _form_args(name)
    with admin_connection() as conn:
        _load(conn, pg_tables, ITEMS, TENANTS)
        _analyze(conn, pg_tables)
        custom = _plan(conn, claim, args)
        _prepare(conn, claim)
        generic = _generic_plan(conn, args)
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
    claim, args = getattr(statements(pg_tables), name), _claim_args(name)
    with admin_connection() as conn:
        _load(conn, pg_tables, 100_000, tenants)
        if analyzed:
            _analyze(conn, pg_tables)
        _prepare(conn, claim)
        plan = _generic_plan(conn, args)
        pages, executed = _generic_pages(conn, args)
    assert "$1" in plan  # really the generic plan
    assert f"Seq Scan on {pg_tables.work}" not in plan, plan
    assert f"Bitmap Heap Scan on {pg_tables.work}" not in plan, plan
    assert pages <= MAX_CLAIM_PAGES, executed


@pytest.mark.slow
@pytest.mark.parametrize("name", [claim_name(False, False), FULL_CLAIM])
def test_a_claim_on_a_million_items_never_analyzed_touches_a_bounded_number_of_pages(
    pg_tables: StateTables, name: str
) -> None:
    """The custom plan (the first runs of a prepared claim) on one tenant's 1,000,000 items,
    never analyzed: the planner's guess of a few rows once made a bitmap scan and a sort of
    the whole backlog the cheaper plan for a probe that wanted 16 (17,000 pages, 0.5 s)."""
    claim, args = getattr(statements(pg_tables), name), _claim_args(name)
    with admin_connection() as conn:
        conn.execute(
            f"ALTER TABLE {pg_tables.qualified(pg_tables.work)} SET (autovacuum_enabled = false)"
        )
        _load(conn, pg_tables, 1_000_000, 1)
        plan = _plan(conn, claim, args)
        pages, executed = _buffers(conn, claim, args)
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
        _load(conn, pg_tables, PLAN_CACHE_ITEMS, 1)
        conn.execute(f"PREPARE claim_cached AS {claim}")
        for run in range(PLAN_CACHE_RUNS):
            given = (*CLAIM_ARGS[:4], [0.5 + run / 100] * 8, *CLAIM_ARGS[5:8], ["tenant-0"])
            args = _claim_args(name, given)
            if name == FULL_CLAIM and run == 1:
                args = (*args[:4], None, *args[5:8], None)
            with conn.transaction(force_rollback=True):
                conn.execute(_execute(conn, "claim_cached", args)).fetchall()
        row = conn.execute(
            """SELECT generic_plans, custom_plans FROM pg_prepared_statements
               WHERE name = 'claim_cached'"""
        ).fetchone()
        pages, executed = _generic_pages(conn, _claim_args(name), "claim_cached")
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
        _load(conn, pg_tables, items, 1)
        conn.execute(f"PREPARE claim_many_cached AS {literal}")
        for run in range(PLAN_CACHE_RUNS):
            drained = ["tenant-0"] if run % 2 else None
            given = (*CLAIM_MANY_ARGS[:5], [0.5 + run / 100] * 8, *CLAIM_MANY_ARGS[6:9], drained)
            args = _claim_many_args(name, given)
            with conn.transaction(force_rollback=True):
                conn.execute(_execute(conn, "claim_many_cached", args)).fetchall()
        row = conn.execute(
            """SELECT generic_plans, custom_plans FROM pg_prepared_statements
               WHERE name = 'claim_many_cached'"""
        ).fetchone()
    assert row == (PLAN_CACHE_RUNS - 5, 5)


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
    _join_rotation(conn, tables)
    _analyze(conn, tables)


def _buffers(conn: Conn, statement: str, args: tuple[object, ...] = CLAIM_ARGS) -> tuple[int, str]:
    """Run the claim under EXPLAIN (ANALYZE, BUFFERS) and roll it back: the pages it touched
    (the second of two runs, as in _generic_pages)."""
    cursor = psycopg.RawCursor(conn)

    def explain() -> Any:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, FORMAT JSON) {statement}", args)
        return cursor.fetchone()

    return _warm_pages(conn, explain)


@pytest.mark.parametrize("name", CLAIM_FORMS)
def test_a_delayed_backlog_is_not_walked(pg_tables: StateTables, name: str) -> None:
    claim, args = getattr(statements(pg_tables), name), _claim_args(name)
    with admin_connection() as conn:
        _load_delayed_backlog(conn, pg_tables)
        custom = _plan(conn, claim, args)
        pages, analyzed = _buffers(conn, claim, args)
        claimed = psycopg.RawCursor(conn).execute(claim, args).fetchall()
        _prepare(conn, claim)
        generic = _generic_plan(conn, args)
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
    claim_many, args = getattr(statements(pg_tables), name), _claim_many_args(name)
    with admin_connection() as conn:
        _load(conn, pg_tables, 100_000, tenants)
        if analyzed:
            _analyze(conn, pg_tables)
        _prepare(conn, claim_many)
        plan = _generic_plan(conn, args)
        pages, executed = _generic_pages(conn, args)
    assert "$1" in plan  # really the generic plan
    assert f"Seq Scan on {pg_tables.work}" not in plan, plan
    assert f"Bitmap Heap Scan on {pg_tables.work}" not in plan, plan
    assert pages <= MAX_CLAIM_MANY_PAGES, executed


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
    _join_rotation(conn, tables)
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
        args = _form_args(name)
        _prepare(conn, claim_many)
        plan = _generic_plan(conn, args)
        pages, executed = _generic_pages(conn, args)
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
    statement, args = getattr(statements(pg_tables), name), _form_args(name)
    single = name.startswith("claim_reclaim")
    with admin_connection() as conn:
        _load(conn, pg_tables, 100_000, 1)
        _lapse_leases(conn, pg_tables)
        _prepare(conn, statement)
        plan = _generic_plan(conn, args)
        pages, executed = _generic_pages(conn, args)
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
        ("prune", ("", 1000, 100, NOW)),
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
        _load(conn, pg_tables, 100_000, 1_000)
        if analyzed:
            _analyze(conn, pg_tables)
        for n, (name, args) in enumerate(_other_statements()):
            _prepare(conn, getattr(texts, name), f"other_{n}")
            plan = _generic_plan(conn, args, f"other_{n}")
            assert f"Seq Scan on {pg_tables.work}" not in plan, (name, plan)
