"""Every SQL statement the PostgreSQL adapters send, rendered once per StateTables (no I/O).

Statements use PostgreSQL's native ``$n`` placeholders with an explicit cast on every use, so the
same text runs on psycopg (``RawCursor``) and on asyncpg, and the server never guesses a type.
Time is always a parameter: the adapters pass the injected clock's ``now``, never ``now()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from runyard._postgres_schema import StateTables

__all__ = ["RUN_COLUMN_COUNT", "WORK_COLUMN_COUNT", "Statements", "statements"]

_RUN_COLUMNS = (
    "tenant",
    "run_id",
    "blob::text",
    "version",
    "status",
    "session_id",
    "input_tokens",
    "output_tokens",
    "cost_micros",
    "iterations",
    '"cursor"',
    "created_at",
    "updated_at",
    "seq",
)
_WORK_COLUMNS = (
    "tenant",
    "item_id",
    "payload::text",
    "priority",
    "state",
    "attempts",
    "available_at",
    "enqueued_at",
    "dedupe_key",
    "worker",
    "lease_expires_at",
    "last_error",
    "token",
    "claimed_at",
    "dead_reason",
    "dead_at",
)
_SESSION_COLUMNS = ("tenant", "session_id", "blob::text", "version", "created_at", "updated_at")
RUN_COLUMN_COUNT = len(_RUN_COLUMNS)
WORK_COLUMN_COUNT = len(_WORK_COLUMNS)


def _cols(columns: tuple[str, ...], alias: str) -> str:
    return ", ".join(f"{alias}.{c}" for c in columns)


# A live lease on run ($1, $2) with epoch {fence} at time {now}; locked FOR SHARE so that a
# concurrent acquire (which bumps the epoch) waits for the write, or the write sees the new epoch.
_FENCE = """fence AS (
    SELECT 1 FROM {run_leases} l
    WHERE l.tenant = $1::text AND l.run_id = $2::text AND l.epoch = {fence}::bigint
      AND l.holder IS NOT NULL AND l.expires_at >= {now}::float8
    FOR SHARE
)"""

_TEMPLATES: dict[str, str] = {
    # -- runs ------------------------------------------------------------------------------
    # $1 tenant $2 run_id $3 blob $4 status $5 session_id $6 now $7 fence $8 expected version.
    # One statement for create (expected 0: INSERT ... ON CONFLICT DO NOTHING) and update
    # (UPDATE ... WHERE version = expected), both guarded by the fence. The written run comes
    # back in the first columns; when nothing was written, one row of NULLs followed by what
    # explains the refusal as this statement's snapshot saw it: (version, epoch, holder,
    # expires_at), the columns of probe_run.
    "put_run": "WITH "
    + _FENCE.format(run_leases="{run_leases}", fence="$7", now="$6")
    + """, updated AS (
    UPDATE {runs} AS r
    SET blob = $3::text::jsonb, version = r.version + 1, status = COALESCE($4::text, r.status),
        session_id = COALESCE($5::text, r.session_id), updated_at = $6::float8
    WHERE r.tenant = $1::text AND r.run_id = $2::text AND $8::bigint > 0
      AND r.version = $8::bigint
      AND ($7::bigint IS NULL OR EXISTS (SELECT 1 FROM fence))
    RETURNING {run_cols_r}
), inserted AS (
    INSERT INTO {runs} AS r
        (tenant, run_id, blob, version, status, session_id, created_at, updated_at)
    SELECT $1::text, $2::text, $3::text::jsonb, 1, $4::text, $5::text, $6::float8, $6::float8
    WHERE $8::bigint = 0 AND ($7::bigint IS NULL OR EXISTS (SELECT 1 FROM fence))
    ON CONFLICT (tenant, run_id) DO NOTHING
    RETURNING {run_cols_r}
), written AS (
    SELECT * FROM updated UNION ALL SELECT * FROM inserted
)
SELECT w.*, NULL::bigint, NULL::bigint, NULL::text, NULL::float8 FROM written w
UNION ALL
SELECT {run_nulls},
       (SELECT r.version FROM {runs} r WHERE r.tenant = $1::text AND r.run_id = $2::text),
       l.epoch, l.holder, l.expires_at
FROM (SELECT 1) AS one
LEFT JOIN {run_leases} l ON l.tenant = $1::text AND l.run_id = $2::text
WHERE NOT EXISTS (SELECT 1 FROM written)""",
    # $1 tenant $2 run_id $3..$7 deltas $8 status $9 now $10 fence
    "patch_run": "WITH "
    + _FENCE.format(run_leases="{run_leases}", fence="$10", now="$9")
    + """
UPDATE {runs} AS r
SET input_tokens = r.input_tokens + $3::bigint, output_tokens = r.output_tokens + $4::bigint,
    cost_micros = r.cost_micros + $5::bigint, iterations = r.iterations + $6::bigint,
    "cursor" = r."cursor" + $7::bigint, status = COALESCE($8::text, r.status),
    version = r.version + 1, updated_at = $9::float8
WHERE r.tenant = $1::text AND r.run_id = $2::text
  AND ($10::bigint IS NULL OR EXISTS (SELECT 1 FROM fence))
RETURNING {run_cols_r}""",
    # $1 tenant $2 run_id $3 expected version (or NULL) $4 fence $5 now
    "delete_run": "WITH "
    + _FENCE.format(run_leases="{run_leases}", fence="$4", now="$5")
    + """
DELETE FROM {runs} AS r
WHERE r.tenant = $1::text AND r.run_id = $2::text
  AND ($3::bigint IS NULL OR r.version = $3::bigint)
  AND ($4::bigint IS NULL OR EXISTS (SELECT 1 FROM fence))
RETURNING r.version""",
    # $1 tenant $2 run_id: the run's version and its lease, to explain a refused write
    "probe_run": """
SELECT (SELECT r.version FROM {runs} r WHERE r.tenant = $1::text AND r.run_id = $2::text),
       l.epoch, l.holder, l.expires_at
FROM (SELECT 1) AS one
LEFT JOIN {run_leases} l ON l.tenant = $1::text AND l.run_id = $2::text""",
    "get_run": """
SELECT {run_cols_r} FROM {runs} r WHERE r.tenant = $1::text AND r.run_id = $2::text""",
    # $1 tenant $2 after seq $3 status $4 session_id $5 limit (one more than the page)
    "list_runs": """
SELECT {run_cols_r} FROM {runs} r
WHERE r.tenant = $1::text AND r.seq > $2::bigint
  AND ($3::text IS NULL OR r.status = $3::text)
  AND ($4::text IS NULL OR r.session_id = $4::text)
ORDER BY r.seq
LIMIT $5::bigint""",
    # -- sessions --------------------------------------------------------------------------
    # $1 tenant $2 session_id $3 blob $4 now $5 expected version: one statement for create
    # (expected 0) and update. The written session, or one row of NULLs and the version this
    # statement's snapshot saw (NULL: none) when nothing was written.
    "put_session": """
WITH updated AS (
    UPDATE {sessions} AS s
    SET blob = $3::text::jsonb, version = s.version + 1, updated_at = $4::float8
    WHERE s.tenant = $1::text AND s.session_id = $2::text AND $5::bigint > 0
      AND s.version = $5::bigint
    RETURNING {session_cols_s}
), inserted AS (
    INSERT INTO {sessions} AS s (tenant, session_id, blob, version, created_at, updated_at)
    SELECT $1::text, $2::text, $3::text::jsonb, 1, $4::float8, $4::float8
    WHERE $5::bigint = 0
    ON CONFLICT (tenant, session_id) DO NOTHING
    RETURNING {session_cols_s}
), written AS (
    SELECT * FROM updated UNION ALL SELECT * FROM inserted
)
SELECT w.*, NULL::bigint FROM written w
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL,
       (SELECT s.version FROM {sessions} s
        WHERE s.tenant = $1::text AND s.session_id = $2::text)
WHERE NOT EXISTS (SELECT 1 FROM written)""",
    "get_session": """
SELECT s.tenant, s.session_id, s.blob::text, s.version, s.created_at, s.updated_at
FROM {sessions} s WHERE s.tenant = $1::text AND s.session_id = $2::text""",
    # $1 tenant $2 session_id $3 cascade: (runs deleted, sessions deleted, runs the session had)
    "delete_session": """
WITH doomed_runs AS (
    DELETE FROM {runs} r WHERE r.tenant = $1::text AND r.session_id = $2::text AND $3::boolean
    RETURNING 1
), doomed_session AS (
    DELETE FROM {sessions} s WHERE s.tenant = $1::text AND s.session_id = $2::text
      AND ($3::boolean OR NOT EXISTS (
          SELECT 1 FROM {runs} r WHERE r.tenant = $1::text AND r.session_id = $2::text))
    RETURNING 1
)
SELECT (SELECT count(*) FROM doomed_runs), (SELECT count(*) FROM doomed_session),
       (SELECT count(*) FROM {runs} r WHERE r.tenant = $1::text AND r.session_id = $2::text)""",
    # -- run leases ------------------------------------------------------------------------
    # $1 tenant $2 run_id $3 holder $4 now $5 expires_at
    "acquire_lease": """
INSERT INTO {run_leases} AS l (tenant, run_id, holder, epoch, expires_at)
VALUES ($1::text, $2::text, $3::text, 1, $5::float8)
ON CONFLICT (tenant, run_id) DO UPDATE
SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at,
    epoch = CASE WHEN l.holder IS NOT NULL AND l.expires_at >= $4::float8
                 THEN l.epoch ELSE l.epoch + 1 END
WHERE l.holder IS NULL OR l.expires_at < $4::float8 OR l.holder = EXCLUDED.holder
RETURNING l.tenant, l.run_id, l.holder, l.epoch, l.expires_at""",
    "get_lease": """
SELECT l.tenant, l.run_id, l.holder, l.epoch, l.expires_at FROM {run_leases} l
WHERE l.tenant = $1::text AND l.run_id = $2::text""",
    # $1 tenant $2 run_id $3 epoch $4 now $5 new expiry
    "renew_lease": """
UPDATE {run_leases} AS l SET expires_at = $5::float8
WHERE l.tenant = $1::text AND l.run_id = $2::text AND l.epoch = $3::bigint
  AND l.holder IS NOT NULL AND l.expires_at >= $4::float8
RETURNING l.tenant, l.run_id, l.holder, l.epoch, l.expires_at""",
    # $1 tenant $2 run_id $3 epoch: the epoch row stays, so the next holder gets epoch + 1
    "release_lease": """
UPDATE {run_leases} AS l SET holder = NULL, expires_at = NULL
WHERE l.tenant = $1::text AND l.run_id = $2::text AND l.epoch = $3::bigint
  AND l.holder IS NOT NULL
RETURNING l.epoch""",
    # -- work items ------------------------------------------------------------------------
    # $1 tenant $2 item_id $3 payload $4 priority $5 available_at $6 now $7 dedupe_key.
    # A new tenant's turn is the claim counter's current value; the tenant's ready count goes
    # up by the item inserted. A repeat returns the item already stored under the id (first)
    # or the live dedupe key, and counts nothing.
    "enqueue": """
WITH inserted AS (
    INSERT INTO {work} AS w
        (tenant, item_id, payload, priority, state, attempts, available_at, enqueued_at,
         dedupe_key)
    VALUES ($1::text, $2::text, $3::text::jsonb, $4::bigint, 'ready', 0, $5::float8,
            $6::float8, $7::text)
    ON CONFLICT DO NOTHING
    RETURNING {work_cols_w}
), counted AS (
    INSERT INTO {turns} AS t (tenant, turn, ready)
    SELECT i.tenant, (SELECT CASE WHEN c.is_called THEN c.last_value ELSE 0 END
                      FROM {turn_seq} c), 1
    FROM inserted i
    ON CONFLICT (tenant) DO UPDATE SET ready = t.ready + 1
)
SELECT true, i.* FROM inserted i
UNION ALL
SELECT false, e.* FROM (
    SELECT {work_cols_w} FROM {work} w
    WHERE w.tenant = $1::text AND (w.item_id = $2::text OR w.dedupe_key = $7::text)
    ORDER BY w.item_id = $2::text DESC
    LIMIT 1
) AS e
WHERE NOT EXISTS (SELECT 1 FROM inserted)""",
    # $1 tenant $2 item_id $3 dedupe_key: the stored item a repeated enqueue stands for
    "find_item": """
SELECT {work_cols_w} FROM {work} w
WHERE w.tenant = $1::text AND (w.item_id = $2::text OR w.dedupe_key = $3::text)
ORDER BY w.item_id = $2::text DESC
LIMIT 1""",
    # $1 now $2 worker $3 lease expiry $4 tenants to pass over (their due heads are locked).
    # One statement: the tenant with the oldest turn that has due work, its head row locked
    # SKIP LOCKED, every predicate repeated on the locked row, the claim written, the turn
    # advanced and the tenant's ready count lowered. The walk reads the turns index of tenants
    # with ready work only (idle tenants are not in it) and asks each one bounded question of
    # the (tenant, available_at) index (a delayed backlog is not walked). A row with a tenant
    # and no item means "that tenant's heads were all locked".
    "claim": """
WITH pick AS (
    SELECT t.tenant FROM {turns} t
    WHERE t.ready > 0 AND t.tenant <> ALL ($4::text[])
      AND EXISTS (
          SELECT 1 FROM {work} d
          WHERE d.tenant = t.tenant AND d.state = 'ready' AND d.available_at <= $1::float8)
    ORDER BY t.turn, t.tenant
    LIMIT 1
), head AS (
    SELECT w.tenant, w.item_id FROM {work} w
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
    FROM head h
    WHERE w.tenant = h.tenant AND w.item_id = h.item_id
      AND w.state = 'ready' AND w.available_at <= $1::float8
    RETURNING {work_cols_w}
), advanced AS (
    UPDATE {turns} AS t SET turn = nextval('{turn_seq}'), ready = t.ready - 1
    FROM claimed c WHERE t.tenant = c.tenant
)
SELECT p.tenant, c.* FROM pick p LEFT JOIN claimed c ON true""",
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
    # $8 error $9 dead reason. A retry counts the item ready again.
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
), counted AS (
    UPDATE {turns} AS t SET ready = t.ready + 1
    FROM failed f WHERE t.tenant = f.tenant AND f.state = 'ready'
)
SELECT * FROM failed""",
    # $1 now $2 limit: lapsed leases, oldest expiry first
    "lapsed": """
SELECT w.tenant, w.item_id, w.token, w.attempts FROM {work} w
WHERE w.state = 'leased' AND w.lease_expires_at < $1::float8
ORDER BY w.lease_expires_at, w.token
LIMIT $2::bigint""",
    # $1 now $2 tenants $3 item_ids $4 tokens $5 new states $6 retry_at $7 reasons $8 error.
    # Rows another session holds are skipped; every lapse predicate is repeated; items made
    # ready again are counted in their tenants' ready counts.
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
), counted AS (
    UPDATE {turns} AS t SET ready = t.ready + n.items
    FROM (SELECT r.tenant, count(*) AS items FROM reaped r WHERE r.state = 'ready'
          GROUP BY r.tenant) AS n
    WHERE t.tenant = n.tenant
)
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
), counted AS (
    UPDATE {turns} AS t SET ready = t.ready + 1
    FROM requeued r WHERE t.tenant = r.tenant
)
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
    # -- verify ----------------------------------------------------------------------------
    # $1 relation names: the statement timeout and the relations that do not exist
    "verify_relations": """
SELECT current_setting('statement_timeout'),
       ARRAY(SELECT n FROM unnest($1::text[]) AS n WHERE to_regclass(n) IS NULL)""",
    "verify_versions": """
SELECT v.component, v.version FROM {schema_table} v""",
}


@dataclass(frozen=True)
class Statements:
    """The statement texts for one StateTables, looked up by name (``statements.claim``)."""

    texts: dict[str, str]

    def __getattr__(self, name: str) -> str:
        try:
            return self.texts[name]
        except KeyError:
            raise AttributeError(name) from None


@cache
def statements(tables: StateTables) -> Statements:
    """Return every statement rendered for ``tables`` (cached per StateTables)."""
    values = tables.placeholders()
    values["run_cols_r"] = _cols(_RUN_COLUMNS, "r")
    values["work_cols_w"] = _cols(_WORK_COLUMNS, "w")
    values["session_cols_s"] = _cols(_SESSION_COLUMNS, "s")
    values["run_nulls"] = ", ".join(["NULL"] * RUN_COLUMN_COUNT)
    return Statements({name: text.format_map(values).strip() for name, text in _TEMPLATES.items()})
