"""Every SQL statement of the SQLite execution store, rendered once per SqliteTables (no I/O).

A commit is several statements inside one ``BEGIN IMMEDIATE`` transaction: the compare-and-swap
on the execution row first (a lost CAS rolls back before anything else is written), its indexed
columns when they changed, then the outbox entries, the processed mark, the timer operations in
order, the spawn intents and the trace step.
"""

from __future__ import annotations

from functools import cache

from runyard.sqlite.schema import SqliteTables, render
from runyard.sqlite.statements_retention import EXECUTION_RETENTION

__all__ = ["EXECUTION_COLUMNS", "execution_statements", "list_statement"]

EXECUTION_COLUMNS = (
    "execution_id, definition_id, status, version, context, parent_id, root_path, created_at, "
    "updated_at, seq"
)
_E_COLUMNS = ", ".join("e." + c.strip() for c in EXECUTION_COLUMNS.split(","))

_TEMPLATES: dict[str, str] = {
    "load": f"""
SELECT {EXECUTION_COLUMNS} FROM {{executions}} WHERE execution_id = :execution_id""",
    "load_for_event": f"""
SELECT EXISTS (SELECT 1 FROM {{processed}} p
               WHERE p.execution_id = :execution_id AND p.event_id = :event_id),
       {_E_COLUMNS}
FROM (SELECT 1) AS one
LEFT JOIN {{executions}} e ON e.execution_id = :execution_id""",
    "version": """
SELECT version FROM {executions} WHERE execution_id = :execution_id""",
    "create": """
INSERT INTO {executions} (execution_id, definition_id, status, version, context, parent_id,
                          root_path, created_at, updated_at)
VALUES (:execution_id, :definition_id, :status, 1, :context, :parent_id, :root_path, :now, :now)
ON CONFLICT (execution_id) DO NOTHING
RETURNING version, updated_at""",
    # The CAS names no indexed column: its only page is the row's (relabel writes the rest).
    "update": """
UPDATE {executions}
SET version = version + 1, context = :context, parent_id = :parent_id,
    root_path = :root_path, updated_at = :now
WHERE execution_id = :execution_id AND version = :expected
RETURNING version, updated_at""",
    # After update, in the same transaction: matches no row (writes nothing) unless a column
    # that the listing indexes cover changed.
    "relabel": """
UPDATE {executions}
SET definition_id = :definition_id, status = :status
WHERE execution_id = :execution_id
  AND (definition_id IS NOT :definition_id OR status IS NOT :status)""",
    "emit": """
INSERT INTO {outbox} (execution_id, target_id, event_id, event_name, data, created_at)
VALUES (:execution_id, :target_id, :event_id, :event_name, :data, :now)
RETURNING seq""",
    "mark_processed": """
INSERT OR IGNORE INTO {processed} (execution_id, event_id, processed_at)
VALUES (:execution_id, :event_id, :now)""",
    "schedule_timer": """
INSERT INTO {timers} (execution_id, path, fire_at) VALUES (:execution_id, :path, :fire_at)
ON CONFLICT (execution_id, path) DO UPDATE SET fire_at = excluded.fire_at""",
    "cancel_timer": """
DELETE FROM {timers} WHERE execution_id = :execution_id AND path = :path""",
    "spawn": """
INSERT INTO {spawns} (parent_id, child_id, root_path, context, created_at)
VALUES (:parent_id, :child_id, :root_path, :context, :now)""",
    "next_trace_index": """
INSERT INTO {trace_heads} (execution_id, last_index) VALUES (:execution_id, 1)
ON CONFLICT (execution_id) DO UPDATE SET last_index = last_index + 1
RETURNING last_index""",
    "record_trace": """
INSERT INTO {trace} (execution_id, idx, recorded_at, event_id, event_name, data)
VALUES (:execution_id, :idx, :now, :event_id, :event_name, :data)
RETURNING recorded_at""",
    "trim_trace": """
DELETE FROM {trace} WHERE execution_id = :execution_id AND idx <= :idx - :trace_max""",
    "is_processed": """
SELECT EXISTS (SELECT 1 FROM {processed}
               WHERE execution_id = :execution_id AND event_id = :event_id)""",
    "pending_outbox": """
SELECT seq, target_id, event_id, event_name, data FROM {outbox} ORDER BY seq LIMIT :limit""",
    "ack_outbox": """
DELETE FROM {outbox} WHERE seq = :seq RETURNING seq""",
    "pending_spawns": """
SELECT seq, parent_id, child_id, root_path, context FROM {spawns} ORDER BY seq LIMIT :limit""",
    "ack_spawn": """
DELETE FROM {spawns} WHERE seq = :seq RETURNING seq""",
    "due_timers": """
SELECT execution_id, path, fire_at FROM {timers}
WHERE fire_at <= :now ORDER BY fire_at, execution_id, path LIMIT :limit""",
    "delete_timer": """
DELETE FROM {timers} WHERE execution_id = :execution_id AND path = :path AND fire_at = :fire_at
RETURNING 1""",
    # The kept steps (at most :trace_max of the newest), oldest first.
    "read_trace": """
SELECT idx, recorded_at, event_id, event_name, data FROM (
    SELECT * FROM {trace} WHERE execution_id = :execution_id ORDER BY idx DESC LIMIT :trace_max)
ORDER BY idx""",
}

# list_executions: one statement per combination of filters (no SQL is built from values).
_LIST = f"""
SELECT {EXECUTION_COLUMNS} FROM {{executions}}
WHERE seq > :after{{filters}}
ORDER BY seq
LIMIT :limit"""
_FILTERS = (
    ("status", " AND status = :status"),
    ("definition", " AND definition_id = :definition_id"),
    ("roots", " AND parent_id IS NULL"),
)
for _mask in range(8):
    _name = "list" + "".join(f"_{n}" for i, (n, _) in enumerate(_FILTERS) if _mask & (1 << i))
    _TEMPLATES[_name] = _LIST.replace(
        "{filters}", "".join(f for i, (_, f) in enumerate(_FILTERS) if _mask & (1 << i))
    )


def list_statement(status: bool, definition: bool, roots_only: bool) -> str:
    """The name of the listing statement for the filters that are set."""
    flags = (("status", status), ("definition", definition), ("roots", roots_only))
    return "list" + "".join(f"_{name}" for name, on in flags if on)


@cache
def execution_statements(tables: SqliteTables) -> dict[str, str]:
    """Return the execution store's statements rendered for ``tables`` (cached)."""
    return render({**_TEMPLATES, **EXECUTION_RETENTION}, tables)
