"""Files made by queue version 3's and version 4's own schema scripts
(tests/support/sqlite_history, as runyard wrote them before parked tenants and before the turn
counter), not rebuilt from today's: this runyard's schema script reaching such a file before the
migration changes no service of the older claim; the migration the refusal names makes it
current; the older script run again afterwards changes nothing."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from runyard import ConfigurationError, ManualClock
from runyard.sqlite import SQLITE_SCHEMA, SqliteStateStore, SqliteTables, SqliteWorkQueue
from runyard.sqlite.statements_queue import queue_statements

HISTORY = Path(__file__).parent / "support" / "sqlite_history"
T0 = 1_000.0
# Version 3's claim statement, as it sent it (the claim of today is the same UPDATE).
V3_CLAIM_PARAMS = {"worker": "old", "lease_seconds": 30.0, "max_lease": 3600.0}


def _version_3_file(path: Path, version: int = 3) -> None:
    script = (HISTORY / f"schema_queue_{version}.sql").read_text("utf-8")
    with closing(sqlite3.connect(path)) as conn:
        conn.executescript(script.format_map(SqliteTables().names()))
        rows = [("a", "a1", T0 + 60.0), ("b", "b1", T0), ("b", "b2", T0)]
        for tenant, item_id, due in rows:  # as version 3's enqueue wrote them (its trigger joins)
            conn.execute(
                "INSERT INTO runyard_work_items (tenant, item_id, payload, state, attempts, "
                "available_at, enqueued_at, ready_seq) VALUES (?, ?, '{}', 'ready', 0, ?, ?, 1)",
                (tenant, item_id, due, T0),
            )
        conn.commit()


def _objects(path: Path) -> set[tuple[str, str, str]]:
    with closing(sqlite3.connect(path)) as conn:
        return set(conn.execute("SELECT type, name, COALESCE(sql, '') FROM sqlite_master"))


def test_a_file_of_queue_version_three_before_and_after_its_migration(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    _version_3_file(path)
    SqliteStateStore.open(path, create_schema=True).close()  # this runyard's script reaches it
    claim = queue_statements(SqliteTables())["claim"]
    with closing(sqlite3.connect(path)) as conn:  # version 3 claims on: it parks nobody
        (row,) = conn.execute(claim, {**V3_CLAIM_PARAMS, "now": T0}).fetchall()
        conn.commit()
        parked = conn.execute("SELECT COUNT(*) FROM runyard_tenant_turns_parked").fetchone()
    assert (row[0], parked) == ("b", (0,))
    with pytest.raises(ConfigurationError) as refused:
        SqliteWorkQueue.open(path)
    migration = str(refused.value).split("run `")[1].split("`")[0]
    with closing(sqlite3.connect(path)) as conn:  # the repair the message names
        conn.executescript(SQLITE_SCHEMA)
        conn.executescript(f"BEGIN; {migration}; COMMIT;")
    migrated = _objects(path)
    version_3 = (HISTORY / "schema_queue_3.sql").read_text("utf-8")
    with closing(sqlite3.connect(path)) as conn:  # an older runyard's script, run again
        conn.executescript(version_3.format_map(SqliteTables().names()))
    assert _objects(path) == migrated
    clock = ManualClock(T0)
    queue = SqliteWorkQueue.open(path, clock=clock)
    try:
        lease = queue.claim("w")  # b2 (b1 is the old claim's), parking a
        assert lease is not None and lease.item_id == "b2"
        with closing(sqlite3.connect(path)) as conn:
            parked_now = conn.execute("SELECT tenant FROM runyard_tenant_turns_parked").fetchall()
        assert parked_now == [("a",)]
        queue.complete(lease)
        clock.advance(60)
        again = queue.claim("w")
        assert again is not None and again.item_id == "a1"
    finally:
        queue.close()


def test_a_file_of_queue_version_four_before_and_after_its_migration(tmp_path: Path) -> None:
    """Version 4 gave a claimed tenant its token as its turn and a new tenant the token
    counter's value, so an adopt between claims moved the tenants that joined after it. The
    migration starts the turn counter at the token counter's value: the turns already given
    stay, and an adopt after it moves none (aa, joining after the adopt, ties with b and goes
    first by name, as on every other backend)."""
    path = tmp_path / "v4.db"
    _version_3_file(path, version=4)
    SqliteStateStore.open(path, create_schema=True).close()  # this runyard's script reaches it
    claim = queue_statements(SqliteTables())["claim"]
    with closing(sqlite3.connect(path)) as conn:  # version 4 claims on, with its own triggers
        (row,) = conn.execute(claim, {**V3_CLAIM_PARAMS, "now": T0}).fetchall()
        conn.commit()
        columns = [r[1] for r in conn.execute("PRAGMA table_info(runyard_counters)")]
    assert (row[0], row[1], columns) == ("b", "b1", ["id", "claims"])
    with pytest.raises(ConfigurationError) as refused:
        SqliteWorkQueue.open(path)
    assert "'queue' is at schema version 4" in str(refused.value)
    migration = str(refused.value).split("run `")[1].split("`")[0]
    with closing(sqlite3.connect(path)) as conn:  # the repair the message names
        conn.executescript(SQLITE_SCHEMA)
        conn.executescript(f"BEGIN; {migration}; COMMIT;")
        counters = conn.execute("SELECT claims, turns FROM runyard_counters").fetchone()
        turns = conn.execute("SELECT tenant, turn FROM runyard_tenant_turns").fetchall()
        parked = conn.execute("SELECT tenant, turn FROM runyard_tenant_turns_parked").fetchall()
    assert (counters, turns, parked) == ((1, 1), [("b", 1)], [("a", 0)])  # the claim parked a
    migrated = _objects(path)
    version_4 = (HISTORY / "schema_queue_4.sql").read_text("utf-8")
    with closing(sqlite3.connect(path)) as conn:  # an older runyard's script, run again
        conn.executescript(version_4.format_map(SqliteTables().names()))
    assert _objects(path) == migrated
    clock = ManualClock(T0 + 10)
    queue = SqliteWorkQueue.open(path, clock=clock)
    try:
        (adopted,) = queue.adopt("old")  # b1 under a new token: no claim, so no turn moves
        assert (adopted.item_id, adopted.token) == ("b1", 2)
        queue.enqueue("aa", {}, item_id="aa1")  # joins with turn 1, as b has: first by name
        served = []
        while (lease := queue.claim("w")) is not None:
            served.append(lease.item_id)
            queue.complete(lease)
        clock.advance(50)  # a1 due: its tenant comes back with its turn
        lease = queue.claim("w")
        assert (served, lease and lease.item_id) == (["aa1", "b2"], "a1")
    finally:
        queue.close()
