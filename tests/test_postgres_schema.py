"""The published schema, custom table names, and importing runyard without psycopg."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import runyard.postgres
from runyard import ConfigurationError
from runyard.postgres import EXPECTED_SCHEMA, StateTables, schema_sql

from tests.support.postgres_migrations import migration_sql
from tests.support.postgres_plugin import admin_connection, fresh_schema


@pytest.mark.parametrize(
    "bad",
    ["", "Runs", "runs; DROP TABLE x", 'ru"ns', "a-b", "1runs", "x" * 49, "runs ", "rüns"],
)
def test_state_tables_refuse_anything_but_plain_identifiers(bad: str) -> None:
    with pytest.raises(ConfigurationError, match="plain identifier"):
        StateTables(runs=bad)
    with pytest.raises(ConfigurationError, match="plain identifier"):
        StateTables(schema=bad)


def test_expected_schema_is_versioned_and_tunes_the_work_table() -> None:
    assert runyard.postgres.EXPECTED_SCHEMA == EXPECTED_SCHEMA
    versions = (
        "INSERT INTO \"runyard_schema\" (component, version) VALUES ('state', 6), ('queue', 5)"
    )
    assert versions in EXPECTED_SCHEMA
    assert 'CREATE TABLE "runyard_tenant_turns_parked" (' in EXPECTED_SCHEMA
    assert 'CREATE FUNCTION "runyard_tenant_turns_park"(p_tenant text' in EXPECTED_SCHEMA
    assert "blob           text NOT NULL" in EXPECTED_SCHEMA
    assert "autovacuum_vacuum_scale_factor = 0.01" in EXPECTED_SCHEMA
    assert "autovacuum_vacuum_cost_delay = 0" in EXPECTED_SCHEMA
    assert "WHERE dedupe_key IS NOT NULL" in EXPECTED_SCHEMA
    assert "WHERE state = 'ready' AND priority > -9223372036854775808;" in EXPECTED_SCHEMA
    assert "seq            bigserial" in EXPECTED_SCHEMA
    assert (
        'CREATE INDEX "runyard_runs_by_session" ON "runyard_runs" (tenant, session_id, seq)\n'
        "    WHERE session_id IS NOT NULL;" in EXPECTED_SCHEMA
    )


def test_schema_sql_renders_custom_names_that_apply_cleanly(pg_server: None) -> None:
    schema = fresh_schema()
    tables = StateTables.with_prefix("app_q_", schema=schema)
    ddl = schema_sql(tables)
    assert "runyard_" not in ddl and f'"{schema}"."app_q_work_items"' in ddl
    with admin_connection() as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        try:
            conn.execute(ddl)
            names = {
                r[0]
                for r in conn.execute(
                    "SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                    " WHERE n.nspname = %s",
                    (schema,),
                )
            }
            assert {"app_q_runs", "app_q_work_items", "app_q_tenant_turns"} <= names
            assert "app_q_work_items_token_seq" in names
        finally:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def test_import_runyard_needs_no_psycopg() -> None:
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('psycopg', 'psycopg_pool', 'asyncpg'):\n"
        "            raise ImportError(f'blocked {name}')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import runyard, runyard.postgres\n"
        "assert runyard.MemoryStateStore\n"
        "try:\n"
        "    runyard.postgres.PostgresStateStore\n"
        "except ImportError:\n"
        "    print('lazy')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "lazy"


def test_schema_sql_says_the_caller_creates_a_named_schema() -> None:
    from runyard.postgres import StateTables, schema_sql

    named = schema_sql(StateTables.with_prefix("myapp_", schema="jobs"))
    assert named.splitlines()[0].startswith('-- The schema "jobs" must exist already')
    assert "CREATE SCHEMA" not in "\n".join(named.splitlines()[1:])
    assert not schema_sql().startswith("-- The schema")


def test_the_state_6_migration_creates_the_tombstones_table_as_the_schema_does() -> None:
    def columns(ddl: str, head: str) -> str:
        return ddl.split(head, 1)[1].split(");", 1)[0]

    documented = columns(
        migration_sql("State version 6"), "CREATE TABLE IF NOT EXISTS runyard_tombstones ("
    )
    assert documented == columns(EXPECTED_SCHEMA, 'CREATE TABLE "runyard_tombstones" (')
    assert 'CREATE INDEX "runyard_tombstones_by_age" ON "runyard_tombstones" (deleted_at);' in (
        EXPECTED_SCHEMA
    )


def test_the_queue_5_migration_creates_what_the_schema_creates() -> None:
    # docs/postgres.md's migration writes the table, its index and the two functions out again
    # (unqualified names, the functions pinned to the migration's search_path): they must not
    # drift from EXPECTED_SCHEMA's.
    def normal(sql: str) -> str:
        text = re.sub(r"--[^\n]*", "", sql).replace('"', "")
        text = text.replace(" SET search_path FROM CURRENT", "")
        return re.sub(r"\s+", " ", text).strip()

    migration, schema = normal(migration_sql("Queue version 5")), normal(EXPECTED_SCHEMA)
    parts = re.findall(
        r"CREATE (?:TABLE|INDEX|FUNCTION) .*?(?:\$\w+\$;|\);|\(due_at\);)", migration
    )
    assert len(parts) == 4, parts
    for part in parts:
        assert part in schema, part
