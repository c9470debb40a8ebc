"""Queue version 5's parked tenants in the plans: with 20,000 tenants parked (each holding one
delayed item) beside a large queue, with or without statistics, no statement reads the parked
table whole (the claim's put-back, bound or not, the
enqueue's put-back of a parked tenant), and each touches a bounded number of pages."""

from __future__ import annotations

import pytest
from runyard.postgres import StateTables
from runyard.postgres.statements import statements
from runyard.postgres.statements.queue import claim_call
from runyard.postgres.statements.queue_rotation import UNPARK_PER_CLAIM

from tests.support.postgres_plans import (
    CLAIM_ARGS,
    CLAIM_FORMS,
    CLAIM_MANY_FORMS,
    FULL_CLAIM,
    MAX_CLAIM_MANY_PAGES,
    MAX_CLAIM_PAGES,
    NOW,
    Conn,
    analyze,
    form_args,
    generic_pages,
    generic_plan,
    load,
    prepare,
)
from tests.support.postgres_plugin import admin_connection

PARKED = 20_000
# Putting parked tenants back: each one's parked row found, locked and deleted, its rotation
# row inserted, with their index entries (buffer hits, counted once per visit: 4,659 for the
# 256 of one claim measured, about 18 a tenant).
UNPARK_PAGES = UNPARK_PER_CLAIM * 24 + MAX_CLAIM_PAGES
# An enqueue (single or of two items) for a parked tenant: the item, the put-back, the counts.
MAX_ENQUEUE_PAGES = 100


def _park(conn: Conn, tables: StateTables, analyzed: bool) -> None:
    """PARKED tenants holding one item each, due from NOW + 101 s on, one a second, parked."""
    parked, work = tables.qualified(tables.turns_parked), tables.qualified(tables.work)
    conn.execute(
        f"""INSERT INTO {parked} (tenant, turn, due_at)
            SELECT 'idle-' || g, 0, {NOW} + 100 + g FROM generate_series(1, {PARKED}) AS g"""
    )
    conn.execute(
        f"""INSERT INTO {work} (tenant, item_id, payload, priority, state, attempts,
                                available_at, enqueued_at)
            SELECT 'idle-' || g, 'later', '{{}}', 0, 'ready', 0, {NOW} + 100 + g, {NOW}
            FROM generate_series(1, {PARKED}) AS g"""
    )
    if analyzed:
        conn.execute(f"ANALYZE {parked}")


def _bound_claim_args() -> tuple[object, ...]:
    """The full claim's arguments as a bound claim sends them (parking false)."""
    jitters, drained = CLAIM_ARGS[4], CLAIM_ARGS[8]
    assert isinstance(drained, list)
    form, sent = claim_call(CLAIM_ARGS[:4], (jitters, *CLAIM_ARGS[5:8]), drained, parking=False)
    assert form == FULL_CLAIM
    return sent


CASES: list[tuple[str, str, tuple[object, ...], int]] = [
    *((name, name, form_args(name), MAX_CLAIM_PAGES) for name in CLAIM_FORMS),
    ("bound " + FULL_CLAIM, FULL_CLAIM, _bound_claim_args(), MAX_CLAIM_PAGES),
    *((name, name, form_args(name), MAX_CLAIM_MANY_PAGES) for name in CLAIM_MANY_FORMS),
    (
        "enqueue",
        "enqueue",
        ("idle-5", "now", "{}", 0, NOW, NOW, None, None, None),
        MAX_ENQUEUE_PAGES,
    ),
    (
        "enqueue_many",
        "enqueue_many",
        ("idle-6", ["a", "b"], ["{}", "{}"], [0, 0], [NOW, NOW], NOW, [None, None], [None, None]),
        MAX_ENQUEUE_PAGES,
    ),
    # 300 parked tenants are due: the claim puts UNPARK_PER_CLAIM of them back.
    ("claim putting back", "claim", (NOW + 400, *form_args("claim")[1:]), UNPARK_PAGES),
]


@pytest.mark.slow
@pytest.mark.parametrize("analyzed", [False, True], ids=["never-analyzed", "analyzed"])
@pytest.mark.parametrize(("case", "name", "args", "max_pages"), CASES, ids=[c[0] for c in CASES])
def test_no_statement_reads_the_parked_table_whole(
    pg_tables: StateTables,
    analyzed: bool,
    case: str,
    name: str,
    args: tuple[object, ...],
    max_pages: int,
) -> None:
    statement = getattr(statements(pg_tables), name)
    if name == "enqueue_many":
        args = (*args, None)  # the wake channel: none
    with admin_connection() as conn:
        load(conn, pg_tables, 100_000, 1_000)
        _park(conn, pg_tables, analyzed)
        if analyzed:
            analyze(conn, pg_tables)
        prepare(conn, statement)
        plan = generic_plan(conn, args)
        pages, executed = generic_pages(conn, args)
    parked = pg_tables.turns_parked
    assert "$1" in plan  # really the generic plan
    for scan in ("Seq Scan on", "Bitmap Heap Scan on"):
        assert f"{scan} {parked}" not in plan, plan
    assert f"Seq Scan on {pg_tables.work}" not in plan, plan
    assert pages <= max_pages, executed
