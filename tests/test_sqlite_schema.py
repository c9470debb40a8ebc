"""The published SQLite schema and its table names (no database needed beyond :memory:)."""

from __future__ import annotations

import sqlite3

import pytest
from runyard import ConfigurationError
from runyard.sqlite import SQLITE_SCHEMA, SqliteStoreSettings, SqliteTables, schema_sql


@pytest.mark.parametrize(
    "bad", ["Runs", "runs; DROP TABLE x", 'a"b', "1runs", "", "sqlite_master", "x" * 49, 7]
)
def test_table_names_that_are_not_plain_identifiers_are_refused(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="plain identifier"):
        SqliteTables(runs=bad)  # type: ignore[arg-type]


def test_a_bad_prefix_is_refused_naming_the_table() -> None:
    with pytest.raises(ConfigurationError, match="table name runs="):
        SqliteTables.with_prefix("Bad-")


def test_the_published_schema_applies_twice_to_the_same_tables() -> None:
    conn = sqlite3.connect(":memory:")
    conn.executescript(SQLITE_SCHEMA)
    conn.executescript(SQLITE_SCHEMA)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert set(SqliteTables().names().values()) <= names
    versions = dict(conn.execute("SELECT component, version FROM runyard_schema").fetchall())
    assert versions == {"state": 3, "queue": 3, "executions": 2}


def test_schema_sql_renders_every_custom_name() -> None:
    tables = SqliteTables.with_prefix("app_")
    text = schema_sql(tables)
    assert "runyard_" not in text and '"app_work_items"' in text


def test_settings_name_their_tables_and_refuse_a_bad_timeout() -> None:
    settings = SqliteStoreSettings(path="x.db", table_prefix="app_")
    assert settings.tables() == SqliteTables.with_prefix("app_")
    with pytest.raises(ValueError, match="busy_timeout_seconds"):
        SqliteStoreSettings(busy_timeout_seconds=0)
