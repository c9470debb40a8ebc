"""The work queue's batched statements (``*_many``), as templates: one statement per call."""

from __future__ import annotations

from typing import Any

from runyard.postgres.statements.queue import claim_name
from runyard.postgres.statements.queue_rotation import (
    ENQUEUED,
    INSERT_WORK,
    JOIN_ROTATION,
    LEASE,
    claim_tally,
    park_ahead,
    pick_tenants,
    reclaim,
    reply_filter,
    retire_drained,
    tally,
    wake,
)

__all__ = ["BATCHED_TEMPLATES", "CLAIM_MANY_LITERAL_UP_TO", "claim_many_call", "claim_many_name"]

# The probe columns a refused settle is explained by (runyard._sql.settle_refusal), read from
# the statement's snapshot: the row as it was before the batch touched it.
_PROBE = "p.token, p.state, p.claimed_at, p.lease_expires_at, p.attempts"

# $1 tenants $2 item_ids $3 tokens, one entry per lease of the batch, in order.
_TARGETS = """targets AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY
        AS d(tenant, item_id, token, ord)
)"""

# The same with a seq drawn for each lease, in batch order.
_TARGETS_IN_ORDER = """targets AS (
    SELECT o.*, nextval('{work_seq}') AS seq FROM (
        SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY
            AS d(tenant, item_id, token, ord)
        ORDER BY d.ord
    ) AS o
)"""

# $4 now $5 max_lease_seconds: a settle's lease predicates on the row ``w``.
_LIVE = """w.tenant = d.tenant AND w.item_id = d.item_id AND w.token = d.token
      AND w.state = 'leased' AND $4::float8 < w.claimed_at + $5::float8
      AND $4::float8 <= w.lease_expires_at"""

# claim_many's SET: the token drawn in "chosen", in the order the batch serves its items (an
# UPDATE's own nextval() would draw them in the order it meets the rows), so the k-th lease
# served has the k-th token, as k single claims would.
_LEASE_DRAWN = LEASE.replace("nextval('{token_seq}')", "c.token")

# claim_many with its batch size as a literal for batches up to this size (the statements
# "claim_many_<n>_...", see claim_many_name), the parameter $5 beyond. A parameter as LIMIT
# is costed as a tenth of the rows the planner guesses, so the generic plan looked dearer
# than the custom plans of the first runs and every call was planned afresh: about 0.6 ms of
# a 1.05 ms claim_many(1) on an idle queue, against 0.44 ms with the literal.
CLAIM_MANY_LITERAL_UP_TO = 16


def claim_many_name(size: int, reclaiming: bool) -> str:
    """The name of claim_many's statement for a batch of ``size`` that reclaims lapsed
    leases (``reclaiming``) or not: "claim_many", then "_<size>" up to
    CLAIM_MANY_LITERAL_UP_TO, then "_reclaim" if it reclaims and "_retire" (see claim_name).

    Two forms, not the claim's four: every form of every literal size is a prepared statement
    on each connection that sends it (psycopg keeps 100 a connection), and the retire's part
    costs little beside the reclaim's (see docs/postgres.md); the form without the reclaim is
    sent with NULL for the tenants to retire when there are none.
    """
    literal = f"_{size}" if size <= CLAIM_MANY_LITERAL_UP_TO else ""
    return claim_name(reclaiming, True).replace("claim", "claim_many" + literal, 1)


def claim_many_call(
    head: tuple[Any, ...],
    size: int,
    reclaim: tuple[Any, ...],
    drained: list[str] | None,
    *,
    parking: bool = True,
) -> tuple[str, tuple[Any, ...]]:
    """claim_many's statement for a batch of ``size`` and its arguments: ``head`` ($1 to
    $4, as claim_call's), the size, ``reclaim`` the reclaim's (jitters first: None to take
    back none, then the form without the reclaim is sent), ``drained`` the tenants to retire
    if drained (None for none), ``parking`` as claim_call's."""
    reclaiming = reclaim[0] is not None
    args = (*head, size, *(reclaim if reclaiming else ()), drained, parking)
    return claim_many_name(size, reclaiming), args


def _claim_many(limit: str, reclaiming: bool) -> str:
    """The claim_many template with ``limit`` as its batch size: "$5::bigint", or a literal
    (then $5 is still declared, by a CTE nothing reads, so every size takes the same
    arguments); with the reclaim's CTEs ($6 to $9) when ``reclaiming``; then the tenants to
    retire if drained, and whether it parks (see claim_call)."""
    batch = "" if limit.startswith("$") else "batch AS (SELECT $5::bigint AS size), "
    parking = 11 if reclaiming else 7
    return (
        "WITH "
        + batch
        + (reclaim(6, 7, 8, 9) + ", " if reclaiming else "")
        + pick_tenants(limit, "tenant, turn", reclaiming)
        + park_ahead(parking, reclaiming)
        + """, heads AS (
    SELECT h.row_id, p.tenant, p.turn, h.priority, h.available_at, h.seq
    FROM pick p CROSS JOIN LATERAL (
        SELECT w.ctid AS row_id, w.priority, w.available_at, w.seq FROM {work} w
        WHERE w.tenant = p.tenant AND w.state = 'ready' AND w.available_at <= $1::float8
        ORDER BY w.priority DESC, w.available_at, w.seq
        LIMIT """
        + limit
        + """ + 1 - (SELECT count(*) FROM pick)
        FOR UPDATE OF w SKIP LOCKED
    ) AS h
), chosen AS (
    SELECT o.row_id, o.tenant, o.pos, nextval('{token_seq}') AS token FROM (
        SELECT r.row_id, r.tenant, row_number() OVER (ORDER BY r.rank, r.turn, r.tenant) AS pos
        FROM (
            SELECT h.row_id, h.tenant, h.turn, row_number() OVER (
                PARTITION BY h.tenant ORDER BY h.priority DESC, h.available_at, h.seq) AS rank
            FROM heads h
        ) AS r
        ORDER BY r.rank, r.turn, r.tenant
        LIMIT """
        + limit
        + """
    ) AS o
), claimed AS (
    UPDATE {work} AS w
    """
        + _LEASE_DRAWN
        + """
    FROM chosen c
    WHERE w.ctid = ANY (ARRAY(SELECT c2.row_id FROM chosen c2)) AND w.ctid = c.row_id
      AND w.tenant = c.tenant AND w.state = 'ready' AND w.available_at <= $1::float8
    RETURNING c.pos, {work_cols_w}
), served AS (
    SELECT s.tenant, nextval('{turn_seq}') AS turn FROM (
        SELECT k.tenant, max(k.pos) AS last, count(*) AS taken FROM claimed k
        GROUP BY k.tenant ORDER BY last
    ) AS s
), advanced AS (
    UPDATE {turns} AS t SET turn = s.turn
    FROM served s, pick p WHERE p.owned AND p.tenant = s.tenant AND t.tenant = s.tenant
)"""
        + claim_tally(reclaiming)
        + retire_drained(10 if reclaiming else 6)
        + """
SELECT c.pos, p.tenant,
       """
        + ("(SELECT count(*) FROM reclaimed r)" if reclaiming else "0::bigint")
        + """,
       c.tenant, c.item_id, c.payload, c.priority, c.state, c.attempts, c.available_at,
       c.enqueued_at, c.dedupe_key, c.worker, c.lease_expires_at, c.last_error, c.token,
       c.claimed_at, c.dead_reason, c.dead_at, c.max_attempts
FROM (SELECT 1) AS one LEFT JOIN pick p ON true LEFT JOIN claimed c ON c.tenant = p.tenant"""
        + reply_filter(True, reclaiming)
        + """
ORDER BY c.pos NULLS LAST, p.turn, p.tenant"""
    )


BATCHED_TEMPLATES: dict[str, str] = {
    # $1 tenant $2 item_ids $3 payloads $4 priorities $5 available_at $6 now $7 dedupe_keys
    # $8 max_attempts $9 wake channel. Inserts, in batch order, every item no stored one (nor
    # an earlier one of the batch) collides with. Each item's seq is drawn up front, in batch
    # order (as the column's default would draw it), so that an inserted row names the batch
    # position it came from. Returns the rows it inserted (their position first) and the
    # stored rows, as the statement's snapshot saw them, that the batch's ids and dedupe keys
    # name (position NULL): the client replays the batch in order over them (an item that
    # inserted nothing stands for the row its id, else its dedupe key, names among the stored
    # rows and the rows inserted by earlier items).
    "enqueue_many": """
WITH given AS (
    SELECT u.*, nextval('{work_seq}') AS seq FROM (
        SELECT * FROM unnest($2::text[], $3::text[], $4::bigint[], $5::float8[], $7::text[],
                             $8::integer[]) WITH ORDINALITY
            AS g(item_id, payload, priority, available_at, dedupe_key, max_attempts, ord)
        ORDER BY g.ord
    ) AS u
), moved AS (
    """
    + INSERT_WORK.removesuffix(")")
    + ", seq)"
    + """
    SELECT $1::text, g.item_id, g.payload, g.priority, 'ready', 0, g.available_at, $6::float8,
           g.dedupe_key, g.max_attempts, g.seq
    FROM given g ORDER BY g.ord
    ON CONFLICT DO NOTHING
    RETURNING w.seq, {work_cols_w}
)"""
    + ENQUEUED
    + """
SELECT g.ord, i.* FROM moved i JOIN given g ON g.seq = i.seq CROSS JOIN woken
UNION ALL
SELECT NULL::bigint, w.seq, {work_cols_w} FROM {work} w
WHERE w.tenant = $1::text
  AND (w.item_id = ANY ($2::text[]) OR w.dedupe_key = ANY ($7::text[]))""",
    # $1 tenants $2 item_ids $3 tokens $4 now $5 max_lease_seconds $6 now + lease_seconds
    "heartbeat_many": "WITH "
    + _TARGETS
    + """, renewed AS (
    UPDATE {work} AS w SET lease_expires_at = LEAST($6::float8, w.claimed_at + $5::float8)
    FROM targets d
    WHERE """
    + _LIVE
    + """
    RETURNING d.ord, {work_cols_w}
)
SELECT d.ord, r.tenant, r.item_id, r.payload, r.priority, r.state, r.attempts,
       r.available_at, r.enqueued_at, r.dedupe_key, r.worker, r.lease_expires_at,
       r.last_error, r.token, r.claimed_at, r.dead_reason, r.dead_at, r.max_attempts, """
    + _PROBE
    + """
FROM targets d
LEFT JOIN renewed r ON r.ord = d.ord
LEFT JOIN {work} p ON p.tenant = d.tenant AND p.item_id = d.item_id
ORDER BY d.ord""",
    # $1 tenants $2 item_ids $3 tokens $4 now $5 max_lease_seconds
    "complete_many": "WITH "
    + _TARGETS
    + """, done AS (
    DELETE FROM {work} AS w USING targets d
    WHERE """
    + _LIVE
    + """
    RETURNING d.ord
)"""
    + tally("0", "-(SELECT count(*) FROM done)", "0")
    + """
SELECT d.ord, o.ord IS NOT NULL, """
    + _PROBE
    + """
FROM targets d
LEFT JOIN done o ON o.ord = d.ord
LEFT JOIN {work} p ON p.tenant = d.tenant AND p.item_id = d.item_id
ORDER BY d.ord""",
    # $1 tenants $2 item_ids $3 tokens $4 now $5 max_lease_seconds $6 wake channel: back to
    # ready at once, the attempt not counted; the tenants stay in (or join) the rotation. Each
    # lease's seq (readiness order) is drawn up front in batch order, as single releases in
    # that order would draw them (an UPDATE's nextval() follows the order it meets the rows).
    "release_many": "WITH "
    + _TARGETS_IN_ORDER
    + """, released AS (
    UPDATE {work} AS w
    SET state = 'ready', attempts = GREATEST(w.attempts - 1, 0), available_at = $4::float8,
        seq = d.seq, worker = NULL, token = NULL, claimed_at = NULL,
        lease_expires_at = NULL
    FROM targets d
    WHERE """
    + _LIVE
    + """
    RETURNING d.ord, w.tenant, w.state
), moved AS (SELECT r.tenant, r.state FROM released r)"""
    + JOIN_ROTATION
    + wake(6)
    + tally("(SELECT count(*) FROM released)", "-(SELECT count(*) FROM released)", "0")
    + """
SELECT d.ord, o.ord IS NOT NULL, """
    + _PROBE
    + """
FROM targets d
LEFT JOIN released o ON o.ord = d.ord
LEFT JOIN {work} p ON p.tenant = d.tenant AND p.item_id = d.item_id
CROSS JOIN woken
ORDER BY d.ord""",
}
# $1 now $2 worker $3 lease expiry $4 tenants to pass over $5 limit, then in the forms that
# reclaim ("claim_many[_<n>]_reclaim_retire") $6 reclaim jitters $7 backoff_base $8
# backoff_cap $9 policy max_attempts, then the tenants of earlier claims (NULL for none, see
# retire_drained()): $10, or $6 in the forms without the reclaim ("claim_many[_<n>]_retire").
# The batch form of "claim", lapsed leases reclaimed first the same way: up to $5 tenants with
# due work in turn order (their rotation rows locked SKIP LOCKED; when every such row is held,
# the same tenants unlocked, turns not advanced), due heads of each locked SKIP LOCKED (no
# more than the batch can take from one tenant when every other picked tenant gives one),
# then the first $5 by (rank in the tenant, turn): the order $5 single claims serve them in.
# Each served tenant's turn is advanced in the order of its last claim. One row per claimed
# item (pos set), and one per picked tenant that got none (its heads were all locked, or the
# batch was full); each says how many lapsed leases the statement took back (0 without the
# reclaim).
BATCHED_TEMPLATES.update(
    {
        claim_many_name(size, reclaiming): _claim_many(
            str(size) if size <= CLAIM_MANY_LITERAL_UP_TO else "$5::bigint", reclaiming
        )
        for size in range(1, CLAIM_MANY_LITERAL_UP_TO + 2)
        for reclaiming in (False, True)
    }
)
