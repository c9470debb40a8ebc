"""docs/postgres.md's migrations, read from the docs themselves so the tests run what users run."""

from __future__ import annotations

from pathlib import Path

import psycopg
from runyard.postgres import StateTables

__all__ = [
    "migration_sql",
    "migration_statements",
    "undo_executions_3",
    "undo_queue_5",
    "undo_state_6",
]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "postgres.md"


def migration_sql(heading: str) -> str:
    """The ```sql block of the section ``### {heading}``, whole (for one transaction)."""
    section = DOCS.read_text("utf-8").split(f"### {heading}\n", 1)[1]
    return section.split("```sql\n", 1)[1].split("```", 1)[0]


def migration_statements(heading: str) -> list[str]:
    """The same block statement by statement, comments dropped (for statements that may not run
    in a transaction block, CREATE INDEX CONCURRENTLY). The tests' tables have the default
    names in a schema of their own: run them with that schema on the search path."""
    statements = []
    for statement in migration_sql(heading).split(";"):
        lines = [line for line in statement.splitlines() if not line.lstrip().startswith("--")]
        if " ".join(lines).strip():
            statements.append("\n".join(lines))
    return statements


def undo_state_6(conn: psycopg.Connection[tuple[object, ...]], tables: StateTables) -> None:
    """Put back state version 5's session index, (tenant, session_id), and drop the tombstones
    table, as a database written by an older runyard has it (the schema table's row is the
    caller's)."""
    conn.execute(f"DROP TABLE {tables.qualified(tables.tombstones)}")
    conn.execute(f'DROP INDEX "{tables.schema}"."{tables.runs}_by_session"')
    conn.execute(
        f'CREATE INDEX "{tables.runs}_by_session" ON {tables.qualified(tables.runs)} '
        "(tenant, session_id) WHERE session_id IS NOT NULL"
    )


def undo_queue_5(conn: psycopg.Connection[tuple[object, ...]], tables: StateTables) -> None:
    """Drop queue version 5's parked tenants table and its functions, as a database written by
    an older runyard has it (the schema table's row is the caller's)."""
    conn.execute(f"DROP TABLE {tables.qualified(tables.turns_parked)}")
    park = tables.qualified(tables.turns + "_park")
    conn.execute(f"DROP FUNCTION {park}(text, double precision)")
    rejoin = tables.qualified(tables.turns + "_rejoin")
    conn.execute(f"DROP FUNCTION {rejoin}(text, bigint)")


def undo_executions_3(conn: psycopg.Connection[tuple[object, ...]], t: StateTables) -> None:
    """Put back executions version 2's jsonb columns and schema row, as a database written by
    an older runyard has them."""
    for table, column in (
        (t.executions, "context"),
        (t.outbox, "data"),
        (t.spawns, "context"),
        (t.trace, "data"),
    ):
        conn.execute(
            f"ALTER TABLE {t.qualified(table)} ALTER COLUMN {column} TYPE jsonb "
            f"USING {column}::jsonb"
        )
    conn.execute(
        f"UPDATE {t.qualified(t.schema_table)} SET version = 2 WHERE component = 'executions'"
    )
