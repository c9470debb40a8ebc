"""What the PostgreSQL plan tests share: the loads (items over tenants, the rotation), the
claim's and claim_many's arguments form by form, and running a statement's generic plan
(EXPLAIN, pages touched)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql
from runyard.postgres import StateTables
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


def load(conn: Conn, tables: StateTables, items: int, tenants: int) -> None:
    work = tables.qualified(tables.work)
    conn.execute(
        f"""INSERT INTO {work} (tenant, item_id, payload, priority, state, attempts,
                                available_at, enqueued_at)
            SELECT 'tenant-' || (g % {tenants}), 'item-' || g, '{{}}'::jsonb, 0,
                   CASE WHEN g % 10 = 0 THEN 'leased' ELSE 'ready' END, 0,
                   {NOW} - 1000 + (g % 2000), {NOW} - 1000
            FROM generate_series(1, {items}) AS g"""
    )
    join_rotation(conn, tables)


def join_rotation(conn: Conn, tables: StateTables) -> None:
    """Give every tenant with ready items a turn (its number), as enqueue would have."""
    work, turns = tables.qualified(tables.work), tables.qualified(tables.turns)
    conn.execute(
        f"""INSERT INTO {turns} (tenant, turn)
            SELECT DISTINCT w.tenant, substring(w.tenant from '[0-9]+$')::bigint
            FROM {work} w WHERE w.state = 'ready'"""
    )


def analyze(conn: Conn, tables: StateTables) -> None:
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


def claim_args(name: str, args: tuple[object, ...] = CLAIM_ARGS) -> tuple[object, ...]:
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


def claim_many_args(name: str, args: tuple[object, ...] = CLAIM_MANY_ARGS) -> tuple[object, ...]:
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


def form_args(name: str) -> tuple[object, ...]:
    """The arguments of the claim's or claim_many's form ``name``."""
    return claim_many_args(name) if name.startswith("claim_many") else claim_args(name)


def explain_plan(conn: Conn, statement: str, args: tuple[object, ...] = CLAIM_ARGS) -> str:
    cursor = psycopg.RawCursor(conn)
    cursor.execute(f"EXPLAIN {statement}", args)
    return "\n".join(str(row[0]) for row in cursor.fetchall())


def prepare(conn: Conn, statement: str, name: str = "claim_plan") -> None:
    # Prepared statements switch to a generic plan after a few runs: force one. Every
    # placeholder carries a cast, so PREPARE infers the parameter types.
    conn.execute(f"PREPARE {name} AS {statement}")
    conn.execute("SET plan_cache_mode = force_generic_plan")


def execute(conn: Conn, name: str, args: tuple[object, ...]) -> str:
    values = ", ".join(sql.Literal(arg).as_string(conn) for arg in args)
    return f"EXECUTE {name} ({values})"


def generic_plan(
    conn: Conn, args: tuple[object, ...] = CLAIM_ARGS, name: str = "claim_plan"
) -> str:
    rows = conn.execute(f"EXPLAIN {execute(conn, name, args)}")
    return "\n".join(str(row[0]) for row in rows)


def generic_pages(
    conn: Conn, args: tuple[object, ...] = CLAIM_ARGS, name: str = "claim_plan"
) -> tuple[int, str]:
    """Run the generic plan under EXPLAIN (ANALYZE, BUFFERS), rolled back: the pages touched
    (the second of two runs, see _warm_pages)."""
    query = f"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, FORMAT JSON) {execute(conn, name, args)}"
    return warm_pages(conn, lambda: conn.execute(query).fetchone())


def assert_bounded_generic_plan(
    tables: StateTables,
    statement: str,
    args: tuple[object, ...],
    tenants: int,
    analyzed: bool,
    max_pages: int,
) -> None:
    """On 100,000 items over ``tenants`` (analyzed or never), the generic plan of
    ``statement`` scans no work table whole (neither sequentially nor by bitmap) and its run
    touches at most ``max_pages`` pages."""
    with admin_connection() as conn:
        load(conn, tables, 100_000, tenants)
        if analyzed:
            analyze(conn, tables)
        prepare(conn, statement)
        plan = generic_plan(conn, args)
        pages, executed = generic_pages(conn, args)
    assert "$1" in plan  # really the generic plan
    assert f"Seq Scan on {tables.work}" not in plan, plan
    assert f"Bitmap Heap Scan on {tables.work}" not in plan, plan
    assert pages <= max_pages, executed


def warm_pages(conn: Conn, explain: Callable[[], Any]) -> tuple[int, str]:
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


def buffers(conn: Conn, statement: str, args: tuple[object, ...] = CLAIM_ARGS) -> tuple[int, str]:
    """Run the claim under EXPLAIN (ANALYZE, BUFFERS) and roll it back: the pages it touched
    (the second of two runs, as in _generic_pages)."""
    cursor = psycopg.RawCursor(conn)

    def explain() -> Any:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, FORMAT JSON) {statement}", args)
        return cursor.fetchone()

    return warm_pages(conn, explain)
