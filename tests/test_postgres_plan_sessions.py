"""list_runs with a session on PostgreSQL: the session's runs, not the tenant's, and one page of
a huge session a range of the session index from the cursor (state schema version 6), never a
sort of the session; with and without statistics, in the generic plan."""

from __future__ import annotations

import psycopg
import pytest
from runyard._sql import list_runs_name
from runyard.postgres import StateTables
from runyard.postgres.statements import statements

from tests.support.postgres_plans import Conn, generic_pages, generic_plan, prepare
from tests.support.postgres_plugin import admin_connection

# The most pages list_runs with a session may touch on the load below: the session's one run
# (an index page or two and its heap page); 3 measured.
MAX_SESSION_LIST_PAGES = 20


@pytest.mark.parametrize("analyzed", [False, True], ids=["never-analyzed", "analyzed"])
@pytest.mark.parametrize("status", [None, "running"], ids=["any-status", "status"])
def test_list_runs_with_a_session_reads_the_session_index(
    pg_tables: StateTables, analyzed: bool, status: str | None
) -> None:
    # 100,000 runs of one tenant, all 'running': half in no session, half in sessions of ten;
    # the session asked for holds one run, the last created.
    runs = pg_tables.qualified(pg_tables.runs)
    # The statement list_runs sends for these filters. It was list_runs_by_status with a status
    # and list_runs without: the tenant's 100,000 runs walked in seq order, the session checked
    # row by row (2,195 to 2,304 pages measured).
    statement = getattr(statements(pg_tables), list_runs_name(status, "s"))
    args = ("t", 0, status, "s", 11)
    with admin_connection() as conn:
        conn.execute(f"ALTER TABLE {runs} SET (autovacuum_enabled = false)")
        conn.execute(
            f"""INSERT INTO {runs} (tenant, run_id, blob, version, status, session_id,
                                    created_at, updated_at)
                SELECT 't', 'r' || g, '{{}}', 1, 'running',
                       CASE WHEN g % 2 = 1 THEN 'sess-' || (g % 10000) END, 0, 0
                FROM generate_series(1, 100000) AS g"""
        )
        conn.execute(
            f"""INSERT INTO {runs} (tenant, run_id, blob, version, status, session_id,
                                    created_at, updated_at)
                VALUES ('t', 'last', '{{}}', 1, 'running', 's', 0, 0)"""
        )
        if analyzed:
            conn.execute(f"ANALYZE {runs}")
        prepare(conn, statement, "by_session")
        plan = generic_plan(conn, args, "by_session")
        pages, executed = generic_pages(conn, args, "by_session")
        rows = psycopg.RawCursor(conn).execute(statement, args).fetchall()
    assert "$1" in plan  # really the generic plan
    assert f"{pg_tables.runs}_by_session" in plan, plan
    assert f"Seq Scan on {pg_tables.runs}" not in plan, plan
    assert pages <= MAX_SESSION_LIST_PAGES, executed
    assert [row[1] for row in rows] == ["last"]


# The most pages one page of 100 runs (a limit of 101) of the big session below may touch: the
# session index's descent (3 levels) and the leaf page or two holding the page's entries, and
# the heap pages holding its 101 runs (the session's runs are one in three of the tenant's,
# about 70 runs to a heap page: 5 pages); 10 measured, never analyzed or analyzed, with or
# without the status. State version 5's index on (tenant, session_id) read every run of the
# session and sorted those after the cursor: 5,526 pages measured for a page from the middle.
MAX_SESSION_PAGE_PAGES = 40
BIG = 100_000


def _load_a_big_session(conn: Conn, tables: StateTables) -> int:
    """One tenant's 300,000 runs, all 'running': every third in session 'big' (100,000), every
    third in one of 10,000 other sessions, the rest in none; never vacuumed nor analyzed (by
    autovacuum either). Returns the seq of the big session's 50,000th run (a page's cursor)."""
    runs = tables.qualified(tables.runs)
    conn.execute(f"ALTER TABLE {runs} SET (autovacuum_enabled = false)")
    conn.execute(
        f"""INSERT INTO {runs} (tenant, run_id, blob, version, status, session_id,
                                created_at, updated_at)
            SELECT 't', 'r' || g, '{{}}', 1, 'running',
                   CASE WHEN g % 3 = 0 THEN 'big'
                        WHEN g % 3 = 1 THEN 'other-' || (g % 10000) END, 0, 0
            FROM generate_series(1, {3 * BIG}) AS g"""
    )
    row = conn.execute(f"SELECT seq FROM {runs} WHERE run_id = 'r{3 * BIG // 2}'").fetchone()
    assert row is not None
    return int(str(row[0]))


@pytest.mark.slow
@pytest.mark.parametrize("analyzed", [False, True], ids=["never-analyzed", "analyzed"])
@pytest.mark.parametrize("status", [None, "running"], ids=["any-status", "status"])
def test_a_page_of_a_huge_session_touches_a_bounded_number_of_pages(
    pg_tables: StateTables, analyzed: bool, status: str | None
) -> None:
    statement = getattr(statements(pg_tables), list_runs_name(status, "big"))
    with admin_connection() as conn:
        cursor = _load_a_big_session(conn, pg_tables)
        if analyzed:
            conn.execute(f"ANALYZE {pg_tables.qualified(pg_tables.runs)}")
        args = ("t", cursor, status, "big", 101)
        prepare(conn, statement, "session_page")
        plan = generic_plan(conn, args, "session_page")
        pages, executed = generic_pages(conn, args, "session_page")
        rows = psycopg.RawCursor(conn).execute(statement, args).fetchall()
    assert "$1" in plan  # really the generic plan
    assert pages <= MAX_SESSION_PAGE_PAGES, (pages, executed)
    assert f"{pg_tables.runs}_by_session" in plan, plan
    assert "Sort" not in plan, plan
    # The page: the session's next 101 runs after the cursor, in creation order.
    expected = [f"r{3 * BIG // 2 + 3 * n}" for n in range(1, 102)]
    assert [row[1] for row in rows] == expected
