"""The event log's statements (append, finalize, read), as templates; one statement each."""

from __future__ import annotations

from runyard.postgres.statements.state import FENCE, RUN_HINT

__all__ = ["EVENT_TEMPLATES"]

_EVENT_COLS = "e.seq, e.type, e.data::text, e.at, e.event_id, e.terminal"

# The event an event_id already names ($1 tenant, $2 run_id, {event_id}).
_PRIOR = """prior AS (
    SELECT {event_cols} FROM {events} e
    WHERE e.tenant = $1::text AND e.run_id = $2::text AND e.event_id = {event_id}::text
)"""

# The next seq of the run: the head row's lock orders concurrent appends (gap-free seqs).
_HEAD = """head AS (
    INSERT INTO {event_heads} AS h (tenant, run_id, last_seq)
    SELECT $1::text, $2::text, 1 FROM {source}
    ON CONFLICT (tenant, run_id) DO UPDATE SET last_seq = h.last_seq + 1
    RETURNING h.last_seq
)"""

# The event's time: the server's clock read once the head row is locked (so, per run, times
# never go back as seqs go up), or the injected clock's time the client sent.
_AT = """CASE WHEN {server_time}::boolean THEN extract(epoch FROM clock_timestamp())::float8
    ELSE {now}::float8 END"""

EVENT_TEMPLATES: dict[str, str] = {
    # $1 tenant $2 run_id $3 type $4 data $5 now $6 event_id $7 fence $8 channel (NULL: none)
    # $9 terminal statuses $10 server time (true: the event's time is clock_timestamp() read
    # after the head row lock; false: $5). The appended event, or the event a retried
    # event_id stored; no row: refused (probe_run). The run row is locked FOR SHARE while
    # not terminal, so a concurrent finalize either waits for this append or is seen by it
    # (no event after it).
    "append_event": "WITH "
    + FENCE.format(run_leases="{run_leases}", fence="$7", now="$5")
    + ", "
    + _PRIOR.format(event_cols=_EVENT_COLS, events="{events}", event_id="$6")
    + """, live AS (
    SELECT 1 FROM {runs} r WHERE r.tenant = $1::text AND r.run_id = $2::text
      AND (r.status IS NULL OR r.status <> ALL($9::text[]))
    FOR SHARE
), """
    + _HEAD.format(
        event_heads="{event_heads}",
        source="""live WHERE NOT EXISTS (SELECT 1 FROM prior)
      AND ($7::bigint IS NULL OR EXISTS (SELECT 1 FROM fence))""",
    )
    + """, inserted AS (
    INSERT INTO {events} AS e (tenant, run_id, seq, type, data, at, event_id, terminal)
    SELECT $1::text, $2::text, head.last_seq, $3::text, $4::text, """
    + _AT.format(server_time="$10", now="$5")
    + """, $6::text,
           false
    FROM head
    RETURNING """
    + _EVENT_COLS
    + """
)
SELECT i.*, """
    + RUN_HINT.format(channel="$8", n="i.seq")
    + """ FROM inserted i
UNION ALL
SELECT p.*, 0 FROM prior p""",
    # $1 tenant $2 run_id $3 status $4 type $5 data $6 now $7 event_id $8 fence
    # $9 expected version (NULL: any) $10 channel $11 terminal statuses $12 server time (as
    # append_event's $10): a run already in one is left alone (the row lock makes a concurrent
    # second finalize see the first's status); $13 write id (kept as the run's last write, read
    # back when the reply is lost).
    # The run as written and the event's seq; or
    # the run as it is with the prior event's type, data, seq and terminal flag (a retried
    # event_id: the adapter compares them); no row:
    # refused, nothing changed (probe_run explains it).
    "finalize": "WITH "
    + FENCE.format(run_leases="{run_leases}", fence="$8", now="$6")
    + ", "
    + _PRIOR.format(event_cols=_EVENT_COLS, events="{events}", event_id="$7")
    + """, updated AS (
    UPDATE {runs} AS r SET status = $3::text, version = r.version + 1, updated_at = $6::float8,
        write_id = $13::text
    WHERE r.tenant = $1::text AND r.run_id = $2::text AND NOT EXISTS (SELECT 1 FROM prior)
      AND (r.status IS NULL OR r.status <> ALL($11::text[]))
      AND ($9::bigint IS NULL OR r.version = $9::bigint)
      AND ($8::bigint IS NULL OR EXISTS (SELECT 1 FROM fence))
    RETURNING {run_cols_r}
), """
    + _HEAD.format(event_heads="{event_heads}", source="updated")
    + """, inserted AS (
    INSERT INTO {events} AS e (tenant, run_id, seq, type, data, at, event_id, terminal)
    SELECT $1::text, $2::text, head.last_seq, $4::text, $5::text, """
    + _AT.format(server_time="$12", now="$6")
    + """, $7::text,
           true
    FROM head
    RETURNING e.seq
)
SELECT u.*, NULL::text, NULL::text, NULL::bigint, NULL::boolean, """
    + RUN_HINT.format(channel="$10", n="i.seq")
    + """ FROM updated u CROSS JOIN inserted i
UNION ALL
SELECT {run_cols_r}, p.type, p.data, p.seq, p.terminal, 0 FROM prior p
JOIN {runs} r ON r.tenant = $1::text AND r.run_id = $2::text""",
    # $1 tenant $2 run_id $3 after $4 limit
    "read_events": """
SELECT """
    + _EVENT_COLS
    + """ FROM {events} e
WHERE e.tenant = $1::text AND e.run_id = $2::text AND e.seq > $3::bigint
ORDER BY e.seq
LIMIT $4::bigint""",
}
