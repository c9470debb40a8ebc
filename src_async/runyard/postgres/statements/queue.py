"""The work queue's statements, as templates."""

from __future__ import annotations

__all__ = ["QUEUE_TEMPLATES"]

# Items that moved into state 'ready' (the CTE named "moved", with tenant and state columns)
# keep their tenant in the rotation: a tenant that has a row gets FOR KEY SHARE on it (no claim
# waits on that lock; a concurrent retire skips the row), a tenant without one is inserted with
# the claim counter's current value as its turn (the back of the rotation).
_JOIN_ROTATION = """, held AS (
    SELECT t.tenant FROM {turns} t
    WHERE t.tenant IN (SELECT m.tenant FROM moved m WHERE m.state = 'ready')
    FOR KEY SHARE OF t
), joined AS (
    INSERT INTO {turns} AS t (tenant, turn)
    SELECT DISTINCT m.tenant, (SELECT CASE WHEN c.is_called THEN c.last_value ELSE 0 END
                               FROM {turn_seq} c)
    FROM moved m
    WHERE m.state = 'ready' AND m.tenant NOT IN (SELECT h.tenant FROM held h)
    ON CONFLICT (tenant) DO UPDATE SET turn = t.turn
)"""

QUEUE_TEMPLATES: dict[str, str] = {
    # -- work items ------------------------------------------------------------------------
    # $1 tenant $2 item_id $3 payload $4 priority $5 available_at $6 now $7 dedupe_key.
    # The tenant joins the rotation (or keeps its place, under a KEY SHARE lock only). A repeat
    # returns the item already stored under the id (first) or the live dedupe key.
    "enqueue": """
WITH moved AS (
    INSERT INTO {work} AS w
        (tenant, item_id, payload, priority, state, attempts, available_at, enqueued_at,
         dedupe_key)
    VALUES ($1::text, $2::text, $3::text, $4::bigint, 'ready', 0, $5::float8,
            $6::float8, $7::text)
    ON CONFLICT DO NOTHING
    RETURNING {work_cols_w}
)"""
    + _JOIN_ROTATION
    + """
SELECT true, i.* FROM moved i
UNION ALL
SELECT false, e.* FROM (
    SELECT {work_cols_w} FROM {work} w
    WHERE w.tenant = $1::text AND (w.item_id = $2::text OR w.dedupe_key = $7::text)
    ORDER BY w.item_id = $2::text DESC
    LIMIT 1
) AS e
WHERE NOT EXISTS (SELECT 1 FROM moved)""",
    # $1 tenant $2 item_id $3 dedupe_key: the stored item a repeated enqueue stands for
    "find_item": """
SELECT {work_cols_w} FROM {work} w
WHERE w.tenant = $1::text AND (w.item_id = $2::text OR w.dedupe_key = $3::text)
ORDER BY w.item_id = $2::text DESC
LIMIT 1""",
    # $1 now $2 worker $3 lease expiry $4 tenants to pass over (their due heads are locked).
    # One statement, which waits on no lock: the tenant with the oldest turn that has due work
    # and whose rotation row no other session holds (FOR NO KEY UPDATE SKIP LOCKED), so
    # concurrent claimers spread over tenants; when every such row is held (many claimers, few
    # tenants), the oldest-turn tenant with due work all the same, without advancing its turn.
    # Its head row is locked SKIP LOCKED, every predicate repeated on the locked row (found by
    # its ctid, a plan statistics cannot change), the claim written and the turn advanced.
    # "Anything due?" reads one entry of the (tenant, available_at) index (ORDER BY ... LIMIT
    # 1, the only plan that serves it without reading the tenant's backlog), so the plan is the
    # same with or without statistics. The reply says whether fewer than 16 other ready items
    # were seen (time to try a retire), and a row with a tenant and no item means "that
    # tenant's heads were all locked".
    "claim": """
WITH owned AS (
    SELECT t.tenant FROM {turns} t
    WHERE t.tenant <> ALL ($4::text[])
      AND (SELECT d.available_at FROM {work} d
           WHERE d.tenant = t.tenant AND d.state = 'ready'
           ORDER BY d.available_at LIMIT 1) <= $1::float8
    ORDER BY t.turn, t.tenant
    LIMIT 1
    FOR NO KEY UPDATE OF t SKIP LOCKED
), shared AS (
    SELECT t.tenant FROM {turns} t
    WHERE NOT EXISTS (SELECT 1 FROM owned) AND t.tenant <> ALL ($4::text[])
      AND (SELECT d.available_at FROM {work} d
           WHERE d.tenant = t.tenant AND d.state = 'ready'
           ORDER BY d.available_at LIMIT 1) <= $1::float8
    ORDER BY t.turn, t.tenant
    LIMIT 1
), pick AS (
    SELECT o.tenant, true AS owned FROM owned o
    UNION ALL
    SELECT s.tenant, false AS owned FROM shared s
), head AS (
    SELECT w.ctid FROM {work} w
    WHERE w.tenant = (SELECT p.tenant FROM pick p)
      AND w.state = 'ready' AND w.available_at <= $1::float8
    ORDER BY w.priority DESC, w.available_at, w.seq
    LIMIT 1
    FOR UPDATE OF w SKIP LOCKED
), claimed AS (
    UPDATE {work} AS w
    SET state = 'leased', attempts = w.attempts + 1, worker = $2::text,
        token = nextval('{token_seq}'), claimed_at = $1::float8,
        lease_expires_at = $3::float8
    WHERE w.ctid = (SELECT h.ctid FROM head h)
      AND w.tenant = (SELECT p.tenant FROM pick p)
      AND w.state = 'ready' AND w.available_at <= $1::float8
    RETURNING {work_cols_w}
), advanced AS (
    UPDATE {turns} AS t SET turn = nextval('{turn_seq}')
    FROM claimed c, pick p WHERE p.owned AND t.tenant = c.tenant
)
SELECT p.tenant,
       (SELECT count(*) FROM claimed k, LATERAL (
            SELECT 1 FROM {work} x
            WHERE x.tenant = k.tenant AND x.state = 'ready' AND x.item_id <> k.item_id
            ORDER BY x.available_at LIMIT 16) AS others) < 16,
       c.*
FROM pick p LEFT JOIN claimed c ON true""",
    # $1 tenant: leave the rotation if the tenant has no item in state 'ready' (skipping a
    # held row); true when the row was removed
    "retire": """
SELECT {turns_retire}($1::text)""",
    # $1 tenant $2 item_id: what a refused settle is explained by
    "probe_item": """
SELECT w.token, w.state, w.claimed_at, w.lease_expires_at, w.attempts FROM {work} w
WHERE w.tenant = $1::text AND w.item_id = $2::text""",
    # $1 tenant $2 item_id $3 token $4 now $5 now + lease_seconds $6 max_lease_seconds
    "heartbeat": """
UPDATE {work} AS w SET lease_expires_at = LEAST($5::float8, w.claimed_at + $6::float8)
WHERE w.tenant = $1::text AND w.item_id = $2::text AND w.token = $3::bigint
  AND w.state = 'leased' AND $4::float8 < w.claimed_at + $6::float8
  AND $4::float8 <= w.lease_expires_at
RETURNING {work_cols_w}""",
    # $1 tenant $2 item_id $3 token $4 now $5 max_lease_seconds
    "complete": """
DELETE FROM {work} AS w
WHERE w.tenant = $1::text AND w.item_id = $2::text AND w.token = $3::bigint
  AND w.state = 'leased' AND $4::float8 < w.claimed_at + $5::float8
  AND $4::float8 <= w.lease_expires_at
RETURNING w.item_id""",
    # $1 tenant $2 item_id $3 token $4 now $5 max_lease_seconds $6 new state $7 retry_at
    # $8 error $9 dead reason. A retry keeps the tenant in the rotation.
    "fail": """
WITH failed AS (
UPDATE {work} AS w
SET state = $6::text, available_at = COALESCE($7::float8, w.available_at),
    seq = nextval('{work_seq}'), worker = NULL, token = NULL, claimed_at = NULL,
    lease_expires_at = NULL, last_error = COALESCE($8::text, w.last_error),
    dead_reason = $9::text, dead_at = CASE WHEN $6::text = 'dead' THEN $4::float8 END
WHERE w.tenant = $1::text AND w.item_id = $2::text AND w.token = $3::bigint
  AND w.state = 'leased' AND $4::float8 < w.claimed_at + $5::float8
  AND $4::float8 <= w.lease_expires_at
RETURNING {work_cols_w}
), moved AS (SELECT f.tenant, f.state FROM failed f)"""
    + _JOIN_ROTATION
    + """
SELECT * FROM failed""",
    # $1 now $2 limit: lapsed leases, oldest expiry first
    "lapsed": """
SELECT w.tenant, w.item_id, w.token, w.attempts FROM {work} w
WHERE w.state = 'leased' AND w.lease_expires_at < $1::float8
ORDER BY w.lease_expires_at, w.token
LIMIT $2::bigint""",
    # $1 now $2 tenants $3 item_ids $4 tokens $5 new states $6 retry_at $7 reasons $8 error.
    # Rows another session holds are skipped; every lapse predicate is repeated; the tenants of
    # items made ready again stay in the rotation.
    "reap": """
WITH decided AS (
    SELECT * FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::float8[],
                         $7::text[]) WITH ORDINALITY
        AS d(tenant, item_id, token, new_state, retry_at, reason, ord)
), locked AS (
    SELECT w.tenant, w.item_id FROM {work} w
    JOIN decided d ON w.tenant = d.tenant AND w.item_id = d.item_id
    WHERE w.token = d.token AND w.state = 'leased' AND w.lease_expires_at < $1::float8
    FOR UPDATE OF w SKIP LOCKED
), reaped AS (
UPDATE {work} AS w
SET state = d.new_state, available_at = COALESCE(d.retry_at, w.available_at),
    seq = nextval('{work_seq}'), worker = NULL, token = NULL, claimed_at = NULL,
    lease_expires_at = NULL, last_error = $8::text,
    dead_reason = CASE WHEN d.new_state = 'dead' THEN d.reason END,
    dead_at = CASE WHEN d.new_state = 'dead' THEN $1::float8 END
FROM decided d, locked k
WHERE w.tenant = k.tenant AND w.item_id = k.item_id
  AND d.tenant = w.tenant AND d.item_id = w.item_id
  AND w.token = d.token AND w.state = 'leased' AND w.lease_expires_at < $1::float8
RETURNING d.ord, {work_cols_w}
), moved AS (SELECT r.tenant, r.state FROM reaped r)"""
    + _JOIN_ROTATION
    + """
SELECT * FROM reaped""",
    # $1 worker $2 now $3 now + lease_seconds $4 max_lease_seconds $5 limit
    "adopt": """
WITH held AS (
    SELECT w.tenant, w.item_id FROM {work} w
    WHERE w.worker = $1::text AND w.state = 'leased' AND $2::float8 <= w.lease_expires_at
      AND $2::float8 < w.claimed_at + $4::float8
    ORDER BY w.token
    LIMIT $5::bigint
    FOR UPDATE OF w SKIP LOCKED
)
UPDATE {work} AS w SET lease_expires_at = LEAST($3::float8, w.claimed_at + $4::float8)
FROM held h
WHERE w.tenant = h.tenant AND w.item_id = h.item_id
  AND w.worker = $1::text AND w.state = 'leased' AND $2::float8 <= w.lease_expires_at
  AND $2::float8 < w.claimed_at + $4::float8
RETURNING {work_cols_w}""",
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
    + _JOIN_ROTATION
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
}
