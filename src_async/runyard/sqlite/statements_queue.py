"""Every SQL statement of the SQLite work queue, rendered once per SqliteTables (no I/O).

Tenant turns and the counters (tokens, turns) are kept by the schema's triggers inside the writing
statement (a new tenant's row on insert, its turn and the counters on claim), so enqueue and
claim are one statement each inside their ``BEGIN IMMEDIATE`` transaction.
"""

from __future__ import annotations

from functools import cache

from runyard.sqlite.schema import SqliteTables, named_indexes, render

__all__ = ["WORK_COLUMNS", "queue_statements"]

WORK_COLUMNS = (
    "tenant, item_id, payload, priority, state, attempts, available_at, enqueued_at, "
    "dedupe_key, worker, lease_expires_at, last_error, token, claimed_at, dead_reason, dead_at, "
    "max_attempts"
)


def _next_ready(priority: str, available_at: str, tenant: str = "{work}.tenant") -> str:
    """The readiness order of an item becoming ready: after every ready item it ties with
    (same tenant, priority and due time), the only items ready_seq orders it against. One
    seek at the end of that group in the claim's index (no index over all the orders)."""
    return f"""(SELECT COALESCE(MAX(r.ready_seq), 0) + 1 FROM {{work}} r
     WHERE r.tenant = {tenant} AND r.state = 'ready' AND r.priority = {priority}
       AND r.available_at = {available_at})"""


_WORK = "{work}"
# A lease that is live and ``:token``'s at ``:now`` (the memory backend's refusal order is
# rebuilt from probe_item when this does not hold).
_LIVE = """tenant = :tenant AND item_id = :item_id AND token = :token AND state = 'leased'
  AND :now < claimed_at + :max_lease AND :now <= lease_expires_at"""

_TEMPLATES: dict[str, str] = {
    # No RETURNING: enqueue binds a pinned :now and the due time it computed from it
    # (runyard.sqlite.rows.due_at), so a new item is what it sent and times it knows
    # (runyard.sqlite.rows.entered_item), and the insert's change count says whether
    # it was new. RETURNING cost a quarter of the statement: SQLite keeps the rows it returns
    # in a temporary table until the statement ends (217k instructions with every work column,
    # 187k with the two times, 165k without).
    "enqueue": f"""
INSERT INTO {{work}} (tenant, item_id, payload, priority, state, attempts, available_at,
                      enqueued_at, ready_seq, dedupe_key, max_attempts)
VALUES (:tenant, :item_id, :payload, :priority, 'ready', 0,
        :available_at, :now, {_next_ready(":priority", ":available_at", ":tenant")},
        :dedupe_key,
        :max_attempts)
ON CONFLICT DO NOTHING""",
    # The stored item a repeated enqueue stands for: by id first, then by live dedupe key.
    "find_item": f"""
SELECT {WORK_COLUMNS} FROM {{work}}
WHERE tenant = :tenant AND (item_id = :item_id OR dedupe_key = :dedupe_key)
ORDER BY item_id = :item_id DESC
LIMIT 1""",
    # The tenant with the oldest turn that has due work, its head item, claimed in one
    # statement; the trigger advances the counters and the tenant's turn. The head is the first
    # due entry of the tenant's priority-first index, read in index order (no sort): INDEXED BY
    # holds the plan whatever the statistics say. It steps over the tenant's not-yet-due items
    # of a higher priority than the head's.
    "claim": f"""
UPDATE {{work}}
SET state = 'leased', attempts = attempts + 1, worker = :worker, claimed_at = :now,
    lease_expires_at = :now + :lease_seconds,
    token = (SELECT c.claims + 1 FROM {{counters}} c WHERE c.id = 1)
WHERE rowid = (
    SELECT w.rowid FROM {{work}} w INDEXED BY {{work_ready}}
    WHERE w.state = 'ready' AND w.available_at <= :now AND w.tenant = (
        SELECT t.tenant FROM {{turns}} t
        WHERE EXISTS (
            SELECT 1 FROM {{work}} d INDEXED BY {{work_due}}
            WHERE d.tenant = t.tenant AND d.state = 'ready' AND d.available_at <= :now)
        ORDER BY t.turn, t.tenant
        LIMIT 1)
    ORDER BY w.priority DESC, w.available_at, w.ready_seq
    LIMIT 1)
RETURNING {WORK_COLUMNS}""",
    "probe_item": """
SELECT token, state, claimed_at, lease_expires_at, attempts, max_attempts, worker FROM {work}
WHERE tenant = :tenant AND item_id = :item_id""",
    "heartbeat": f"""
UPDATE {{work}} SET lease_expires_at = MIN(:now + :lease_seconds, claimed_at + :max_lease)
WHERE {_LIVE}
RETURNING {WORK_COLUMNS}""",
    "complete": f"""
DELETE FROM {{work}} WHERE {_LIVE}
RETURNING item_id""",
    # Back to ready at once, the attempt not counted (a worker handing back what it holds).
    "release": f"""
UPDATE {{work}}
SET state = 'ready', attempts = MAX(attempts - 1, 0), available_at = :now,
    ready_seq = {_next_ready(f"{_WORK}.priority", ":now")}, worker = NULL, token = NULL,
    claimed_at = NULL,
    lease_expires_at = NULL
WHERE {_LIVE}
RETURNING item_id""",
    "retry": f"""
UPDATE {{work}}
SET state = 'ready', available_at = :retry_at,
    ready_seq = {_next_ready(f"{_WORK}.priority", ":retry_at")}, worker = NULL,
    token = NULL, claimed_at = NULL, lease_expires_at = NULL,
    last_error = COALESCE(:error, last_error)
WHERE tenant = :tenant AND item_id = :item_id AND token = :token AND state = 'leased'
RETURNING {WORK_COLUMNS}""",
    "kill": f"""
UPDATE {{work}}
SET state = 'dead', worker = NULL, token = NULL, claimed_at = NULL, lease_expires_at = NULL,
    last_error = COALESCE(:error, last_error), dead_reason = :reason, dead_at = :now
WHERE tenant = :tenant AND item_id = :item_id AND token = :token AND state = 'leased'
RETURNING {WORK_COLUMNS}""",
    # Lapsed leases, oldest expiry first.
    "lapsed": """
SELECT tenant, item_id, token, attempts, max_attempts FROM {work}
WHERE state = 'leased' AND lease_expires_at < :now
ORDER BY lease_expires_at, token
LIMIT :limit""",
    # A worker's live, renewable leases, in claim order.
    "held": """
SELECT tenant, item_id, token FROM {work}
WHERE worker = :worker AND state = 'leased' AND :now <= lease_expires_at
  AND :now < claimed_at + :max_lease
ORDER BY token
LIMIT :limit""",
    # A fresh fencing token for an adopted lease (adopt is no claim: no turn moves).
    "mint": """
UPDATE {counters} SET claims = claims + 1 WHERE id = 1 RETURNING claims""",
    "adopt": f"""
UPDATE {{work}}
SET token = :new_token, lease_expires_at = MIN(:now + :lease_seconds, claimed_at + :max_lease)
WHERE {_LIVE}
RETURNING {WORK_COLUMNS}""",
    "cancel": """
DELETE FROM {work}
WHERE tenant = :tenant AND item_id = :item_id AND state != 'leased'
RETURNING item_id""",
    "purge_dead": """
DELETE FROM {work}
WHERE rowid IN (
    SELECT rowid FROM {work}
    WHERE tenant = :tenant AND state = 'dead' AND dead_at <= :now - :older_than
    ORDER BY dead_at, item_id
    LIMIT :limit)
RETURNING item_id""",
    # Every claim first puts back the parked tenants whose first due time came, oldest due
    # first, a bounded round (runyard.sqlite.queue_transactions.claim_body); the first column
    # is the call's time, read here once (a row of it alone when none is due).
    "parked_due": """
WITH n(now) AS (SELECT :now)
SELECT n.now, p.tenant, p.turn FROM n LEFT JOIN (
    SELECT tenant, turn FROM {turns_parked} INDEXED BY {turns_parked_due}
    WHERE due_at IS NOT NULL AND due_at <= (SELECT now FROM n)
    ORDER BY due_at, tenant
    LIMIT :limit) p""",
    # A claim that found nothing due parks the first 64 tenants of the rotation (none has due
    # work), as the schema's park trigger parks those a claim steps over (the parked table's
    # trigger takes each out of the rotation).
    "park_front": """
INSERT OR REPLACE INTO {turns_parked} (tenant, turn, due_at)
SELECT t.tenant, t.turn,
       (SELECT MIN(d.available_at) FROM {work} d WHERE d.tenant = t.tenant AND d.state = 'ready')
FROM {turns} t
ORDER BY t.turn, t.tenant
LIMIT 64""",
    # Back in the rotation with its turn (the turns table's trigger unparks it).
    "unpark": """
INSERT OR REPLACE INTO {turns} (tenant, turn) VALUES (:tenant, :turn)""",
    # prune walks the turns from a cursor, least recently served first, a bounded slice a call:
    # the rotation's and the parked tenants' (two index ranges merged).
    "turns_after": """
SELECT turn, tenant FROM (
    SELECT turn, tenant FROM {turns} WHERE (turn, tenant) > (:turn, :tenant)
    UNION ALL
    SELECT turn, tenant FROM {turns_parked} WHERE (turn, tenant) > (:turn, :tenant))
ORDER BY turn, tenant
LIMIT :scan""",
    "forget_idle": """
DELETE FROM {turns}
WHERE tenant = :tenant AND NOT EXISTS (SELECT 1 FROM {work} w WHERE w.tenant = :tenant)
RETURNING tenant""",
    "forget_idle_parked": """
DELETE FROM {turns_parked}
WHERE tenant = :tenant AND NOT EXISTS (SELECT 1 FROM {work} w WHERE w.tenant = :tenant)
RETURNING tenant""",
    "dead_letters": f"""
SELECT {WORK_COLUMNS} FROM {{work}}
WHERE tenant = :tenant AND state = 'dead'
ORDER BY dead_at, item_id
LIMIT :limit""",
    "requeue": f"""
UPDATE {{work}}
SET state = 'ready', attempts = 0, available_at = :now,
    ready_seq = {_next_ready(f"{_WORK}.priority", ":now")},
    dead_reason = NULL, dead_at = NULL
WHERE tenant = :tenant AND item_id = :item_id AND state = 'dead'
RETURNING {WORK_COLUMNS}""",
    "get_item": f"""
SELECT {WORK_COLUMNS} FROM {{work}} WHERE tenant = :tenant AND item_id = :item_id""",
    "stats": """
SELECT COALESCE(SUM(state = 'ready' AND available_at <= :now), 0),
       COALESCE(SUM(state = 'ready' AND available_at > :now), 0),
       COALESCE(SUM(state = 'leased'), 0),
       COALESCE(SUM(state = 'dead'), 0),
       COUNT(DISTINCT CASE WHEN state = 'ready' AND available_at <= :now THEN tenant END)
FROM {work}""",
}


@cache
def queue_statements(tables: SqliteTables) -> dict[str, str]:
    """Return the work queue's statements rendered for ``tables`` (cached per SqliteTables)."""
    return render(_TEMPLATES, tables, named_indexes(tables, "queue"))
