"""The PostgreSQL statements of prune (run leases, tombstones) and prune_processed (processed
marks).

Each walks an index from its low end and stops after ``limit`` rows (``LIMIT`` with ``FOR
UPDATE SKIP LOCKED``, so a prune never waits on a row someone is writing), then deletes those
rows by ``ctid`` (a TID scan, never a join that could scan the table), re-checking the condition
on the locked row, so a lease a concurrent acquire has just made live is never removed.
"""

from __future__ import annotations

__all__ = ["EXECUTION_RETENTION", "STATE_RETENTION"]

STATE_RETENTION: dict[str, str] = {
    # $1 now $2 limit: leases released (expires_at NULL, sorted first) or lapsed before now,
    # through the (COALESCE(expires_at, '-Infinity')) index.
    "prune_leases": """
DELETE FROM {run_leases} l
WHERE l.ctid = ANY (ARRAY(
        SELECT x.ctid FROM {run_leases} x
        WHERE COALESCE(x.expires_at, '-Infinity'::float8) < $1::float8
        ORDER BY COALESCE(x.expires_at, '-Infinity'::float8)
        LIMIT $2::bigint
        FOR UPDATE SKIP LOCKED))
  AND COALESCE(l.expires_at, '-Infinity'::float8) < $1::float8
RETURNING 1""",
    # $1 cutoff (now - runyard.writes.TOMBSTONE_SECONDS) $2 limit: the oldest tombstones of
    # deleted runs and sessions, through the (deleted_at) index.
    "prune_tombstones": """
DELETE FROM {tombstones} t
WHERE t.ctid = ANY (ARRAY(
        SELECT x.ctid FROM {tombstones} x
        WHERE x.deleted_at < $1::float8
        ORDER BY x.deleted_at
        LIMIT $2::bigint
        FOR UPDATE SKIP LOCKED))
  AND t.deleted_at < $1::float8
RETURNING 1""",
}

EXECUTION_RETENTION: dict[str, str] = {
    # $1 cutoff (now - older_than) $2 limit: the oldest marks, through the
    # (processed_at, execution_id, event_id) index.
    "prune_processed": """
DELETE FROM {processed} p
WHERE p.ctid = ANY (ARRAY(
        SELECT x.ctid FROM {processed} x
        WHERE x.processed_at <= $1::float8
        ORDER BY x.processed_at, x.execution_id, x.event_id
        LIMIT $2::bigint
        FOR UPDATE SKIP LOCKED))
  AND p.processed_at <= $1::float8
RETURNING 1""",
}
