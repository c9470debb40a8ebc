"""The state store's statements (runs, sessions, run leases, verify), as templates."""

from __future__ import annotations

__all__ = ["FENCE", "RUN_HINT", "STATE_TEMPLATES"]

# pg_notify of a hint about run ($1, $2) ({channel} NULL: none) in the writing statement:
# delivered at commit, never for a rolled-back write. The payload is ``[tenant, run_id, n]``
# (n: the appended event's seq; for put_run/patch_run, the run's version).
RUN_HINT = """CASE WHEN {channel}::text IS NULL THEN 0 ELSE length(pg_notify({channel}::text,
    json_build_array($1::text, $2::text, {n})::text)::text) END"""

# A live lease on run ($1, $2) with epoch {fence} at time {now}; locked FOR SHARE so that a
# concurrent acquire (which bumps the epoch) waits for the write, or the write sees the new epoch.
FENCE = """fence AS (
    SELECT 1 FROM {run_leases} l
    WHERE l.tenant = $1::text AND l.run_id = $2::text AND l.epoch = {fence}::bigint
      AND l.holder IS NOT NULL AND l.expires_at >= {now}::float8
    FOR SHARE
)"""


STATE_TEMPLATES: dict[str, str] = {
    # -- runs ------------------------------------------------------------------------------
    # $1 tenant $2 run_id $3 blob $4 status $5 session_id $6 now $7 fence $8 expected version
    # $9 write id $10 hint channel (NULL: none; set when the status is terminal).
    # One statement for create (expected 0: INSERT ... ON CONFLICT DO NOTHING) and update
    # (UPDATE ... WHERE version = expected), both guarded by the fence. The written run comes
    # back in the first columns; when nothing was written, one row of NULLs followed by what
    # explains the refusal as this statement's snapshot saw it: (version, epoch, holder,
    # expires_at), the columns of probe_run, then the run's write id. A last column is the
    # hint's (ignored).
    "put_run": "WITH "
    + FENCE.format(run_leases="{run_leases}", fence="$7", now="$6")
    + """, updated AS (
    UPDATE {runs} AS r
    SET blob = $3::text, version = r.version + 1, status = COALESCE($4::text, r.status),
        session_id = COALESCE($5::text, r.session_id), updated_at = $6::float8,
        write_id = $9::text
    WHERE r.tenant = $1::text AND r.run_id = $2::text AND $8::bigint > 0
      AND r.version = $8::bigint
      AND ($7::bigint IS NULL OR EXISTS (SELECT 1 FROM fence))
    RETURNING {run_cols_r}
), inserted AS (
    INSERT INTO {runs} AS r
        (tenant, run_id, blob, version, status, session_id, created_at, updated_at, write_id)
    SELECT $1::text, $2::text, $3::text, 1, $4::text, $5::text, $6::float8, $6::float8,
           $9::text
    WHERE $8::bigint = 0 AND ($7::bigint IS NULL OR EXISTS (SELECT 1 FROM fence))
    ON CONFLICT (tenant, run_id) DO NOTHING
    RETURNING {run_cols_r}
), written AS (
    SELECT * FROM updated UNION ALL SELECT * FROM inserted
)
SELECT w.*, NULL::bigint, NULL::bigint, NULL::text, NULL::float8, NULL::text, """
    + RUN_HINT.format(channel="$10", n="w.version")
    + """ FROM written w
UNION ALL
SELECT {run_nulls},
       (SELECT r.version FROM {runs} r WHERE r.tenant = $1::text AND r.run_id = $2::text),
       l.epoch, l.holder, l.expires_at,
       (SELECT r.write_id FROM {runs} r WHERE r.tenant = $1::text AND r.run_id = $2::text), 0
FROM (SELECT 1) AS one
LEFT JOIN {run_leases} l ON l.tenant = $1::text AND l.run_id = $2::text
WHERE NOT EXISTS (SELECT 1 FROM written)""",
    # $1 tenant $2 run_id $3..$7 deltas $8 status $9 now $10 fence $11 write id $12 hint
    # channel (NULL: none); the run, then the hint's column (ignored)
    "patch_run": "WITH "
    + FENCE.format(run_leases="{run_leases}", fence="$10", now="$9")
    + """
UPDATE {runs} AS r
SET input_tokens = r.input_tokens + $3::bigint, output_tokens = r.output_tokens + $4::bigint,
    cost_micros = r.cost_micros + $5::bigint, iterations = r.iterations + $6::bigint,
    "cursor" = r."cursor" + $7::bigint, status = COALESCE($8::text, r.status),
    version = r.version + 1, updated_at = $9::float8, write_id = $11::text
WHERE r.tenant = $1::text AND r.run_id = $2::text
  AND ($10::bigint IS NULL OR EXISTS (SELECT 1 FROM fence))
  -- the whole patch or nothing: every counter stays within runyard.validation.MAX_COUNTER
  AND r.input_tokens + $3::bigint <= 9007199254740991
  AND r.output_tokens + $4::bigint <= 9007199254740991
  AND r.cost_micros + $5::bigint <= 9007199254740991
  AND r.iterations + $6::bigint <= 9007199254740991
  AND r."cursor" + $7::bigint <= 9007199254740991
RETURNING {run_cols_r}, """
    + RUN_HINT.format(channel="$12", n="r.version"),
    # $1 tenant $2 run_id $3 expected version (or NULL) $4 fence $5 now. The run and, with
    # it, its event log (events and head row, so seqs restart at 1 for a run made again); its
    # last write id goes to the tombstones (state schema version 6, runyard.writes).
    "delete_run": "WITH "
    + FENCE.format(run_leases="{run_leases}", fence="$4", now="$5")
    + """, deleted AS (
    DELETE FROM {runs} AS r
    WHERE r.tenant = $1::text AND r.run_id = $2::text
      AND ($3::bigint IS NULL OR r.version = $3::bigint)
      AND ($4::bigint IS NULL OR EXISTS (SELECT 1 FROM fence))
    RETURNING r.version, r.write_id
), buried AS (
    INSERT INTO {tombstones} AS t (tenant, kind, record_id, write_id, deleted_at)
    SELECT $1::text, 'run', $2::text, d.write_id, $5::float8 FROM deleted d
    WHERE d.write_id IS NOT NULL
    ON CONFLICT (tenant, kind, record_id) DO UPDATE
    SET write_id = EXCLUDED.write_id, deleted_at = EXCLUDED.deleted_at
), dropped_events AS (
    DELETE FROM {events} e
    WHERE e.tenant = $1::text AND e.run_id = $2::text AND EXISTS (SELECT 1 FROM deleted)
), dropped_head AS (
    DELETE FROM {event_heads} h
    WHERE h.tenant = $1::text AND h.run_id = $2::text AND EXISTS (SELECT 1 FROM deleted)
)
SELECT d.version FROM deleted d""",
    # $1 tenant $2 run_id: the run's version and its lease, to explain a refused write, and
    # its status (a refused event write: the run may be terminal)
    "probe_run": """
SELECT (SELECT r.version FROM {runs} r WHERE r.tenant = $1::text AND r.run_id = $2::text),
       l.epoch, l.holder, l.expires_at,
       (SELECT r.status FROM {runs} r WHERE r.tenant = $1::text AND r.run_id = $2::text)
FROM (SELECT 1) AS one
LEFT JOIN {run_leases} l ON l.tenant = $1::text AND l.run_id = $2::text""",
    "get_run": """
SELECT {run_cols_r} FROM {runs} r WHERE r.tenant = $1::text AND r.run_id = $2::text""",
    # get_run and the id of the run's last write, then its tombstone's (the last write id of
    # the run deleted there lately), to settle a write whose reply was lost: one row, of NULLs
    # where there is no run or no tombstone
    "get_run_write": """
SELECT {run_cols_r}, r.write_id, t.write_id
FROM (SELECT 1) AS one
LEFT JOIN {runs} r ON r.tenant = $1::text AND r.run_id = $2::text
LEFT JOIN {tombstones} t ON t.tenant = $1::text AND t.kind = 'run' AND t.record_id = $2::text""",
    # $1 tenant $2 after seq $3 status $4 session_id $5 limit (one more than the page)
    "list_runs": """
SELECT {run_cols_r} FROM {runs} r
WHERE r.tenant = $1::text AND r.seq > $2::bigint
  AND ($3::text IS NULL OR r.status = $3::text)
  AND ($4::text IS NULL OR r.session_id = $4::text)
ORDER BY r.seq
LIMIT $5::bigint""",
    # list_runs with a status and no session: the same, on the (tenant, status, seq) index
    "list_runs_by_status": """
SELECT {run_cols_r} FROM {runs} r
WHERE r.tenant = $1::text AND r.status = $3::text AND r.seq > $2::bigint
  AND ($4::text IS NULL OR r.session_id = $4::text)
ORDER BY r.status, r.seq
LIMIT $5::bigint""",
    # list_runs with a session (and a status or none): a range of the (tenant, session_id,
    # seq) index from the cursor (state schema version 6), in seq order and cut at the limit,
    # with the status checked on the runs it yields. Its cost is the page, not the tenant's
    # runs (list_runs and list_runs_by_status walk the tenant's (tenant, seq) or (tenant,
    # status, seq) index and check the session row by row) nor the session's (version 5's
    # (tenant, session_id) index sorted the session on each page); a status rare in the
    # session walks the session's runs until the page is full. The generic plan is that range
    # scan, analyzed or not (tests/test_postgres_plan_sessions.py).
    "list_runs_by_session": """
SELECT {run_cols_r} FROM {runs} r
WHERE r.tenant = $1::text AND r.session_id = $4::text AND r.seq > $2::bigint
  AND ($3::text IS NULL OR r.status = $3::text)
ORDER BY r.seq
LIMIT $5::bigint""",
    # -- sessions --------------------------------------------------------------------------
    # $1 tenant $2 session_id $3 blob $4 now $5 expected version $6 write id: one statement
    # for create (expected 0) and update. The written session, or one row of NULLs and the
    # version this statement's snapshot saw (NULL: none) when nothing was written.
    "put_session": """
WITH updated AS (
    UPDATE {sessions} AS s
    SET blob = $3::text, version = s.version + 1, updated_at = $4::float8, write_id = $6::text
    WHERE s.tenant = $1::text AND s.session_id = $2::text AND $5::bigint > 0
      AND s.version = $5::bigint
    RETURNING {session_cols_s}
), inserted AS (
    INSERT INTO {sessions} AS s
        (tenant, session_id, blob, version, created_at, updated_at, write_id)
    SELECT $1::text, $2::text, $3::text, 1, $4::float8, $4::float8, $6::text
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
    # get_session and the id of the session's last write, then its tombstone's (as
    # get_run_write)
    "get_session_write": """
SELECT s.tenant, s.session_id, s.blob::text, s.version, s.created_at, s.updated_at, s.write_id,
       t.write_id
FROM (SELECT 1) AS one
LEFT JOIN {sessions} s ON s.tenant = $1::text AND s.session_id = $2::text
LEFT JOIN {tombstones} t
    ON t.tenant = $1::text AND t.kind = 'session' AND t.record_id = $2::text""",
    # $1 tenant $2 session_id $3 batch $4 now: delete at most one batch of the session's runs,
    # with their event logs (events and head rows) and tombstones, as delete_run
    "delete_session_runs": """
WITH doomed AS (
    DELETE FROM {runs} r
    WHERE r.ctid = ANY (ARRAY(
            SELECT x.ctid FROM {runs} x WHERE x.tenant = $1::text AND x.session_id = $2::text
            LIMIT $3::bigint))
      AND r.tenant = $1::text AND r.session_id = $2::text
    RETURNING r.run_id, r.write_id
), buried AS (
    INSERT INTO {tombstones} AS t (tenant, kind, record_id, write_id, deleted_at)
    SELECT $1::text, 'run', d.run_id, d.write_id, $4::float8 FROM doomed d
    WHERE d.write_id IS NOT NULL
    ON CONFLICT (tenant, kind, record_id) DO UPDATE
    SET write_id = EXCLUDED.write_id, deleted_at = EXCLUDED.deleted_at
), dropped_events AS (
    DELETE FROM {events} e
    WHERE e.tenant = $1::text AND e.run_id IN (SELECT d.run_id FROM doomed d)
), dropped_heads AS (
    DELETE FROM {event_heads} h
    WHERE h.tenant = $1::text AND h.run_id IN (SELECT d.run_id FROM doomed d)
)
SELECT 1 FROM doomed""",
    # $1 tenant $2 session_id $3 cascade $4 now: (runs deleted, sessions deleted, runs the
    # session had); each deleted record's last write id goes to the tombstones
    "delete_session": """
WITH doomed_runs AS (
    DELETE FROM {runs} r WHERE r.tenant = $1::text AND r.session_id = $2::text AND $3::boolean
    RETURNING r.run_id, r.write_id
), doomed_session AS (
    DELETE FROM {sessions} s WHERE s.tenant = $1::text AND s.session_id = $2::text
      AND ($3::boolean OR NOT EXISTS (
          SELECT 1 FROM {runs} r WHERE r.tenant = $1::text AND r.session_id = $2::text))
    RETURNING s.write_id
), buried AS (
    INSERT INTO {tombstones} AS t (tenant, kind, record_id, write_id, deleted_at)
    SELECT $1::text, 'run', d.run_id, d.write_id, $4::float8 FROM doomed_runs d
    WHERE d.write_id IS NOT NULL
    UNION ALL
    SELECT $1::text, 'session', $2::text, d.write_id, $4::float8 FROM doomed_session d
    WHERE d.write_id IS NOT NULL
    ON CONFLICT (tenant, kind, record_id) DO UPDATE
    SET write_id = EXCLUDED.write_id, deleted_at = EXCLUDED.deleted_at
)
SELECT (SELECT count(*) FROM doomed_runs), (SELECT count(*) FROM doomed_session),
       (SELECT count(*) FROM {runs} r WHERE r.tenant = $1::text AND r.session_id = $2::text)""",
    # -- run leases ------------------------------------------------------------------------
    # $1 tenant $2 run_id $3 holder $4 now $5 expires_at. A new epoch comes from the epoch
    # sequence (state version 4), never reused, so a run whose lease row prune() removed gets
    # an epoch above every one it had before.
    "acquire_lease": """
INSERT INTO {run_leases} AS l (tenant, run_id, holder, epoch, expires_at)
VALUES ($1::text, $2::text, $3::text, nextval('{lease_epoch_seq_name}'), $5::float8)
ON CONFLICT (tenant, run_id) DO UPDATE
SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at,
    epoch = CASE WHEN l.holder IS NOT NULL AND l.expires_at >= $4::float8
                 THEN l.epoch ELSE GREATEST(l.epoch + 1, EXCLUDED.epoch) END
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
    # -- verify ----------------------------------------------------------------------------
    # $1 relation names $2 runyard's index names: the statement timeout, the relations that do
    # not exist, the server's clock, and those indexes of the relations that are INVALID (a
    # concurrent build or reindex that failed: the planner ignores them)
    "verify_relations": """
SELECT current_setting('statement_timeout'),
       ARRAY(SELECT n FROM unnest($1::text[]) AS n WHERE to_regclass(n) IS NULL),
       extract(epoch FROM clock_timestamp())::float8,
       ARRAY(SELECT i.indexrelid::regclass::text FROM pg_index i
             JOIN pg_class c ON c.oid = i.indexrelid
             WHERE NOT i.indisvalid AND c.relname = ANY ($2::text[])
               AND i.indrelid = ANY (ARRAY(SELECT to_regclass(n)::oid
                                           FROM unnest($1::text[]) AS n)))""",
    # the server's clock alone: verify() samples it to measure the offset to this machine's
    "server_clock": """
SELECT extract(epoch FROM clock_timestamp())::float8""",
    "verify_versions": """
SELECT v.component, v.version FROM {schema_table} v""",
}
