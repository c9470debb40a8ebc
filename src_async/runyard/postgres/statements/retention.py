"""The PostgreSQL statements of prune (run leases) and prune_processed (processed marks).

Each walks an index from its low end and stops after ``limit`` rows (``LIMIT`` with ``FOR
UPDATE SKIP LOCKED``, so a prune never waits on a row someone is writing, and never removes a
row a concurrent acquire has just made live: the deleting statement re-checks its condition on
the locked row).
"""

from __future__ import annotations

__all__ = ["EXECUTION_RETENTION", "STATE_RETENTION"]

STATE_RETENTION: dict[str, str] = {
    # $1 now $2 limit: leases released (expires_at NULL, sorted first) or lapsed before now,
    # through the (COALESCE(expires_at, '-Infinity')) index.
    "prune_leases": """
WITH doomed AS (
    SELECT l.tenant, l.run_id FROM {run_leases} l
    WHERE COALESCE(l.expires_at, '-Infinity'::float8) < $1::float8
    ORDER BY COALESCE(l.expires_at, '-Infinity'::float8)
    LIMIT $2::bigint
    FOR UPDATE SKIP LOCKED
)
DELETE FROM {run_leases} l USING doomed d
WHERE l.tenant = d.tenant AND l.run_id = d.run_id
  AND COALESCE(l.expires_at, '-Infinity'::float8) < $1::float8
RETURNING 1""",
}

EXECUTION_RETENTION: dict[str, str] = {
    # $1 cutoff (now - older_than) $2 limit: the oldest marks, through the
    # (processed_at, execution_id, event_id) index.
    "prune_processed": """
WITH doomed AS (
    SELECT p.execution_id, p.event_id FROM {processed} p
    WHERE p.processed_at <= $1::float8
    ORDER BY p.processed_at, p.execution_id, p.event_id
    LIMIT $2::bigint
    FOR UPDATE SKIP LOCKED
)
DELETE FROM {processed} p USING doomed d
WHERE p.execution_id = d.execution_id AND p.event_id = d.event_id
RETURNING 1""",
}
