-- runyard PostgreSQL schema: run state (runs, sessions, run leases, event logs), work queues,
-- and the execution store (executions, outbox, spawns, processed marks, timers, trace).
--
-- Apply this with your own migration tool; runyard never runs DDL. `open()` checks the rows of
-- the schema table against the versions this runyard was written for. Later components (the
-- execution store) add their own tables and their own row in the schema table, so a deployment
-- migrates one component without touching the others.
--
-- Names in braces are filled in by runyard.postgres.schema_sql(StateTables(...)).

CREATE TABLE {schema_table} (
    component   text COLLATE "C" PRIMARY KEY,
    version     integer NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);

-- Run state --------------------------------------------------------------------------------
-- Blobs, payloads and event data are `text` holding the JSON text the client encoded (state
-- schema version 3, queue version 2): jsonb would rewrite 1e16 as 10000000000000000, -0.0 as 0
-- and reorder object keys, so a value would not read back as memory and Redis return it.

CREATE TABLE {runs} (
    tenant         text COLLATE "C" NOT NULL,
    run_id         text COLLATE "C" NOT NULL,
    seq            bigserial NOT NULL,
    blob           text NOT NULL,
    version        bigint NOT NULL CHECK (version > 0),
    status         text NOT NULL,
    session_id     text COLLATE "C",
    input_tokens   bigint NOT NULL DEFAULT 0,
    output_tokens  bigint NOT NULL DEFAULT 0,
    cost_micros    bigint NOT NULL DEFAULT 0,
    iterations     bigint NOT NULL DEFAULT 0,
    "cursor"       bigint NOT NULL DEFAULT 0,
    created_at     double precision NOT NULL,
    updated_at     double precision NOT NULL,
    -- the id of the run's last write (state schema version 5), read back to settle a lost reply
    write_id       text COLLATE "C",
    PRIMARY KEY (tenant, run_id)
);
-- list_runs pages by seq within a tenant.
CREATE UNIQUE INDEX "{runs_name}_by_seq" ON {runs} (tenant, seq);
-- list_runs with a session pages by seq within the session, a range of this index from the
-- cursor (state schema version 6; it was (tenant, session_id), and every page sorted the
-- session); delete_session finds a session's runs.
CREATE INDEX "{runs_name}_by_session" ON {runs} (tenant, session_id, seq)
    WHERE session_id IS NOT NULL;
-- list_runs with a status filter (state schema version 3).
CREATE INDEX "{runs_name}_by_status" ON {runs} (tenant, status, seq);

CREATE TABLE {sessions} (
    tenant      text COLLATE "C" NOT NULL,
    session_id  text COLLATE "C" NOT NULL,
    blob        text NOT NULL,
    version     bigint NOT NULL CHECK (version > 0),
    created_at  double precision NOT NULL,
    updated_at  double precision NOT NULL,
    write_id    text COLLATE "C",  -- as on runs (state schema version 5)
    PRIMARY KEY (tenant, session_id)
);

-- One row per leased run: the fencing epoch outlives the lease (holder NULL = released) until
-- prune() removes the row of a lease that is not live (state schema version 4). Epochs come
-- from {lease_epoch_seq}, which never hands a value out twice, so the next lease of a pruned
-- run still gets an epoch above every one it had.
CREATE TABLE {run_leases} (
    tenant      text COLLATE "C" NOT NULL,
    run_id      text COLLATE "C" NOT NULL,
    holder      text COLLATE "C",
    epoch       bigint NOT NULL,
    expires_at  double precision,
    PRIMARY KEY (tenant, run_id)
);
CREATE SEQUENCE {lease_epoch_seq};
-- prune: released leases (expires_at NULL) first, then lapsed ones, oldest expiry first.
CREATE INDEX "{run_leases_name}_by_expiry"
    ON {run_leases} ((COALESCE(expires_at, '-Infinity'::float8)));

-- Tombstones (state schema version 6): the last write id of a deleted run or session (kind
-- 'run' or 'session'), kept until prune() removes it (older than runyard.writes'
-- TOMBSTONE_SECONDS). A put whose reply was lost reads it with the record: its own id here
-- means it landed and was deleted afterwards, so it is not sent again over the delete.
CREATE TABLE {tombstones} (
    tenant      text COLLATE "C" NOT NULL,
    kind        text COLLATE "C" NOT NULL CHECK (kind IN ('run', 'session')),
    record_id   text COLLATE "C" NOT NULL,
    write_id    text COLLATE "C" NOT NULL,
    deleted_at  double precision NOT NULL,
    PRIMARY KEY (tenant, kind, record_id)
);
-- prune: the oldest tombstones first.
CREATE INDEX "{tombstones_name}_by_age" ON {tombstones} (deleted_at);

-- Work queues -------------------------------------------------------------------------------

CREATE SEQUENCE {work_seq};    -- order of readiness within a priority
CREATE SEQUENCE {token_seq};   -- fencing tokens of claims
CREATE SEQUENCE {turn_seq};    -- the global claim counter that tenant turns are drawn from

CREATE TABLE {work} (
    tenant            text COLLATE "C" NOT NULL,
    item_id           text COLLATE "C" NOT NULL,
    payload           text NOT NULL,
    priority          bigint NOT NULL DEFAULT 0,
    state             text NOT NULL CHECK (state IN ('ready', 'leased', 'dead')),
    attempts          integer NOT NULL DEFAULT 0,
    available_at      double precision NOT NULL,
    enqueued_at       double precision NOT NULL,
    seq               bigint NOT NULL DEFAULT nextval('{work_seq_name}'),
    dedupe_key        text COLLATE "C",
    worker            text COLLATE "C",
    token             bigint,
    claimed_at        double precision,
    lease_expires_at  double precision,
    last_error        text,
    dead_reason       text,
    dead_at           double precision,
    max_attempts      integer CHECK (max_attempts > 0),  -- queue schema version 3
    PRIMARY KEY (tenant, item_id)
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
-- claim: a tenant's due head, highest priority first, then oldest due, then oldest ready.
CREATE INDEX "{work_name}_ready" ON {work} (tenant, priority DESC, available_at, seq)
    WHERE state = 'ready';
-- claim: "does this tenant have due work?", one bounded probe (a delayed backlog is skipped).
-- The probes state its whole predicate; "priority > -9223372036854775808" (true of every
-- row runyard writes: priorities are 32-bit) is in it (queue schema version 4) so that no
-- other statement can use it: a claim's head, read from _ready in order, would otherwise read
-- the tenant's due entries here and sort them wherever the planner guesses few rows (a table
-- vacuumed but never analyzed: the whole backlog). Not "priority IS NOT NULL": PostgreSQL 17
-- drops that from a query on a NOT NULL column, and the probes could no longer use it either.
CREATE INDEX "{work_name}_due" ON {work} (tenant, available_at)
    WHERE state = 'ready' AND priority > -9223372036854775808;
-- A dedupe key is live while its item exists (ready, leased or dead); completion deletes it.
CREATE UNIQUE INDEX "{work_name}_dedupe" ON {work} (tenant, dedupe_key)
    WHERE dedupe_key IS NOT NULL;
-- reap: lapsed leases, oldest expiry first; adopt: a worker's leases.
CREATE INDEX "{work_name}_lapsing" ON {work} (lease_expires_at, token) WHERE state = 'leased';
CREATE INDEX "{work_name}_by_worker" ON {work} (worker, token) WHERE state = 'leased';
-- dead_letters: a tenant's dead items, oldest first.
CREATE INDEX "{work_name}_dead" ON {work} (tenant, dead_at, item_id) WHERE state = 'dead';

-- The rotation (queue schema version 2): one row per tenant that may have items in state
-- 'ready' (due or delayed); claims serve the tenant with the oldest turn that has due work. A
-- claim locks the row it advances FOR NO KEY UPDATE SKIP LOCKED, so claimers spread over
-- tenants and never wait on it; an enqueue for a tenant that has a row only takes FOR KEY SHARE
-- on it (which no claim waits on); a tenant whose items have all been claimed loses its row
-- through {turns_name}_retire, and its next enqueue joins the rotation again at the back.
CREATE TABLE {turns} (
    tenant  text COLLATE "C" PRIMARY KEY,
    turn    bigint NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE INDEX "{turns_name}_by_turn" ON {turns} (turn, tenant);

-- Parked tenants (queue schema version 5): a tenant whose ready items are all delayed leaves
-- the rotation for this table, keeping its turn, so that claims do not probe it at every
-- claim until its first item is due. A claim parks up to PARK_PER_CLAIM tenants it finds
-- without due work ahead of the one it serves (through {turns_name}_park), and first puts
-- back, with their turns, up to UNPARK_PER_CLAIM tenants whose due time has come (oldest due
-- first; such a claim serves nothing and is sent again, so that it sees them). An item that
-- becomes ready for a parked tenant (an enqueue, a retry) puts it back at once, with its turn.
CREATE TABLE {turns_parked} (
    tenant  text COLLATE "C" PRIMARY KEY,
    turn    bigint NOT NULL,
    due_at  double precision NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE INDEX "{turns_name}_parked_by_due" ON {turns_parked} (due_at);

-- Maintained counts (queue schema version 3), so that stats never reads the work table. Every
-- statement that changes items' states adds its changes to one row of {counts}: its backend's
-- own row (shard pg_backend_pid() % 16) unless another session holds it, else the first row no
-- other session holds from there on (FOR UPDATE SKIP LOCKED), so no statement waits on
-- another's count, an open bound() transaction included;
-- when every row is held, it adds a row (its shard from {counts_seq}), so the table holds 16
-- rows, or the most count rows ever locked at once if more (one per counting statement until
-- its transaction ends: at most one per session outside bound() transactions); rows are never
-- removed. `ready` counts ready
-- items, due and delayed. Delayed items are counted by time: {delays} holds +1 at the due time
-- of an item that became ready for later and -1 when such an item is cancelled; the delayed
-- count at time t is the sum of n over rows with available_at > t (rows in the past no longer
-- count: prune() deletes them).
CREATE SEQUENCE {counts_seq} START 16;
CREATE TABLE {counts} (
    shard   bigint PRIMARY KEY,
    ready   bigint NOT NULL DEFAULT 0,
    leased  bigint NOT NULL DEFAULT 0,
    dead    bigint NOT NULL DEFAULT 0
);
INSERT INTO {counts} (shard) SELECT g FROM generate_series(0, 15) AS g;
CREATE TABLE {delays} (
    available_at  double precision NOT NULL,
    n             integer NOT NULL
);
CREATE INDEX "{delays_name}_by_time" ON {delays} (available_at);

-- Remove a tenant's row when it has no item in state 'ready', unless someone holds the row (an
-- enqueue's KEY SHARE, a claim advancing the turn): it is then skipped, never waited on. Each
-- statement of a volatile function takes a fresh snapshot, so the check below sees every
-- enqueue that committed before the row was locked, and an enqueue that comes later waits
-- for this lock and then inserts a new row.
CREATE FUNCTION {turns_retire}(p_tenant text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $retire$
BEGIN
    PERFORM 1 FROM {turns} t WHERE t.tenant = p_tenant FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    DELETE FROM {turns} t WHERE t.tenant = p_tenant
        AND NOT EXISTS (SELECT 1 FROM {work} w WHERE w.tenant = p_tenant AND w.state = 'ready');
    RETURN FOUND;
END
$retire$;

-- Park a tenant that has no due item at p_now (see {turns_parked}): unless someone holds its
-- rotation row (it is then skipped, never waited on), read with a fresh snapshot its first
-- ready item; none: the row is removed (as {turns_name}_retire does); a delayed one: the row
-- moves to {turns_parked} with its turn and that item's due time; a due one: nothing changes.
CREATE FUNCTION {turns_park}(p_tenant text, p_now double precision) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $park$
DECLARE
    v_turn bigint;
    v_next double precision;
BEGIN
    SELECT t.turn INTO v_turn FROM {turns} t WHERE t.tenant = p_tenant FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    SELECT d.available_at INTO v_next FROM {work} d
    WHERE d.tenant = p_tenant AND d.state = 'ready' AND d.priority > -9223372036854775808
    ORDER BY d.available_at LIMIT 1;
    IF v_next <= p_now THEN
        RETURN false;
    END IF;
    DELETE FROM {turns} t WHERE t.tenant = p_tenant;
    IF v_next IS NOT NULL THEN
        INSERT INTO {turns_parked} AS p (tenant, turn, due_at) VALUES (p_tenant, v_turn, v_next)
        ON CONFLICT (tenant) DO UPDATE SET turn = EXCLUDED.turn, due_at = EXCLUDED.due_at;
    END IF;
    RETURN true;
END
$park$;

-- The turn a tenant joins the rotation with: its parked turn, taken out of {turns_parked}
-- (read with a fresh snapshot, so a park that committed after the calling statement began is
-- seen), else p_default (the back of the rotation).
CREATE FUNCTION {turns_rejoin}(p_tenant text, p_default bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $rejoin$
DECLARE
    v_turn bigint;
BEGIN
    DELETE FROM {turns_parked} p WHERE p.tenant = p_tenant RETURNING p.turn INTO v_turn;
    RETURN COALESCE(v_turn, p_default);
END
$rejoin$;

-- Run event logs (state schema version 2): each run's append-only log; the head row holds the
-- last seq and its row lock orders concurrent appends, so seqs are gap-free per run.
CREATE TABLE {event_heads} (
    tenant    text COLLATE "C" NOT NULL,
    run_id    text COLLATE "C" NOT NULL,
    last_seq  bigint NOT NULL,
    PRIMARY KEY (tenant, run_id)
);
CREATE TABLE {events} (
    tenant    text COLLATE "C" NOT NULL,
    run_id    text COLLATE "C" NOT NULL,
    seq       bigint NOT NULL CHECK (seq > 0),
    type      text NOT NULL,
    data      text NOT NULL,
    at        double precision NOT NULL,
    event_id  text COLLATE "C",
    terminal  boolean NOT NULL DEFAULT false,
    PRIMARY KEY (tenant, run_id, seq)
);
-- A retried event_id finds the event it stored.
CREATE UNIQUE INDEX "{events_name}_by_event_id" ON {events} (tenant, run_id, event_id)
    WHERE event_id IS NOT NULL;

INSERT INTO {schema_table} (component, version) VALUES ('state', 6), ('queue', 5);

-- Execution store ---------------------------------------------------------------------------

-- An execution: its fields as columns and its context as text (the client's JSON text,
-- returned as sent: executions version 3); seq is the listing order.
CREATE TABLE {executions} (
    execution_id   text COLLATE "C" PRIMARY KEY,
    seq            bigserial NOT NULL,
    definition_id  text COLLATE "C" NOT NULL,
    status         text COLLATE "C" NOT NULL,
    version        bigint NOT NULL CHECK (version > 0),
    context        text NOT NULL,
    parent_id      text COLLATE "C",
    root_path      text COLLATE "C" NOT NULL,
    created_at     double precision NOT NULL,
    updated_at     double precision NOT NULL
);
-- list_executions pages by seq; one index per filter it can take.
CREATE UNIQUE INDEX "{executions_name}_by_seq" ON {executions} (seq);
CREATE INDEX "{executions_name}_by_status" ON {executions} (status, seq);
CREATE INDEX "{executions_name}_by_definition" ON {executions} (definition_id, seq);
CREATE INDEX "{executions_name}_roots" ON {executions} (seq) WHERE parent_id IS NULL;

-- The transactional outbox: emitted events until a relay acks them (oldest first by seq).
CREATE TABLE {outbox} (
    seq           bigserial PRIMARY KEY,
    execution_id  text COLLATE "C" NOT NULL,
    target_id     text COLLATE "C" NOT NULL,
    event_id      text COLLATE "C" NOT NULL,
    event_name    text COLLATE "C" NOT NULL,
    data          text NOT NULL,
    created_at    double precision NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);

-- Spawn intents: children to start until a spawner acks them (oldest first by seq).
CREATE TABLE {spawns} (
    seq         bigserial PRIMARY KEY,
    parent_id   text COLLATE "C" NOT NULL,
    child_id    text COLLATE "C" NOT NULL,
    root_path   text COLLATE "C" NOT NULL,
    context     text NOT NULL,
    created_at  double precision NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);

-- Processed-event marks (the dedupe of load_for_event and is_processed).
CREATE TABLE {processed} (
    execution_id  text COLLATE "C" NOT NULL,
    event_id      text COLLATE "C" NOT NULL,
    processed_at  double precision NOT NULL,
    PRIMARY KEY (execution_id, event_id)
);
-- prune_processed (executions schema version 2): the oldest marks first.
CREATE INDEX "{processed_name}_by_age" ON {processed} (processed_at, execution_id, event_id);

-- One timer per (execution, path); due_timers walks the fire times, earliest first.
CREATE TABLE {timers} (
    execution_id  text COLLATE "C" NOT NULL,
    path          text COLLATE "C" NOT NULL,
    fire_at       double precision NOT NULL,
    PRIMARY KEY (execution_id, path)
) WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);
CREATE INDEX "{timers_name}_due" ON {timers} (fire_at, execution_id, path);

-- The trace ring: each execution's last index (a row lock orders concurrent steps) and its
-- kept steps; a step's index is stable, older steps beyond the ring are deleted.
CREATE TABLE {trace_heads} (
    execution_id  text COLLATE "C" PRIMARY KEY,
    last_index    bigint NOT NULL
);
CREATE TABLE {trace} (
    execution_id  text COLLATE "C" NOT NULL,
    idx           bigint NOT NULL,
    recorded_at   double precision NOT NULL,
    event_id      text COLLATE "C",
    event_name    text COLLATE "C",
    data          text NOT NULL,
    PRIMARY KEY (execution_id, idx)
);

INSERT INTO {schema_table} (component, version) VALUES ('executions', 3);
