"""The published SQLite schema, its table names, the settings and create_schema(path)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from runyard import ConfigurationError, RunKey, StatePersistenceError
from runyard.sqlite import (
    SQLITE_SCHEMA,
    SqliteStateStore,
    SqliteStore,
    SqliteStoreSettings,
    SqliteTables,
    SqliteWorkQueue,
    create_schema,
    schema_sql,
)
from runyard.sqlite.schema_checks import queue_set_version, schema_refusal

from tests._async.test_sqlite_queue import AT_VERSION_4


@pytest.mark.parametrize(
    "bad", ["Runs", "runs; DROP TABLE x", 'a"b', "1runs", "", "sqlite_master", "x" * 49, 7]
)
def test_table_names_that_are_not_plain_identifiers_are_refused(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="plain identifier"):
        SqliteTables(runs=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["Bad-", "1app_", "sqlite_", "x" * 28, ""])
def test_a_bad_prefix_is_refused_naming_table_prefix_and_the_rule(bad: str) -> None:
    """It named the first table it made (``table name runs='Bad-runs'``), not what was given;
    a 28-character prefix was refused naming ``trace_heads`` and the table names' limit (48),
    not the prefix's (27); an empty one was taken (tables named runs, schema, counters)."""
    rule = "table_prefix=.* at most 27 lower-case letters, digits and underscores"
    with pytest.raises(ConfigurationError, match=rule) as caught:
        SqliteTables.with_prefix(bad)
    assert caught.value.fields == ("table_prefix",)
    with pytest.raises(ConfigurationError, match=rule):
        SqliteStoreSettings(path="x.db", table_prefix=bad).tables()


def test_the_published_schema_applies_twice_to_the_same_tables() -> None:
    conn = sqlite3.connect(":memory:")
    conn.executescript(SQLITE_SCHEMA)
    conn.executescript(SQLITE_SCHEMA)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert set(SqliteTables().names().values()) <= names
    versions = dict(conn.execute("SELECT component, version FROM runyard_schema").fetchall())
    assert versions == {"state": 4, "queue": 5, "executions": 2}


def test_schema_sql_renders_every_custom_name() -> None:
    tables = SqliteTables.with_prefix("app_")
    text = schema_sql(tables)
    assert "runyard_" not in text and '"app_work_items"' in text


def test_settings_name_their_tables_and_refuse_a_bad_timeout() -> None:
    settings = SqliteStoreSettings(path="x.db", table_prefix="app_")
    assert settings.tables() == SqliteTables.with_prefix("app_")
    with pytest.raises(ValueError, match="busy_timeout_seconds"):
        SqliteStoreSettings(busy_timeout_seconds=0)


@pytest.mark.parametrize("bad", [True, "inf", "nan", 3600.5, "x"])
def test_settings_refuse_a_busy_timeout_the_stores_refuse(bad: object) -> None:
    """The settings and open(busy_timeout_seconds=) share one check (True was taken as 1 s)."""
    with pytest.raises(ValueError, match=r"busy_timeout_seconds is .*at most 3600"):
        SqliteStoreSettings(busy_timeout_seconds=bad)  # type: ignore[arg-type]
    assert SqliteStoreSettings(busy_timeout_seconds="2.5").busy_timeout_seconds == 2.5  # type: ignore[arg-type]


def test_two_tables_given_the_same_name_are_refused_naming_both() -> None:
    with pytest.raises(ConfigurationError, match="runs and work are both 'jobs'"):
        SqliteTables(runs="jobs", work="jobs")
    with pytest.raises(ConfigurationError, match="sessions and schema_table are both"):
        SqliteTables(schema_table="runyard_sessions")


@pytest.mark.parametrize(
    ("names", "named"),
    [
        (
            {"runs": "runyard_work_items_ready"},
            "index 'runyard_work_items_ready' (work + '_ready')",
        ),
        ({"work": "jobs", "timers": "jobs_claimed"}, "trigger 'jobs_claimed' (work + '_claimed')"),
        ({"work": "jobs", "events": "jobs_due"}, "table 'jobs_due' (events)"),
    ],
)
def test_a_table_named_like_another_tables_index_or_trigger_is_refused(
    names: dict[str, str], named: str
) -> None:
    # It was accepted; opening then failed with "there is already a table named ..." worded
    # as a file that cannot be opened, and left an empty database behind.
    with pytest.raises(ConfigurationError, match="two objects named") as caught:
        SqliteTables(**names)
    assert named in str(caught.value)


def test_create_schema_on_a_path_it_cannot_use_is_a_configuration_error(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "dir.db"
    with pytest.raises(ConfigurationError, match="cannot open the SQLite database") as caught:
        create_schema(missing)
    assert str(missing) in str(caught.value)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database" * 100)
    with pytest.raises(ConfigurationError, match="is not a database"):
        create_schema(junk)


def test_create_schema_on_a_locked_file_is_a_retryable_error(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    create_schema(path)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StatePersistenceError) as caught:
            create_schema(path, busy_timeout_seconds=0.05)
        assert caught.value.reason == "contended" and caught.value.retryable
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_a_state_3_file_is_refused_with_its_migration_and_opens_once_migrated(
    tmp_path: Path,
) -> None:
    """State version 4 adds the runs (tenant, status, seq) index: a file at 3 (before it) is
    refused with the SQL that migrates it; applied as the message says, the file opens and
    list_runs by status reads the runs written before."""
    path = tmp_path / "v3.db"
    store = SqliteStateStore.open(path, create_schema=True)
    store.put_run(RunKey("acme", "r"), {}, expected_version=0, status="done")
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP INDEX runyard_runs_by_status")
        conn.execute("UPDATE runyard_schema SET version = 3 WHERE component = 'state'")
    with pytest.raises(ConfigurationError) as caught:
        SqliteStateStore.open(path)
    message = str(caught.value)
    assert "schema version 3" in message and "written for version 4" in message
    migration = "UPDATE \"runyard_schema\" SET version = 4 WHERE component = 'state'"
    assert f"then run `{migration}`" in message
    SqliteWorkQueue.open(path).close()  # the queue's component is unchanged
    with sqlite3.connect(path) as conn:
        conn.executescript(SQLITE_SCHEMA)
        conn.execute(migration)
    store = SqliteStateStore.open(path)
    try:
        assert [r.run_id for r in store.list_runs("acme", status="done").items] == ["r"]
    finally:
        store.close()


def test_a_refusal_names_the_schema_rendered_for_the_stores_table_names() -> None:
    """SQLITE_SCHEMA holds the default names: for any other names a refusal's repair is
    schema_sql(tables), else applying it literally would make a second set of tables."""
    default, prefixed = SqliteTables(), SqliteTables.with_prefix("app_")
    for versions, names in (
        (None, "table app_schema does not exist"),
        ({"queue": 4}, '"app_counters"'),
    ):
        plain = schema_refusal(default, "queue", set(), versions, "q.db") or ""
        named = schema_refusal(prefixed, "queue", set(), versions, "q.db") or ""
        assert "apply runyard.sqlite.SQLITE_SCHEMA" in plain and "schema_sql" not in plain
        assert "apply runyard.sqlite.schema_sql(tables) for these table names" in named
        assert names in named


def _objects(path: Path) -> dict[tuple[str, str], str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
    return {(str(kind), str(name)): str(sql or "") for kind, name, sql in rows}


def _queue_file(path: Path, tables: SqliteTables, *statements: str) -> dict[tuple[str, str], str]:
    """A file with this version's schema for ``tables``, then ``statements`` run on it."""
    with sqlite3.connect(path) as conn:
        conn.executescript(schema_sql(tables))
        for statement in statements:
            conn.execute(statement)
    return _objects(path)


def test_each_set_of_queue_tables_is_judged_by_its_own_objects(tmp_path: Path) -> None:
    """The schema row is shared by every set of queue tables in a file, so a queue's version
    is read from its own tables, indexes and triggers: each case is refused (or not) for what
    that set is at, with SQL that runs on it."""
    b = SqliteTables(work="b_work", turns="b_turns", counters="b_counters")
    row5, row4 = {"queue": 5}, {"queue": 4}
    present = set(b.relations("queue"))
    # Current, however a migration tool wrote it (no quotes, no spaces): accepted.
    current = _queue_file(tmp_path / "a.db", b)
    squeezed = {name: sql.replace('"', "").replace(" = ", "=") for name, sql in current.items()}
    for objects in (current, squeezed):
        assert queue_set_version(b, objects) == 5
        assert schema_refusal(b, "queue", present, row5, "f", objects) is None
    # Current tables while the row says 4 (another set not migrated yet): only the row to set.
    refusal = schema_refusal(b, "queue", present, row4, "f", current) or ""
    assert "are already at version 5" in refusal
    assert "UPDATE \"runyard_schema\" SET version = 5 WHERE component = 'queue'" in refusal
    # An older _enters on current tables (a migration stopped half way): its triggers' SQL.
    old_enters = (
        "CREATE TRIGGER b_work_enters AFTER INSERT ON b_work BEGIN INSERT OR IGNORE INTO "
        "b_turns (tenant, turn) SELECT NEW.tenant, c.claims FROM b_counters c WHERE c.id = 1; END"
    )
    half = _queue_file(tmp_path / "h.db", b, "DROP TRIGGER b_work_enters", old_enters)
    refusal = schema_refusal(b, "queue", present, row5, "f", half) or ""
    assert "older version's _claimed or _enters trigger" in refusal
    sql = refusal.split("run `")[1].split("`")[0]
    with sqlite3.connect(tmp_path / "h.db") as conn:
        conn.executescript(f"BEGIN; {sql}; COMMIT;")
    assert schema_refusal(b, "queue", present, row5, "f", _objects(tmp_path / "h.db")) is None
    # A set at version 1 behind a row at 5: the migration from 1 (max_attempts comes back).
    v1 = _queue_file(
        tmp_path / "v1.db",
        b,
        "DROP TRIGGER b_work_claimed",
        "DROP TRIGGER b_work_enters",
        "ALTER TABLE b_counters DROP COLUMN turns",
        "ALTER TABLE b_work DROP COLUMN max_attempts",
    )
    assert queue_set_version(b, v1) == 1
    refusal = schema_refusal(b, "queue", present, row5, "f", v1) or ""
    assert "are at version 1" in refusal and "ADD COLUMN max_attempts" in refusal
    # A missing trigger of the queue is named.
    gone = _queue_file(tmp_path / "g.db", b, "DROP TRIGGER b_work_rejoins_ready")
    refusal = schema_refusal(b, "queue", present, row5, "f", gone) or ""
    assert "trigger b_work_rejoins_ready does not exist" in refusal


def test_a_current_set_stays_current_whatever_else_the_file_holds(tmp_path: Path) -> None:
    """Review cases: an older runyard's index put back on a current set, a table named like
    another set's trigger or index, a column's type spelled otherwise: still current; a row
    ahead of this runyard is never told to go back."""
    jobs = SqliteTables(work="jobs", turns="jobs_turns", counters="jobs_counters")
    present = set(jobs.relations("queue"))
    by_worker = "CREATE INDEX IF NOT EXISTS jobs_by_worker ON jobs (worker, token)"
    objects = _queue_file(tmp_path / "a.db", jobs, by_worker)  # a version 2 script ran again
    assert queue_set_version(jobs, objects) == 5
    assert schema_refusal(jobs, "queue", present, {"queue": 5}, "f", objects) is None
    other = SqliteTables(work="jobs_enters", turns="o_turns", counters="o_counters")
    with sqlite3.connect(tmp_path / "b.db") as conn:  # a table named like jobs' trigger
        conn.executescript(schema_sql(jobs) + schema_sql(other))
    objects = _objects(tmp_path / "b.db")
    assert schema_refusal(jobs, "queue", present, {"queue": 5}, "f", objects) is None
    typed = {
        key: sql.replace("turns   INTEGER NOT NULL DEFAULT 0", "turns INT DEFAULT 0")
        for key, sql in _queue_file(tmp_path / "c.db", jobs).items()
    }
    assert "turns INT DEFAULT 0" in typed[("table", "jobs_counters")]
    assert queue_set_version(jobs, typed) == 5
    for comment in ("-- the turn counter\n", "/* the turn counter */ "):
        noted = dict(typed)
        noted[("table", "jobs_counters")] = typed[("table", "jobs_counters")].replace(
            "turns INT", comment + "turns INT"
        )
        assert queue_set_version(jobs, noted) == 5
    ahead = schema_refusal(jobs, "queue", present, {"queue": 6}, "f", typed) or ""
    assert "is at schema version 6" in ahead and "install the matching runyard" in ahead
    assert "SET version = 5" not in ahead


def test_a_schema_written_with_upper_case_names_is_runyards(tmp_path: Path) -> None:
    """SQLite's names are case-insensitive: a file whose tables, indexes and triggers a
    migration tool created as ``RUNYARD_...`` is runyard's schema. It was refused as missing
    ``runyard_schema`` (the names read from the catalog were compared as written)."""
    path = tmp_path / "upper.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(schema_sql().replace('"runyard_', '"RUNYARD_'))
        assert conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE name GLOB 'runyard_*'"
        ).fetchone() == (0,)
    with SqliteStateStore.open(path) as state:
        assert state.put_run(RunKey("t", "r"), {"a": 1}, expected_version=0).version == 1
    with SqliteStore.open(path) as store:
        assert store.load("nothing") is None
    with SqliteWorkQueue.open(path) as queue:
        queue.enqueue("b", {"i": 1})
        lease = queue.claim("w")
        assert lease is not None and lease.tenant == "b"
        queue.complete(lease)
        assert queue.stats().ready == 0


def test_a_migration_stopped_after_its_alter_is_finished_by_the_refusals_sql(
    tmp_path: Path,
) -> None:
    """A version 4 file whose migration ran its ALTER and stopped (the message says one
    transaction): the turns column is there, with 0, and the triggers are version 4's. The
    refusal's SQL starts the turn counter at the token counter, as the whole migration does
    (else a new tenant would join ahead of every tenant served so far), and replaces them."""
    tables, path = SqliteTables(), tmp_path / "half.db"
    present = set(tables.relations("queue"))
    alter = "ALTER TABLE runyard_counters ADD COLUMN turns INTEGER NOT NULL DEFAULT 0"
    settled = "UPDATE runyard_counters SET claims = 3 WHERE id = 1"
    for row in ({"queue": 4}, {"queue": 5}):
        path.unlink(missing_ok=True)
        objects = _queue_file(path, tables, *AT_VERSION_4, settled, alter)
        refusal = schema_refusal(tables, "queue", present, row, "f", objects) or ""
        assert "_claimed or _enters trigger" in refusal, refusal
        sql = refusal.split("run `")[1].split("`")[0]
        with sqlite3.connect(path) as conn:
            conn.executescript(f"BEGIN; {sql}; COMMIT;")
            counters = conn.execute("SELECT claims, turns FROM runyard_counters").fetchone()
        assert counters == (3, 3)
        after = _objects(path)
        assert schema_refusal(tables, "queue", present, {"queue": 5}, "f", after) is None


def test_the_read_only_probe_gives_the_connection_its_wait_back_whatever_happens(
    tmp_path: Path,
) -> None:
    # The wait was restored after the rollback, in the same finally: a rollback that raised
    # left a shared connection waiting 0 ms for the lock from then on.
    from runyard.sqlite.flavours import probe_write

    class FailingRollback(sqlite3.Connection):
        def rollback(self) -> None:
            raise sqlite3.OperationalError("disk I/O error")

    create_schema(tmp_path / "p.db")
    raw = sqlite3.connect(
        tmp_path / "p.db", timeout=1.25, isolation_level="IMMEDIATE", factory=FailingRollback
    )
    try:
        with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
            probe_write(raw, 'UPDATE "runyard_schema" SET version = version WHERE 0')
        assert raw.execute("PRAGMA busy_timeout").fetchone() == (1250,)
    finally:
        raw.close()


@pytest.mark.parametrize(
    ("store_class", "index"),
    [
        (SqliteStateStore, "runyard_runs_by_status"),
        (SqliteWorkQueue, "runyard_work_items_ready"),
        (SqliteWorkQueue, "runyard_work_items_due"),
        (SqliteWorkQueue, "runyard_tenant_turns_parked_due"),
    ],
)
def test_a_file_without_an_index_a_statement_names_is_refused_with_the_repair(
    tmp_path: Path, store_class: Any, index: str
) -> None:
    """Statements name these indexes (INDEXED BY): a file at the current version without one
    (a migration that set the version row and skipped the schema script) opened, then every
    claim, or list_runs by status, failed as "no such index". Now open names the index and
    the repair; the schema script, applied as the message says, makes the file usable."""
    path = tmp_path / "f.db"
    create_schema(path)
    with sqlite3.connect(path) as conn:
        conn.execute(f'DROP INDEX "{index}"')
    with pytest.raises(ConfigurationError) as caught:
        store_class.open(path)
    message = str(caught.value)
    assert f"index {index} does not exist" in message and "create_schema" in message
    store = store_class.open(path, create_schema=True)
    store.close()
    with sqlite3.connect(path) as conn:
        (found,) = conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = ?", (index,)
        ).fetchone()
    assert found == 1
