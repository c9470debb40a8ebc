"""Every SQL statement of the SQLite state store, rendered once per SqliteTables (no I/O).

Parameters are named (``:tenant``); table names come from SqliteTables, already checked to be
plain identifiers; ``:now`` is the database's time unless an injected clock's is bound. Every
write runs inside the adapter's ``BEGIN IMMEDIATE`` transaction, so a read followed by a write
in one transaction sees no other writer in between.
"""

from __future__ import annotations

from functools import cache

from runyard.sqlite.schema import SqliteTables, named_indexes, render
from runyard.sqlite.statements_retention import STATE_RETENTION
from runyard.validation import MAX_COUNTER

__all__ = ["RUN_COLUMNS", "state_statements", "update_run_name"]

RUN_COLUMNS = (
    "tenant, run_id, blob, version, status, session_id, input_tokens, output_tokens, "
    'cost_micros, iterations, "cursor", created_at, updated_at, seq'
)
_SESSION_COLUMNS = "tenant, session_id, blob, version, created_at, updated_at"
_LEASE_COLUMNS = "tenant, run_id, holder, epoch, expires_at"
# The largest counter (2**53 - 1), spliced into the patch guard as a literal.
_MAX = str(MAX_COUNTER)


def _patch(set_status: str) -> str:
    """patch_run's UPDATE, with ``set_status`` (empty: the status stays, no index entry is
    rewritten, see update_run)."""
    return f"""
UPDATE {{runs}}
SET input_tokens = input_tokens + :input_tokens, output_tokens = output_tokens + :output_tokens,
    cost_micros = cost_micros + :cost_micros, iterations = iterations + :iterations,
    "cursor" = "cursor" + :cursor, {set_status}version = version + 1, updated_at = :now
WHERE tenant = :tenant AND run_id = :run_id
  -- the whole patch or nothing: every counter stays within runyard.validation.MAX_COUNTER
  AND input_tokens + :input_tokens <= {_MAX}
  AND output_tokens + :output_tokens <= {_MAX}
  AND cost_micros + :cost_micros <= {_MAX}
  AND iterations + :iterations <= {_MAX}
  AND "cursor" + :cursor <= {_MAX}"""


_TEMPLATES: dict[str, str] = {
    # The run writes return nothing: when one changed the row, the store reads it back with
    # get_run in the same transaction (and the same trip to the driver). An UPDATE ... RETURNING
    # costs half again its UPDATE (SQLite keeps the rows it returns in a temporary table until
    # the statement ends): 119k instructions against 62k + 44k for the UPDATE and the read.
    "create_run": """
INSERT INTO {runs} (tenant, run_id, blob, version, status, session_id, created_at, updated_at)
VALUES (:tenant, :run_id, :blob, 1, :status, :session_id, :now, :now)
ON CONFLICT (tenant, run_id) DO NOTHING""",
    # Without a session_id: the statement names no indexed column, so the row's page is the
    # only one it writes (naming session_id rewrites the run's session index entry).
    # Without a status either: the (tenant, status, seq) index (state version 4) is rewritten
    # by every UPDATE naming status, even to the same value (one WAL page more, measured).
    "update_run": """
UPDATE {runs}
SET blob = :blob, version = version + 1, updated_at = :now
WHERE tenant = :tenant AND run_id = :run_id AND version = :expected""",
    "update_run_status": """
UPDATE {runs}
SET blob = :blob, version = version + 1, status = :status, updated_at = :now
WHERE tenant = :tenant AND run_id = :run_id AND version = :expected""",
    "update_run_session": """
UPDATE {runs}
SET blob = :blob, version = version + 1, status = COALESCE(:status, status),
    session_id = :session_id, updated_at = :now
WHERE tenant = :tenant AND run_id = :run_id AND version = :expected""",
    "patch_run": _patch(""),
    "patch_run_status": _patch("status = :status, "),
    # The run's version (NULL: none) and its lease row: what explains a refused write.
    "probe_run": """
SELECT (SELECT r.version FROM {runs} r WHERE r.tenant = :tenant AND r.run_id = :run_id),
       l.epoch, l.holder, l.expires_at
FROM (SELECT 1) AS one
LEFT JOIN {run_leases} l ON l.tenant = :tenant AND l.run_id = :run_id""",
    "get_run": f"""
SELECT {RUN_COLUMNS} FROM {{runs}} WHERE tenant = :tenant AND run_id = :run_id""",
    "delete_run": """
DELETE FROM {runs} WHERE tenant = :tenant AND run_id = :run_id""",
    "list_runs": f"""
SELECT {RUN_COLUMNS} FROM {{runs}}
WHERE tenant = :tenant AND seq > :after
ORDER BY seq
LIMIT :limit""",
    # list_runs with a status (no session): the matching runs from the (tenant, status, seq)
    # index (state version 4), in seq order without a sort, named with INDEXED BY so the plan
    # needs no statistics. Its cost is the page, not the tenant's runs: walking the (tenant,
    # seq) index and checking the status row by row took 13.2 ms for one match among 100,002
    # runs (see docs/sqlite.md).
    "list_runs_by_status": f"""
SELECT {RUN_COLUMNS} FROM {{runs}} INDEXED BY {{runs_by_status}}
WHERE tenant = :tenant AND status = :status AND seq > :after
ORDER BY seq
LIMIT :limit""",
    # list_runs with a session (a status or none): the session's runs from the (tenant,
    # session_id) index, the status checked on them, in seq order without a sort (seq is the
    # rowid, which ends every index entry). Its cost is the session's runs from the cursor on,
    # not the tenant's: list_runs walks the tenant's (tenant, seq) index and checks the session
    # row by row (40 ms for a session's one run behind 300,000 others, against 0.01 ms).
    "list_runs_by_session": f"""
SELECT {RUN_COLUMNS} FROM {{runs}}
WHERE tenant = :tenant AND session_id = :session_id AND seq > :after
  AND (:status IS NULL OR status = :status)
ORDER BY seq
LIMIT :limit""",
    # -- sessions --------------------------------------------------------------------------
    "create_session": f"""
INSERT INTO {{sessions}} (tenant, session_id, blob, version, created_at, updated_at)
VALUES (:tenant, :session_id, :blob, 1, :now, :now)
ON CONFLICT (tenant, session_id) DO NOTHING
RETURNING {_SESSION_COLUMNS}""",
    "update_session": f"""
UPDATE {{sessions}} SET blob = :blob, version = version + 1, updated_at = :now
WHERE tenant = :tenant AND session_id = :session_id AND version = :expected
RETURNING {_SESSION_COLUMNS}""",
    "session_version": """
SELECT version FROM {sessions} WHERE tenant = :tenant AND session_id = :session_id""",
    "get_session": f"""
SELECT {_SESSION_COLUMNS} FROM {{sessions}} WHERE tenant = :tenant AND session_id = :session_id""",
    "count_session_runs": """
SELECT count(*) FROM {runs} WHERE tenant = :tenant AND session_id = :session_id""",
    # delete_session(cascade=True), one transaction per batch: the session's first :batch runs
    # in seq order (from the session index), after delete_session_events deleted their events.
    "delete_session_runs": """
DELETE FROM {runs}
WHERE seq IN (
    SELECT r.seq FROM {runs} r WHERE r.tenant = :tenant AND r.session_id = :session_id
    ORDER BY r.seq LIMIT :batch)
RETURNING seq""",
    "delete_session": """
DELETE FROM {sessions} WHERE tenant = :tenant AND session_id = :session_id RETURNING 1""",
    # -- run leases ------------------------------------------------------------------------
    "get_lease": f"""
SELECT {_LEASE_COLUMNS} FROM {{run_leases}} WHERE tenant = :tenant AND run_id = :run_id""",
    "put_lease": f"""
INSERT INTO {{run_leases}} (tenant, run_id, holder, epoch, expires_at)
VALUES (:tenant, :run_id, :holder, :epoch, :expires_at)
ON CONFLICT (tenant, run_id) DO UPDATE
SET holder = excluded.holder, epoch = excluded.epoch, expires_at = excluded.expires_at
RETURNING {_LEASE_COLUMNS}""",
    "renew_lease": f"""
UPDATE {{run_leases}} SET expires_at = :expires_at
WHERE tenant = :tenant AND run_id = :run_id AND epoch = :epoch AND holder IS NOT NULL
RETURNING {_LEASE_COLUMNS}""",
    # The epoch row stays, so the next holder gets epoch + 1.
    "release_lease": """
UPDATE {run_leases} SET holder = NULL, expires_at = NULL
WHERE tenant = :tenant AND run_id = :run_id AND epoch = :epoch AND holder IS NOT NULL
RETURNING epoch""",
}


@cache
def state_statements(tables: SqliteTables) -> dict[str, str]:
    """Return the state store's statements rendered for ``tables`` (cached per SqliteTables)."""
    return render({**_TEMPLATES, **STATE_RETENTION}, tables, named_indexes(tables, "state"))


def update_run_name(session_id: str | None, status: str | None) -> str:
    """The statement put_run sends to update a run: one that names only the columns it
    changes, since SQLite rewrites an index entry whenever an UPDATE names its column (the
    session index, the status index), even to the same value."""
    if session_id is not None:
        return "update_run_session"
    return "update_run" if status is None else "update_run_status"
