"""Every SQL statement of the SQLite event log, rendered once per SqliteTables (no I/O).

Each runs inside the state store's ``BEGIN IMMEDIATE`` transaction: the file's write lock is
held from the first read, so the checks read before a write still hold when it writes, and
``MAX(seq) + 1`` inside the appending statement gives gap-free seqs.
"""

from __future__ import annotations

from functools import cache

from runyard.sqlite.schema import SqliteTables, render
from runyard.sqlite.statements_state import RUN_COLUMNS, state_statements

__all__ = ["EVENT_COLUMNS", "event_statements"]

EVENT_COLUMNS = "seq, type, data, at, event_id, terminal"

_TEMPLATES: dict[str, str] = {
    # The event a retried event_id names (none: a new event).
    "prior_event": f"""
SELECT {EVENT_COLUMNS} FROM {{events}}
WHERE tenant = :tenant AND run_id = :run_id AND event_id = :event_id""",
    # The run's version, its lease and its status: what explains a refused event write.
    "probe_event_run": """
SELECT (SELECT r.version FROM {runs} r WHERE r.tenant = :tenant AND r.run_id = :run_id),
       l.epoch, l.holder, l.expires_at,
       (SELECT r.status FROM {runs} r WHERE r.tenant = :tenant AND r.run_id = :run_id)
FROM (SELECT 1) AS one
LEFT JOIN {run_leases} l ON l.tenant = :tenant AND l.run_id = :run_id""",
    # The next seq is read in the inserting statement itself.
    "append_event": f"""
INSERT INTO {{events}} (tenant, run_id, seq, type, data, at, event_id, terminal)
VALUES (:tenant, :run_id,
        (SELECT COALESCE(MAX(e.seq), 0) + 1 FROM {{events}} e
         WHERE e.tenant = :tenant AND e.run_id = :run_id),
        :type, :data, :now, :event_id, :terminal)
RETURNING {EVENT_COLUMNS}""",
    # finalize's status change (the checks ran before it, in the same transaction).
    "finalize_run": f"""
UPDATE {{runs}} SET status = :status, version = version + 1, updated_at = :now
WHERE tenant = :tenant AND run_id = :run_id
RETURNING {RUN_COLUMNS}""",
    "read_events": f"""
SELECT {EVENT_COLUMNS} FROM {{events}}
WHERE tenant = :tenant AND run_id = :run_id AND seq > :after
ORDER BY seq
LIMIT :limit""",
    "delete_events": """
DELETE FROM {events} WHERE tenant = :tenant AND run_id = :run_id""",
    # The logs of a session's runs, deleted with them by delete_session(cascade=True).
    # The events of the runs delete_session_runs deletes next (the same :batch, same order).
    "delete_session_events": """
DELETE FROM {events}
WHERE (tenant, run_id) IN (
    SELECT r.tenant, r.run_id FROM {runs} r
    WHERE r.tenant = :tenant AND r.session_id = :session_id
    ORDER BY r.seq LIMIT :batch)""",
}


@cache
def event_statements(tables: SqliteTables) -> dict[str, str]:
    """Return the state store's statements and the event log's, rendered for ``tables``
    (cached per SqliteTables)."""
    return {**state_statements(tables), **render(_TEMPLATES, tables)}
