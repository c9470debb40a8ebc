"""Fragments the work queue's statements share: the rotation join, the due test, the wake-up,
and the pieces a single call and its batched form (``*_many``) have in common."""

from __future__ import annotations

from runyard.policy import RECLAIM_PER_CLAIM

__all__ = [
    "DUE_TENANT",
    "ENQUEUED",
    "INSERT_WORK",
    "JOIN_ROTATION",
    "JOIN_ROTATION_IN_CLAIM",
    "LEASE",
    "PARK_PER_CLAIM",
    "UNPARK_PER_CLAIM",
    "claim_tally",
    "delayed",
    "park_ahead",
    "pick_tenants",
    "reclaim",
    "reply_filter",
    "retire_drained",
    "tally",
    "unpark",
    "wake",
]

# Items that moved into state 'ready' (the CTE named "moved", with tenant and state columns)
# keep their tenant in the rotation: a tenant that has a row gets FOR KEY SHARE on it (no claim
# waits on that lock; a concurrent retire or park skips the row), a tenant without one is
# inserted with the turn {turns_rejoin} gives: its parked turn when it was parked (the parked
# row removed, read with a fresh snapshot: a park that committed while this statement waited
# for the row is seen; claims skip a parked row another session holds), else the claim
# counter's current value (the back of the rotation).
JOIN_ROTATION = """, held AS (
    SELECT t.tenant FROM {turns} t
    WHERE t.tenant IN (SELECT m.tenant FROM moved m WHERE m.state = 'ready')
    FOR KEY SHARE OF t
), joined AS (
    INSERT INTO {turns} AS t (tenant, turn)
    SELECT x.tenant, {turns_rejoin}(x.tenant, (
        SELECT CASE WHEN c.is_called THEN c.last_value ELSE 0 END FROM {turn_seq} c))
    FROM (
        SELECT DISTINCT m.tenant FROM moved m
        WHERE m.state = 'ready' AND m.tenant NOT IN (SELECT h.tenant FROM held h)
    ) AS x
    ON CONFLICT (tenant) DO UPDATE SET turn = t.turn
)"""

# The same for a claim, which may also advance (update) a rotation row in the same statement:
# a row this statement updated can be neither locked again nor updated by ON CONFLICT, so a
# row that exists is left alone (the claim holds it, or it had no part in the claim).
JOIN_ROTATION_IN_CLAIM = JOIN_ROTATION.replace(
    "ON CONFLICT (tenant) DO UPDATE SET turn = t.turn", "ON CONFLICT (tenant) DO NOTHING"
)

# "Does the rotation row t's tenant have due work?" (now is $1): one entry of the
# (tenant, available_at) index, ORDER BY ... LIMIT 1, the only plan that serves it without
# reading the tenant's backlog, so the plan is the same with or without statistics.
# The predicate of the work table's _due index, stated whole by the probes that read it (its
# priority bound, true of every row runyard writes, keeps every other statement off it: see
# the schema, queue version 4).
DUE = "d.state = 'ready' AND d.priority > -9223372036854775808"
DUE_TENANT = f"""(SELECT d.available_at FROM {{work}} d
           WHERE d.tenant = t.tenant AND {DUE}
           ORDER BY d.available_at LIMIT 1) <= $1::float8"""


def wake(channel: int) -> str:
    """The CTE "woken": ``pg_notify`` on the wake channel (parameter ``$channel``, NULL for
    none) when the CTE "moved" holds a row; PostgreSQL delivers it at commit. Join it (it has
    one row) into the final SELECT so that it runs."""
    return f""", woken AS (
    SELECT CASE WHEN ${channel}::text IS NOT NULL AND EXISTS (SELECT 1 FROM moved)
                THEN pg_notify(${channel}::text, '') END AS sent
)"""


def reclaim(jitter: int, base: int, cap: int, budget: int) -> str:
    """The CTEs "reclaimable", "reclaimed", "moved" (with the rotation join) and "delayed"
    that take back up to RECLAIM_PER_CLAIM lapsed leases (now is $1) before a claim, as
    reap does (none when ``$jitter`` is NULL; else it holds RECLAIM_PER_CLAIM draws): oldest
    expiry first, rows another session holds skipped, the attempt counted; dead when
    attempts reach the item's max_attempts (else the policy's, ``$budget``), otherwise ready
    after the policy's backoff, ``min($cap, $base * 2^(attempts-1)) * $jitter[k]`` (the
    jitter drawn by the client from policy.random). A reclaimed item is thus
    delayed, and this statement's snapshot still sees it leased, so this statement never
    serves it; one due at once (a zero backoff) makes the reply ask for the claim to be sent
    again (reply_filter), so the same call serves it.

    The limit is a constant, not the array's length: a parameter as LIMIT is costed as a
    tenth of the rows the planner guesses, so on a large table never analyzed the generic
    plan looked dearer than the custom ones and the plan cache planned every claim afresh
    (custom plans from about 300,000 items on: about 1 ms of planning per claim at 1,000,000)."""
    spent = f"w.attempts >= COALESCE(w.max_attempts, ${budget}::integer)"
    return (
        f"""reclaimable AS (
    SELECT w.ctid AS row_id, w.lease_expires_at, w.token FROM {{work}} w
    WHERE ${jitter}::float8[] IS NOT NULL
      AND w.state = 'leased' AND w.lease_expires_at < $1::float8
    ORDER BY w.lease_expires_at, w.token
    LIMIT {RECLAIM_PER_CLAIM}
    FOR UPDATE OF w SKIP LOCKED
), reclaimed AS (
    UPDATE {{work}} AS w
    SET state = CASE WHEN {spent} THEN 'dead' ELSE 'ready' END,
        available_at = CASE WHEN {spent} THEN w.available_at
            ELSE $1::float8 + LEAST(${cap}::float8, ${base}::float8
                 * power(2::float8, LEAST(GREATEST(w.attempts - 1, 0), 1000)))
                 * (${jitter}::float8[])[n.k] END,
        seq = nextval('{{work_seq}}'), worker = NULL, token = NULL, claimed_at = NULL,
        lease_expires_at = NULL, last_error = 'lease lapsed',
        dead_reason = CASE WHEN {spent} THEN format('lease lapsed on attempt %s of %s',
            w.attempts, COALESCE(w.max_attempts, ${budget}::integer)) END,
        dead_at = CASE WHEN {spent} THEN $1::float8 END
    FROM (SELECT r.row_id, row_number() OVER (ORDER BY r.lease_expires_at, r.token) AS k
          FROM reclaimable r) AS n
    WHERE w.ctid = n.row_id AND w.state = 'leased' AND w.lease_expires_at < $1::float8
    RETURNING w.tenant, w.state, w.available_at
), moved AS (SELECT m.tenant, m.state FROM reclaimed m)"""
        + JOIN_ROTATION_IN_CLAIM
        + delayed("reclaimed", "$1::float8")
    )


def retire_drained(tenants: int) -> str:
    """The CTE "retired": of the tenants in ``$tenants`` (text[], NULL for none), those the
    client's earlier claims served, each one that this statement's snapshot shows without an
    item in state 'ready' (DUE_TENANT's probe, one index entry) is handed to {turns_retire},
    which leaves the rotation if the tenant still has none in a fresh snapshot (so it sees
    what committed after this statement began; a row another session holds is skipped, never
    waited on). The tenants this statement picked are left alone: their rows are locked and
    advanced here, and the client passes them again. Reading "pick" first orders the two.
    The final SELECT runs it (reply_filter), whether or not anything is due."""
    return f""", retired AS (
    SELECT {{turns_retire}}(r.tenant) AS gone FROM unnest(${tenants}::text[]) AS r(tenant)
    WHERE r.tenant <> ALL (ARRAY(SELECT p.tenant FROM pick p))
      AND (SELECT d.available_at FROM {{work}} d
           WHERE d.tenant = r.tenant AND {DUE}
           ORDER BY d.available_at LIMIT 1) IS NULL
)"""


# Tenants a claim parks (see park_ahead), and puts back from the parked table (see UNPARK), at
# most per statement.
PARK_PER_CLAIM = 64
UNPARK_PER_CLAIM = 256


def unpark() -> str:
    """The CTEs "waking", "unparked" and "unjoined" of a claim (now $1): up to
    UNPARK_PER_CLAIM parked tenants whose due time has come (oldest due first; a row another
    session holds is skipped, never waited on) go back into the rotation with their turns.
    This statement's snapshot does not see the rows it inserts, so when "unparked" put one
    back the claim picks no tenant (pick_tenants) and its reply says so (reply_filter): the
    client sends the claim again, which serves the woken tenants in turn order with the
    others. The rows are found by ctid, so no plan of the DELETE can read the whole table.

    A claim inside the caller's transaction (bound()) puts back too, as it retires drained
    tenants there: until that transaction ends, the tenants it put back are hidden from other
    claims and an enqueue for one of them waits for it. Not putting them back would leave their
    due work to the next claim outside a transaction, never served where all claims are
    bound."""
    return f"""waking AS (
    SELECT p.ctid AS row_id FROM {{turns_parked}} p
    WHERE p.due_at <= $1::float8
    ORDER BY p.due_at
    LIMIT {UNPARK_PER_CLAIM}
    FOR UPDATE OF p SKIP LOCKED
), unparked AS (
    DELETE FROM {{turns_parked}} AS p
    WHERE p.ctid = ANY (ARRAY(SELECT w.row_id FROM waking w)) AND p.due_at <= $1::float8
    RETURNING p.tenant, p.turn
), unjoined AS (
    INSERT INTO {{turns}} AS t (tenant, turn)
    SELECT u.tenant, u.turn FROM unparked u
    ON CONFLICT (tenant) DO NOTHING
)"""


def park_ahead(parking: int, reclaiming: bool) -> str:
    """The CTEs "bound", "ahead" and "parked" of a claim (now $1, after "pick"; nothing
    parked when ``$parking`` is false: a claim inside the caller's transaction, bound(), would
    hold the rotation rows it parks until that transaction ends, and enqueues for those
    tenants would wait for it): up to
    PARK_PER_CLAIM tenants ahead of the first one picked (all, when none is) in turn order
    that show no due item in this statement's snapshot are handed to {turns_park}, which
    parks each one still without a due item in a fresh snapshot (or retires it when it has no
    ready item at all); a held row is skipped. When ``reclaiming``, a tenant whose lapsed lease
    this statement took back (the CTE "moved") is left alone: its item is ready again for later,
    and the rotation join after this would give it a new turn. The walk is a range of the
    (turn, tenant) index
    up to the pick, whose rows are the tenants the pick stepped over: bounded by what the pick
    itself read. Run by the final SELECT's filter (reply_filter)."""
    moved = "\n      AND t.tenant NOT IN (SELECT m.tenant FROM moved m)" if reclaiming else ""
    return f""", bound AS (
    SELECT b.turn, b.tenant FROM (
        SELECT p.turn, p.tenant FROM pick p
        UNION ALL
        SELECT 9223372036854775807::bigint, ''::text
    ) AS b
    ORDER BY b.turn, b.tenant
    LIMIT 1
), ahead AS (
    SELECT t.tenant FROM {{turns}} t
    WHERE ${parking}::boolean
      AND (t.turn, t.tenant) < ((SELECT b.turn FROM bound b), (SELECT b.tenant FROM bound b))
      AND NOT COALESCE({DUE_TENANT}, false){moved}
    ORDER BY t.turn, t.tenant
    LIMIT {PARK_PER_CLAIM}
), parked AS (
    SELECT {{turns_park}}(a.tenant, $1::float8) AS moved FROM ahead a
)"""


# "Did the reclaim (the CTE "reclaimed") take back a lease whose item is due at once (now is
# $1; a zero backoff)?" This statement's snapshot still sees such an item leased: the claim
# picks no tenant (pick_tenants) and its reply asks to be sent again (reply_filter).
RECLAIMED_DUE = (
    "EXISTS (SELECT 1 FROM reclaimed r WHERE r.state = 'ready' AND r.available_at <= $1::float8)"
)


def reply_filter(retiring: bool, reclaiming: bool = False) -> str:
    """The WHERE of a claim's final SELECT (which reads ``one LEFT JOIN pick p``): a row per
    picked tenant, or one row without a tenant when the claim put parked tenants back or, when
    ``reclaiming``, took back a lapsed lease whose item is due at once (a zero backoff): this
    statement's snapshot sees neither and it picked no tenant (pick_tenants), so the client
    sends it again, which serves them in the same call, as on every other backend; and
    one-time filters,
    evaluated before any row is read, that run "parked" and, when ``retiring``, "retired",
    whether or not anything is due."""
    due_again = f"\n       OR {RECLAIMED_DUE}" if reclaiming else ""
    return f"""
WHERE (p.tenant IS NOT NULL OR EXISTS (SELECT 1 FROM unparked){due_again})
  AND (SELECT count(*) FROM parked) >= 0""" + (
        "\n  AND (SELECT count(*) FROM retired) >= 0" if retiring else ""
    )


_CHANGED = "EXISTS (SELECT 1 FROM tally t WHERE t.ready <> 0 OR t.leased <> 0 OR t.dead <> 0)"


def tally(ready: str, leased: str, dead: str) -> str:
    """The CTEs that add a statement's changes to the maintained counts (see schema.sql): the
    expressions give the change of ready, leased and dead items (read from the statement's
    data-modifying CTEs). The row is the backend's own (shard ``pg_backend_pid() % 16``) when
    no other session holds it, else the first one no other session holds from there on (the
    second branch runs only when the first finds nothing: it reads and sorts every row); when
    all are held, a new row (so the table has 16 rows, or the most ever locked at once: see
    docs/postgres.md, ``stats``). Nothing is written for no change. Trying the backend's own row
    first, instead of reading and sorting them all each time, brought the server's cost of a
    bare claim with the queue's complete to about that of the same pair without counts
    (docs/postgres.md, "The server's side")."""
    return f""", tally AS (
    SELECT ({ready})::bigint AS ready, ({leased})::bigint AS leased, ({dead})::bigint AS dead
), slot AS (
    SELECT s.shard FROM (
        SELECT o.shard FROM (
            SELECT c.shard FROM {{counts}} c
            WHERE c.shard = pg_backend_pid() % 16 AND {_CHANGED}
            FOR UPDATE OF c SKIP LOCKED
        ) AS o
        UNION ALL
        SELECT a.shard FROM (
            SELECT c.shard FROM {{counts}} c
            WHERE {_CHANGED}
            ORDER BY c.shard < pg_backend_pid() % 16, c.shard
            LIMIT 1
            FOR UPDATE OF c SKIP LOCKED
        ) AS a
    ) AS s
    LIMIT 1
), counted AS (
    UPDATE {{counts}} AS c
    SET ready = c.ready + t.ready, leased = c.leased + t.leased, dead = c.dead + t.dead
    FROM tally t WHERE c.shard = (SELECT s.shard FROM slot s)
), spilled AS (
    INSERT INTO {{counts}} (shard, ready, leased, dead)
    SELECT nextval('{{counts_seq}}'), t.ready, t.leased, t.dead FROM tally t
    WHERE (t.ready <> 0 OR t.leased <> 0 OR t.dead <> 0) AND NOT EXISTS (SELECT 1 FROM slot)
)"""


def delayed(source: str, now: str) -> str:
    """The CTE "delayed": +1 in the delays ledger at the due time of each row of ``source``
    (with state and available_at columns) that became ready for later than ``now``."""
    return f""", delayed AS (
    INSERT INTO {{delays}} (available_at, n)
    SELECT x.available_at, 1 FROM {source} x
    WHERE x.state = 'ready' AND x.available_at > {now}
)"""


# The head of an enqueue's INSERT (single or batched).
INSERT_WORK = """INSERT INTO {work} AS w
        (tenant, item_id, payload, priority, state, attempts, available_at, enqueued_at,
         dedupe_key, max_attempts)"""

# The SET of a claim (now $1, worker $2, lease expiry $3) on the work row w.
LEASE = """SET state = 'leased', attempts = w.attempts + 1, worker = $2::text,
        token = nextval('{token_seq}'), claimed_at = $1::float8,
        lease_expires_at = $3::float8"""


def pick_tenants(limit: str, columns: str, reclaiming: bool = False) -> str:
    """The CTEs of unpark(), then "owned", "shared" and "pick" of a claim (now $1,
    tenants to pass over $4): none when unpark() put parked tenants back, or (when
    ``reclaiming``) when the reclaim took back a lease whose item is due at once (a zero
    backoff: this statement's snapshot still sees it leased, so the client sends the claim
    again, and that statement serves every due item in the rotation's order, as every other
    backend's claim does; see reply_filter); else up to
    ``limit`` tenants with due work in turn order whose rotation rows no other session holds
    (locked FOR NO KEY UPDATE SKIP LOCKED); when every such row is held, the same tenants
    unlocked (their turns are not advanced). ``columns`` are the rotation columns
    (of ``t``) each CTE carries; pick adds ``owned``."""
    picked = ", ".join(f"{{alias}}.{c}" for c in columns.split(", "))
    owned, shared = picked.format(alias="o"), picked.format(alias="s")
    chosen = ", ".join(f"t.{c}" for c in columns.split(", "))
    held_back = f"\n      AND NOT {RECLAIMED_DUE}" if reclaiming else ""
    return (
        unpark()
        + f""", owned AS (
    SELECT {chosen} FROM {{turns}} t
    WHERE NOT EXISTS (SELECT 1 FROM unparked){held_back}
      AND t.tenant <> ALL ($4::text[]) AND {DUE_TENANT}
    ORDER BY t.turn, t.tenant
    LIMIT {limit}
    FOR NO KEY UPDATE OF t SKIP LOCKED
), shared AS (
    SELECT {chosen} FROM {{turns}} t
    WHERE NOT EXISTS (SELECT 1 FROM unparked) AND NOT EXISTS (SELECT 1 FROM owned){held_back}
      AND t.tenant <> ALL ($4::text[]) AND {DUE_TENANT}
    ORDER BY t.turn, t.tenant
    LIMIT {limit}
), pick AS (
    SELECT {owned}, true AS owned FROM owned o
    UNION ALL
    SELECT {shared}, false AS owned FROM shared s
)"""
    )


# The rotation, wake-up, delays and counts of an enqueue (single or batched): now $6, wake
# channel $9, the inserted rows in the CTE "moved".
ENQUEUED = (
    JOIN_ROTATION
    + wake(9)
    + delayed("moved", "$6::float8")
    + tally("(SELECT count(*) FROM moved)", "0", "0")
)


def claim_tally(reclaiming: bool) -> str:
    """The counts a claim changes (single or batched): the claimed items leased and, when
    ``reclaiming`` (the CTE "reclaimed" exists), reclaimed leases back to ready or dead."""
    if not reclaiming:
        return tally("-(SELECT count(*) FROM claimed k)", "(SELECT count(*) FROM claimed k)", "0")
    return tally(
        "(SELECT count(*) FROM reclaimed r WHERE r.state = 'ready')"
        " - (SELECT count(*) FROM claimed k)",
        "(SELECT count(*) FROM claimed k) - (SELECT count(*) FROM reclaimed r)",
        "(SELECT count(*) FROM reclaimed r WHERE r.state = 'dead')",
    )
