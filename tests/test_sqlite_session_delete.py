"""delete_session(cascade=True) on SQLite deletes a session's runs in bounded batches: one
transaction per batch, the file's write lock let go in between (another connection writes
there), and nothing of the session left at the end (statements shared by both twins)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from runyard import RunKey
from runyard.sqlite import SqliteStateStore

RUNS = 2_050
BATCH = 100


def _fill(store: SqliteStateStore) -> None:
    for n in range(RUNS):
        key = RunKey("t", f"r{n}")
        store.put_run(key, {"n": n}, expected_version=0, session_id="s")
        if n % 10 == 0:
            store.append_event(key, "step", {"n": n})
    store.put_session("t", "s", {}, expected_version=0)
    # What the cascade must leave: a run of another session, another tenant's session "s".
    store.put_run(RunKey("t", "other"), {}, expected_version=0, session_id="s2")
    store.append_event(RunKey("t", "other"), "step", {})
    store.put_run(RunKey("u", "theirs"), {}, expected_version=0, session_id="s")


def test_a_cascade_deletes_the_session_in_batches_and_lets_other_writers_in(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    store = SqliteStateStore.open(path, create_schema=True, durable=False)
    other = SqliteStateStore.open(path, busy_timeout_seconds=0.05, durable=False)
    log: list[tuple[str, object]] = []
    between: list[object] = []

    def traced(sql: str) -> None:
        log.append(("sql", sql))
        # A transaction of the cascade is about to begin: the lock of the last one is free.
        if sql.startswith("BEGIN") and any(kind == "deleted" for kind, _ in log):
            try:
                key = RunKey("w", f"between-{len(between)}")
                between.append(other.put_run(key, {}, expected_version=0).run_id)
            except Exception as exc:  # recorded, asserted below
                between.append(exc)

    try:
        _fill(store)
        store._session_batch = BATCH
        raw = store.connection.raw
        raw.create_function("noted_delete", 1, lambda seq: log.append(("deleted", seq)))
        raw.execute(
            "CREATE TEMP TRIGGER note AFTER DELETE ON main.runyard_runs "
            "BEGIN SELECT noted_delete(OLD.seq); END"
        )
        raw.set_trace_callback(traced)
        assert store.delete_session("t", "s", cascade=True) is True
        raw.set_trace_callback(None)

        assert store.get_session("t", "s") is None
        assert store.list_runs("t", session_id="s").items == []
        assert [r.run_id for r in store.list_runs("t").items] == ["other"]
        assert [r.run_id for r in store.list_runs("u", session_id="s").items] == ["theirs"]
        assert len(store.read_events(RunKey("t", "other"))) == 1
        assert store.delete_session("t", "s", cascade=True) is False
    finally:
        store.close()
        other.close()

    # Each transaction (up to its COMMIT) deleted at most one batch; together, every run.
    per_transaction: list[int] = [0]
    for kind, value in log:
        if kind == "deleted":
            per_transaction[-1] += 1
        elif str(value).startswith("COMMIT"):
            per_transaction.append(0)
    deleting = [n for n in per_transaction if n]
    assert sum(deleting) == RUNS and max(deleting) == BATCH, per_transaction
    assert len(deleting) == -(-RUNS // BATCH)
    # Another connection wrote before each transaction after the first: none was refused.
    assert len(between) >= len(deleting) and all(isinstance(b, str) for b in between), between

    with sqlite3.connect(path) as conn:
        left = conn.execute(
            "SELECT count(*) FROM runyard_run_events WHERE tenant = 't' AND run_id != 'other'"
        ).fetchone()
        indexed = conn.execute(
            "SELECT count(*) FROM runyard_runs INDEXED BY runyard_runs_by_session "
            "WHERE tenant = 't' AND session_id = 's'"
        ).fetchone()
        written = conn.execute("SELECT count(*) FROM runyard_runs WHERE tenant = 'w'").fetchone()
        check = conn.execute("PRAGMA integrity_check").fetchall()
    assert left == (0,) and indexed == (0,) and written == (len(between),)
    assert check == [("ok",)]
