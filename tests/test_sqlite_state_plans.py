"""The SQLite state store's list_runs with a session reads the session's runs from the session
index, in seq order (no sort), not the tenant's runs: the query plans of the statements it
sends, taken from the connection (statements shared by both twins)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from runyard import CounterDelta, RunKey
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


def test_list_runs_with_a_status_reads_the_status_index(tmp_path: Path) -> None:
    """Without a session, a status filter seeks the (tenant, status, seq) index (state version
    4): the plan walks no run of another status, and the pages keep seq order."""
    path = tmp_path / "st.db"
    store = SqliteStateStore.open(path, create_schema=True, durable=False)
    sent: list[str] = []
    try:
        for n in range(60):  # every third run is done, in creation order
            status = "done" if n % 3 == 0 else "running"
            store.put_run(RunKey("t", f"r{n:02d}"), {}, expected_version=0, status=status)
        store.put_run(RunKey("u", "elsewhere"), {}, expected_version=0, status="done")
        store.connection.raw.set_trace_callback(sent.append)
        first = store.list_runs("t", status="done", limit=15)
        store.connection.raw.set_trace_callback(None)
        second = store.list_runs("t", status="done", limit=15, cursor=first.next_cursor)
    finally:
        store.close()
    pages = [r.run_id for r in first.items] + [r.run_id for r in second.items]
    assert pages == [f"r{n:02d}" for n in range(0, 60, 3)]
    assert second.next_cursor is None
    lists = [sql for sql in sent if sql.startswith("SELECT") and "ORDER BY seq" in sql]
    assert len(lists) == 1, sent
    with sqlite3.connect(path) as conn:
        plan = [str(row[3]) for row in conn.execute(f"EXPLAIN QUERY PLAN {lists[0]}")]
    assert len(plan) == 1 and "USING INDEX runyard_runs_by_status" in plan[0], plan
    assert "status=?" in plan[0] and "seq>?" in plan[0], plan


def test_a_status_kept_or_changed_by_put_and_patch_is_what_list_runs_finds(
    tmp_path: Path,
) -> None:
    """put_run and patch_run without a status (statements that do not name it) keep the run
    under its status; with one, it moves to the new status in the index."""
    store = SqliteStateStore.open(tmp_path / "k.db", create_schema=True, durable=False)
    key = RunKey("t", "r")
    try:
        store.put_run(key, {}, expected_version=0, status="running")
        store.put_run(key, {"a": 1}, expected_version=1)
        store.patch_run(key, CounterDelta(iterations=1))
        assert [r.run_id for r in store.list_runs("t", status="running").items] == ["r"]
        store.patch_run(key, CounterDelta(iterations=1), status="waiting")
        assert store.list_runs("t", status="running").items == []
        store.put_run(key, {"a": 2}, expected_version=4, status="done")
        assert [r.status for r in store.list_runs("t", status="done").items] == ["done"]
        assert store.list_runs("t", status="waiting").items == []
    finally:
        store.close()
