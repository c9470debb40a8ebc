"""The work queue's operator statements (dead letters, cancel, purge, prune, reads)."""

from __future__ import annotations

from runyard.postgres.statements.queue_rotation import JOIN_ROTATION

__all__ = ["ADMIN_TEMPLATES"]

ADMIN_TEMPLATES: dict[str, str] = {
    # $1 tenant $2 limit
    "dead_letters": """
SELECT {work_cols_w} FROM {work} w
WHERE w.tenant = $1::text AND w.state = 'dead'
ORDER BY w.dead_at, w.item_id
LIMIT $2::bigint""",
    # $1 tenant $2 item_id $3 now
    "requeue": """
WITH requeued AS (
UPDATE {work} AS w
SET state = 'ready', attempts = 0, available_at = $3::float8, seq = nextval('{work_seq}'),
    dead_reason = NULL, dead_at = NULL
WHERE w.tenant = $1::text AND w.item_id = $2::text AND w.state = 'dead'
RETURNING {work_cols_w}
), moved AS (SELECT r.tenant, r.state FROM requeued r)"""
    + JOIN_ROTATION
    + """
SELECT * FROM requeued""",
    "get_item": """
SELECT {work_cols_w} FROM {work} w WHERE w.tenant = $1::text AND w.item_id = $2::text""",
    # $1 now
    "stats": """
SELECT count(*) FILTER (WHERE w.state = 'ready' AND w.available_at <= $1::float8),
       count(*) FILTER (WHERE w.state = 'ready' AND w.available_at > $1::float8),
       count(*) FILTER (WHERE w.state = 'leased'),
       count(*) FILTER (WHERE w.state = 'dead'),
       count(DISTINCT w.tenant) FILTER (WHERE w.state = 'ready' AND w.available_at <= $1::float8)
FROM {work} w""",
    # $1 tenant $2 item_id: the item's state and worker as this statement saw it, and whether
    # it was deleted (never a leased one: the lock re-checks the state).
    "cancel": """
WITH target AS (
    SELECT w.state, w.worker FROM {work} w WHERE w.tenant = $1::text AND w.item_id = $2::text
), gone AS (
    DELETE FROM {work} AS w
    WHERE w.tenant = $1::text AND w.item_id = $2::text AND w.state <> 'leased'
    RETURNING w.item_id
)
SELECT t.state, t.worker, EXISTS (SELECT 1 FROM gone) FROM target t""",
    # $1 tenant $2 died at or before $3 limit: oldest dead letters first, skipping held rows
    "purge_dead": """
WITH doomed AS (
    SELECT w.ctid AS row_id FROM {work} w
    WHERE w.tenant = $1::text AND w.state = 'dead' AND w.dead_at <= $2::float8
    ORDER BY w.dead_at, w.item_id
    LIMIT $3::bigint
    FOR UPDATE OF w SKIP LOCKED
), gone AS (
    DELETE FROM {work} AS w
    WHERE w.ctid = ANY (ARRAY(SELECT d.row_id FROM doomed d))
      AND w.tenant = $1::text AND w.state = 'dead'
    RETURNING 1
)
SELECT count(*) FROM gone""",
    # $1 after this tenant $2 window $3 limit: the rotation rows after $1 (at most $2), and of
    # those holding no item in any state up to $3 retired (the retire function locks the row
    # SKIP LOCKED and looks again with a fresh snapshot, so a racing enqueue is never lost).
    # Returns the last tenant looked at (NULL: the end was reached) and how many were removed.
    "prune": """
WITH seen AS (
    SELECT t.tenant FROM {turns} t WHERE t.tenant > $1::text ORDER BY t.tenant LIMIT $2::bigint
), idle AS (
    SELECT s.tenant FROM seen s
    WHERE NOT EXISTS (SELECT 1 FROM {work} x WHERE x.tenant = s.tenant)
    ORDER BY s.tenant
    LIMIT $3::bigint
), retired AS (
    SELECT {turns_retire}(i.tenant) AS gone FROM idle i
)
SELECT CASE WHEN (SELECT count(*) FROM seen) >= $2::bigint
            THEN (SELECT max(s.tenant) FROM seen s) END,
       (SELECT count(*) FROM retired r WHERE r.gone)""",
}
