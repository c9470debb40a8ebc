"""The SQLite state store's list_runs with a session reads the session's runs from the session
index, in seq order (no sort), not the tenant's runs: the query plans of the statements it
sends, taken from the connection (statements shared by both twins)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from runyard import RunKey
from runyard.sqlite import SqliteStateStore


@pytest.mark.parametrize("status", [None, "running"], ids=["any-status", "status"])
def test_list_runs_with_a_session_reads_the_session_index(
    tmp_path: Path, status: str | None
) -> None:
    path = tmp_path / "s.db"
    store = SqliteStateStore.open(path, create_schema=True)
    sent: list[str] = []
    try:
        for n in range(50):  # the tenant's runs in no session, then the session's one
            store.put_run(RunKey("t", f"r{n}"), {}, expected_version=0, status="running")
        store.put_run(RunKey("t", "last"), {}, expected_version=0, status="running", session_id="s")
        store.connection.raw.set_trace_callback(sent.append)
        page = store.list_runs("t", status=status, session_id="s", limit=10)
    finally:
        store.close()
    assert [r.run_id for r in page.items] == ["last"]
    lists = [sql for sql in sent if sql.startswith("SELECT") and "ORDER BY seq" in sql]
    assert len(lists) == 1, sent
    with sqlite3.connect(path) as conn:
        plan = [str(row[3]) for row in conn.execute(f"EXPLAIN QUERY PLAN {lists[0]}")]
    # Walking the (tenant, seq) index and checking the session row by row reads every run of
    # the tenant created before the session's last one.
    assert len(plan) == 1 and "USING INDEX runyard_runs_by_session" in plan[0], plan
    assert "session_id=?" in plan[0], plan
