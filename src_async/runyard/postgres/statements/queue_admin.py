"""The work queue's operator statements (dead letters, cancel, purge, prune, reads)."""

from __future__ import annotations

from runyard.postgres.statements.queue_rotation import DUE_TENANT, JOIN_ROTATION, tally

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
    + tally("(SELECT count(*) FROM requeued)", "0", "-(SELECT count(*) FROM requeued)")
    + """
SELECT * FROM requeued""",
    "get_item": """
SELECT {work_cols_w} FROM {work} w WHERE w.tenant = $1::text AND w.item_id = $2::text""",
    # $1 now: from the maintained counts (ready minus the delayed ledger's count past now), the
    # rotation and the parked tenants whose due time has come (tenants with due work: one
    # index entry each), never the work table's rows; O(delayed items + rotation rows + such
    # parked rows), see docs/postgres.md, "What stats() costs". The ledger's count is held
    # within 0 and the ready count: clients that judged "due yet?" by server-time estimates a
    # few ms apart (an item enqueued as due by one and cancelled as delayed by the other) left
    # it at -1 or past the ready items until that due time passed.
    "stats": """
SELECT r.n - d.n, d.n,
       (SELECT COALESCE(sum(c.leased), 0) FROM {counts} c),
       (SELECT COALESCE(sum(c.dead), 0) FROM {counts} c),
       (SELECT count(*) FROM {turns} t WHERE """
    + DUE_TENANT
    + """)
       + (SELECT count(*) FROM {turns_parked} k WHERE k.due_at <= $1::float8
          AND NOT EXISTS (SELECT 1 FROM {turns} t WHERE t.tenant = k.tenant)
          AND """
    + DUE_TENANT.replace("t.tenant", "k.tenant")
    + """)
FROM (SELECT COALESCE(sum(c.ready), 0) AS n FROM {counts} c) AS r,
     LATERAL (SELECT LEAST(GREATEST(COALESCE(sum(x.n), 0), 0), r.n) AS n FROM {delays} x
              WHERE x.available_at > $1::float8) AS d""",
    # $1 tenant $2 item_id $3 now: the item's state and worker as this statement saw it, and
    # whether it was deleted (never a leased one: the lock re-checks the state). A delayed item
    # leaves the delays ledger (-1 at its due time); a parked tenant left without a ready item
    # leaves the parked table (as a drained tenant leaves the rotation), unless another session
    # holds its row (skipped, never waited on) or the transaction is not READ COMMITTED (where
    # locking a row another session changed fails): then the row stays until its due time,
    # when a claim puts the tenant back and a later one retires it.
    "cancel": """
WITH target AS (
    SELECT w.state, w.worker FROM {work} w WHERE w.tenant = $1::text AND w.item_id = $2::text
), gone AS (
    DELETE FROM {work} AS w
    WHERE w.tenant = $1::text AND w.item_id = $2::text AND w.state <> 'leased'
    RETURNING w.state, w.available_at
), undelayed AS (
    INSERT INTO {delays} (available_at, n)
    SELECT g.available_at, -1 FROM gone g
    WHERE g.state = 'ready' AND g.available_at > $3::float8
), unparked AS (
    DELETE FROM {turns_parked} AS p
    WHERE p.ctid = ANY (ARRAY(
        SELECT q.ctid FROM {turns_parked} q
        WHERE q.tenant = $1::text AND EXISTS (SELECT 1 FROM gone)
          AND current_setting('transaction_isolation') = 'read committed'
        FOR UPDATE OF q SKIP LOCKED))
      AND NOT EXISTS (SELECT 1 FROM {work} r
                      WHERE r.tenant = $1::text AND r.state = 'ready' AND r.item_id <> $2::text)
)"""
    + tally(
        "-(SELECT count(*) FROM gone g WHERE g.state = 'ready')",
        "0",
        "-(SELECT count(*) FROM gone g WHERE g.state = 'dead')",
    )
    + """
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
)"""
    + tally("0", "0", "-(SELECT count(*) FROM gone)")
    + """
SELECT count(*) FROM gone""",
    # $1 $5 after this (turn, tenant) $2 window $3 limit $6 this pass's bound: the rotation
    # rows after it in turn order, at most $2 (the (turn, tenant) index), whose turn is at
    # most the pass's bound (NULL: a new pass, bounded by the highest turn now; a tenant served
    # during the pass gets a higher turn and waits for the next one, so every pass ends); of
    # those holding no item in any state up to $3 retired, least recently served first as on
    # every backend (the retire function locks the row SKIP LOCKED and looks again with a
    # fresh snapshot, so a racing enqueue is never lost). Returns where the next call resumes
    # (the last row seen, or the last one retired when the limit was reached first; NULL: the
    # pass ended), how many were removed and the pass's bound. $4 now: up to 1,000 rows of the
    # delays ledger that no longer count go too.
    "prune": """
WITH bound AS (
    SELECT COALESCE($6::bigint, (SELECT max(t.turn) FROM {turns} t)) AS turn
), seen AS (
    SELECT t.turn, t.tenant FROM {turns} t
    WHERE (t.turn, t.tenant) > ($1::bigint, $5::text)
      AND t.turn <= (SELECT b.turn FROM bound b)
    ORDER BY t.turn, t.tenant LIMIT $2::bigint
), idle AS (
    SELECT s.turn, s.tenant FROM seen s
    WHERE NOT EXISTS (SELECT 1 FROM {work} x WHERE x.tenant = s.tenant)
    ORDER BY s.turn, s.tenant
    LIMIT $3::bigint
), last_seen AS (
    SELECT c.turn, c.tenant FROM (
        SELECT i.turn, i.tenant FROM idle i WHERE (SELECT count(*) FROM idle) >= $3::bigint
        UNION ALL
        SELECT s.turn, s.tenant FROM seen s WHERE (SELECT count(*) FROM idle) < $3::bigint
    ) c
    ORDER BY c.turn DESC, c.tenant DESC LIMIT 1
), retired AS (
    SELECT {turns_retire}(i.tenant) AS gone FROM idle i
), swept AS (
    DELETE FROM {delays} x
    WHERE x.ctid = ANY (ARRAY(
        SELECT y.ctid FROM {delays} y WHERE y.available_at <= $4::float8
        ORDER BY y.available_at LIMIT 1000))
      AND x.available_at <= $4::float8
)
SELECT CASE WHEN (SELECT count(*) FROM seen) >= $2::bigint
                 OR (SELECT count(*) FROM idle) >= $3::bigint
            THEN (SELECT l.turn FROM last_seen l) END,
       (SELECT l.tenant FROM last_seen l),
       (SELECT count(*) FROM retired r WHERE r.gone),
       (SELECT b.turn FROM bound b)""",
}
