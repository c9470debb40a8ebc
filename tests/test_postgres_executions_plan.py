"""The execution store's statements use their indexes on large tables (generic plans)."""

from __future__ import annotations

from runyard.postgres import StateTables
from runyard.postgres.statements.executions import execution_statements

from tests.support.postgres_plugin import admin_connection

ROWS = 200_000

# statement -> (parameter types, parameter values as SQL literals)
CASES: dict[str, tuple[list[str], list[str]]] = {
    "exec_due_timers": (["float8", "bigint"], ["5", "10"]),
    "exec_list_000": (["bigint", "bigint"], ["0", "10"]),
    "exec_list_100": (["bigint", "bigint", "text"], ["0", "10", "'rare'"]),
    "exec_list_010": (["bigint", "bigint", "text"], ["0", "10", "'d3'"]),
    "exec_list_001": (["bigint", "bigint"], ["0", "10"]),
    "exec_list_111": (["bigint", "bigint", "text", "text"], ["0", "10", "'rare'", "'d3'"]),
    "exec_pending_outbox": (["bigint"], ["10"]),
    "exec_load_for_event": (["text", "text"], ["'e5'", "'ev'"]),
    "exec_save_update": (
        ["text"] * 9,
        ["'e5'", "'d'", "'s'", "'{}'", "NULL", "''", "1", "1", "NULL"],
    ),
    "exec_delete_timer": (["text", "text", "float8"], ["'e5'", "'p'", "5"]),
    "exec_read_trace": (["text", "bigint"], ["'e5'", "200"]),
}


def test_no_statement_scans_a_large_table(pg_tables: StateTables) -> None:
    t = pg_tables
    executions, timers, outbox = (t.qualified(x) for x in (t.executions, t.timers, t.outbox))
    with admin_connection() as conn:
        conn.execute(
            f"""INSERT INTO {executions} (execution_id, definition_id, status, version, context,
                                          parent_id, root_path, created_at, updated_at)
                SELECT 'e' || g, 'd' || (g % 50),
                       CASE WHEN g % 100 = 0 THEN 'rare' ELSE 'running' END, 1, '{{}}',
                       CASE WHEN g % 2 = 0 THEN 'p' END, '', 0, 0
                FROM generate_series(1, {ROWS}) AS g"""
        )
        conn.execute(
            f"INSERT INTO {timers} SELECT 'e' || g, 'p', g FROM generate_series(1, {ROWS}) g"
        )
        conn.execute(
            f"""INSERT INTO {outbox} (execution_id, target_id, event_id, event_name, data,
                                      created_at)
                SELECT 'e' || g, 't', 'ev', 'n', 'null', 0 FROM generate_series(1, {ROWS}) g"""
        )
        for table in (executions, timers, outbox):
            conn.execute(f"ANALYZE {table}")
        conn.execute("SET plan_cache_mode = force_generic_plan")
        scanned = {}
        for n, (name, (types, values)) in enumerate(CASES.items()):
            statement = getattr(execution_statements(t), name)
            conn.execute(f"PREPARE q{n} ({', '.join(types)}) AS {statement}")
            rows = conn.execute(f"EXPLAIN EXECUTE q{n} ({', '.join(values)})").fetchall()
            plan = "\n".join(str(r[0]) for r in rows)
            if "Seq Scan" in plan:
                scanned[name] = plan
    assert not scanned, scanned
