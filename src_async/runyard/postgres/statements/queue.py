"""The work queue's statements, as templates."""

from __future__ import annotations

from typing import Any

from runyard.postgres.statements.queue_rotation import (
    ENQUEUED,
    INSERT_WORK,
    JOIN_ROTATION,
    LEASE,
    claim_tally,
    delayed,
    park_ahead,
    pick_tenants,
    reclaim,
    reply_filter,
    retire_drained,
    tally,
)

__all__ = ["QUEUE_TEMPLATES", "claim_call", "claim_name"]


def claim_name(reclaiming: bool, retiring: bool) -> str:
    """The name of the claim statement's form that reclaims lapsed leases (``reclaiming``)
    and retires drained tenants (``retiring``), or not: "claim", then "_reclaim" and
    "_retire" for the parts it has. A form without a part does what the full form does given
    NULL for that part, without the plan nodes the server would lock, start and end for
    nothing (a claim alone: 0.55 ms against 0.76 to 0.89, see docs/postgres.md)."""
    return "claim" + ("_reclaim" if reclaiming else "") + ("_retire" if retiring else "")


def claim_call(
    head: tuple[Any, ...],
    reclaim: tuple[Any, ...],
    drained: list[str] | None,
    *,
    parking: bool = True,
) -> tuple[str, tuple[Any, ...]]:
    """The claim statement's form and its arguments: ``head`` ($1 to $4), ``reclaim`` the
    reclaim's (jitters first: None to take back none), ``drained`` the tenants to retire if
    drained (None for none), ``parking`` whether it parks tenants (last; false in the
    caller's transaction, see park_ahead()). The form sent has only the parts that can do
    something."""
    reclaiming, retiring = reclaim[0] is not None, drained is not None
    args = head + (reclaim if reclaiming else ()) + ((drained,) if retiring else ()) + (parking,)
    return claim_name(reclaiming, retiring), args


def _claim(reclaiming: bool, retiring: bool) -> str:
    """The claim: $1 now $2 worker $3 lease expiry $4 tenants to pass over (their due heads
    are locked); when ``reclaiming``, $5 reclaim jitters $6 backoff_base $7 backoff_cap $8
    policy max_attempts; when ``retiring``, then the tenants that earlier claims drained;
    last, whether it parks tenants (see park_ahead(); it puts back in any case, see unpark()).

    First up to RECLAIM_PER_CLAIM lapsed leases are taken back (see reclaim()). One
    statement, which waits on no lock: the tenant with the oldest turn that has due work and
    whose rotation row no other session holds (FOR NO KEY UPDATE SKIP LOCKED), so concurrent
    claimers spread over tenants; when every such row is held (many claimers, few tenants),
    the oldest-turn tenant with due work all the same, without advancing its turn. Its head
    row is locked SKIP LOCKED, every predicate repeated on the locked row (found by its ctid,
    a plan statistics cannot change), the claim written and the turn advanced. "Anything
    due?" is DUE_TENANT, one index entry. The drained tenants (those of the client's earlier
    claims) leave the rotation if they have no ready item (see retire_drained()). The reply
    says how many lapsed leases were taken back (0 without the reclaim), and a row with a
    tenant and no item means "that tenant's heads were all locked". A NULL jitter array
    takes back none, as the form without the reclaim does.
    """
    parking = 5 + (4 if reclaiming else 0) + (1 if retiring else 0)
    return (
        "WITH "
        + (reclaim(5, 6, 7, 8) + ", " if reclaiming else "")
        + pick_tenants("1", "tenant, turn", reclaiming)
        + park_ahead(parking, reclaiming)
        + """, head AS (
    SELECT w.ctid FROM {work} w
    WHERE w.tenant = (SELECT p.tenant FROM pick p)
      AND w.state = 'ready' AND w.available_at <= $1::float8
    ORDER BY w.priority DESC, w.available_at, w.seq
    LIMIT 1
    FOR UPDATE OF w SKIP LOCKED
), claimed AS (
    UPDATE {work} AS w
    """
        + LEASE
        + """
    WHERE w.ctid = (SELECT h.ctid FROM head h)
      AND w.tenant = (SELECT p.tenant FROM pick p)
      AND w.state = 'ready' AND w.available_at <= $1::float8
    RETURNING {work_cols_w}
), advanced AS (
    UPDATE {turns} AS t SET turn = nextval('{turn_seq}')
    FROM claimed c, pick p WHERE p.owned AND t.tenant = c.tenant
)"""
        + claim_tally(reclaiming)
        + (retire_drained(9 if reclaiming else 5) if retiring else "")
        + """
SELECT p.tenant, """
        + ("(SELECT count(*) FROM reclaimed r)" if reclaiming else "0::bigint")
        + """, c.*
FROM (SELECT 1) AS one LEFT JOIN pick p ON true LEFT JOIN claimed c ON true"""
        + reply_filter(retiring, reclaiming)
    )


QUEUE_TEMPLATES: dict[str, str] = {
    # -- work items ------------------------------------------------------------------------
    # $1 tenant $2 item_id $3 payload $4 priority $5 available_at $6 now $7 dedupe_key
    # $8 max_attempts $9 wake channel. The tenant joins the rotation (or keeps its place, under
    # a KEY SHARE lock only) and idle workers are woken at commit. A repeat returns the item
    # already stored under the id (first) or the live dedupe key.
    "enqueue": """
WITH moved AS (
    """
    + INSERT_WORK
    + """
    VALUES ($1::text, $2::text, $3::text, $4::bigint, 'ready', 0, $5::float8,
            $6::float8, $7::text, $8::integer)
    ON CONFLICT DO NOTHING
    RETURNING {work_cols_w}
)"""
    + ENQUEUED
    + """
SELECT true, i.* FROM moved i CROSS JOIN woken
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
    # $1 now $2 worker $3 lease expiry $4 tenants to pass over, then what its form takes
    # (see _claim and claim_name): "claim", "claim_reclaim", "claim_retire" and
    # "claim_reclaim_retire".
    **{
        claim_name(reclaiming, retiring): _claim(reclaiming, retiring)
        for reclaiming in (False, True)
        for retiring in (False, True)
    },
    # $1 tenant: leave the rotation if the tenant has no item in state 'ready' (skipping a
    # held row); true when the row was removed. Used by a bound claim, inside the caller's
    # transaction, which sees its own claim (an unbound claim defers it to its next claim).
    "retire": """
SELECT {turns_retire}($1::text)""",
    # $1 tenant $2 item_id: what a refused settle is explained by
    "probe_item": """
SELECT w.token, w.state, w.claimed_at, w.lease_expires_at, w.attempts, w.max_attempts
FROM {work} w
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
WITH done AS (
DELETE FROM {work} AS w
WHERE w.tenant = $1::text AND w.item_id = $2::text AND w.token = $3::bigint
  AND w.state = 'leased' AND $4::float8 < w.claimed_at + $5::float8
  AND $4::float8 <= w.lease_expires_at
RETURNING w.item_id
)"""
    + tally("0", "-(SELECT count(*) FROM done)", "0")
    + """
SELECT d.item_id FROM done d""",
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
    + JOIN_ROTATION
    + delayed("failed", "$4::float8")
    + tally(
        "(SELECT count(*) FROM failed f WHERE f.state = 'ready')",
        "-(SELECT count(*) FROM failed f)",
        "(SELECT count(*) FROM failed f WHERE f.state = 'dead')",
    )
    + """
SELECT * FROM failed""",
    # $1 now $2 limit: lapsed leases, oldest expiry first
    "lapsed": """
SELECT w.tenant, w.item_id, w.token, w.attempts, w.max_attempts FROM {work} w
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
    + JOIN_ROTATION
    + delayed("reaped", "$1::float8")
    + tally(
        "(SELECT count(*) FROM reaped r WHERE r.state = 'ready')",
        "-(SELECT count(*) FROM reaped r)",
        "(SELECT count(*) FROM reaped r WHERE r.state = 'dead')",
    )
    + """
SELECT * FROM reaped""",
    # $1 worker $2 now $3 now + lease_seconds $4 max_lease_seconds $5 limit: each adopted
    # lease gets a new token, drawn in the order of the old ones (claim order), so a later
    # adopt finds them in that order again; rows come with the old one.
    "adopt": """
WITH held AS (
    SELECT w.tenant, w.item_id, w.token AS old_token FROM {work} w
    WHERE w.worker = $1::text AND w.state = 'leased' AND $2::float8 <= w.lease_expires_at
      AND $2::float8 < w.claimed_at + $4::float8
    ORDER BY w.token
    LIMIT $5::bigint
    FOR UPDATE OF w SKIP LOCKED
), renewed AS (
    SELECT o.*, nextval('{token_seq}') AS new_token FROM (
        SELECT * FROM held k ORDER BY k.old_token
    ) AS o
)
UPDATE {work} AS w SET lease_expires_at = LEAST($3::float8, w.claimed_at + $4::float8),
    token = h.new_token
FROM renewed h
WHERE w.tenant = h.tenant AND w.item_id = h.item_id AND w.token = h.old_token
  AND w.worker = $1::text AND w.state = 'leased' AND $2::float8 <= w.lease_expires_at
  AND $2::float8 < w.claimed_at + $4::float8
RETURNING h.old_token, {work_cols_w}""",
}
