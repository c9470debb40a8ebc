-- runyard's SQLite schema: state at version 4 (2: the run event logs; 3: lease pruning; 4: the
-- index of runs by status), queue at 5 (2: per-item max_attempts; 3: no index by worker;
-- 4: parked tenants; 5: a turn counter of its own, which adopt does not move),
-- executions at 2 (processed marks pruned oldest first).
--
-- Names in braces are filled in by runyard.sqlite.schema_sql(SqliteTables(...)). Every statement
-- is idempotent (IF NOT EXISTS, INSERT OR IGNORE), so applying it twice changes nothing;
-- runyard.sqlite.create_schema() applies it in one BEGIN IMMEDIATE transaction.
-- Times are seconds since the epoch (REAL); JSON values are TEXT written by runyard.

CREATE TABLE IF NOT EXISTS "{schema_table}" (
    component  TEXT PRIMARY KEY,
    version    INTEGER NOT NULL
);

-- Run state --------------------------------------------------------------------------------

-- seq is the creation order that list_runs pages by (AUTOINCREMENT: never reused).
CREATE TABLE IF NOT EXISTS "{runs}" (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant         TEXT NOT NULL,
    run_id         TEXT NOT NULL,
    blob           TEXT NOT NULL,
    version        INTEGER NOT NULL CHECK (version > 0),
    status         TEXT NOT NULL,
    session_id     TEXT,
    input_tokens   INTEGER NOT NULL DEFAULT 0,
    output_tokens  INTEGER NOT NULL DEFAULT 0,
    cost_micros    INTEGER NOT NULL DEFAULT 0,
    iterations     INTEGER NOT NULL DEFAULT 0,
    "cursor"       INTEGER NOT NULL DEFAULT 0,
    created_at     REAL NOT NULL,
    updated_at     REAL NOT NULL,
    UNIQUE (tenant, run_id)
);
CREATE INDEX IF NOT EXISTS "{runs}_by_tenant" ON "{runs}" (tenant, seq);
CREATE INDEX IF NOT EXISTS "{runs}_by_session" ON "{runs}" (tenant, session_id)
    WHERE session_id IS NOT NULL;
-- list_runs with a status (state version 4), named with INDEXED BY: the tenant's runs of that
-- status in seq order. A run write that names no status (put_run, patch_run without one)
-- leaves its entry alone.
CREATE INDEX IF NOT EXISTS "{runs}_by_status" ON "{runs}" (tenant, status, seq);

CREATE TABLE IF NOT EXISTS "{sessions}" (
    tenant      TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    blob        TEXT NOT NULL,
    version     INTEGER NOT NULL CHECK (version > 0),
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    PRIMARY KEY (tenant, session_id)
);

-- One row per run ever leased: the fencing epoch outlives the lease (holder NULL = released).
CREATE TABLE IF NOT EXISTS "{run_leases}" (
    tenant      TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    holder      TEXT,
    epoch       INTEGER NOT NULL,
    expires_at  REAL,
    PRIMARY KEY (tenant, run_id)
);
-- prune (state version 3): finds leases that are not live by their expiry (NULL: released),
-- and keeps each tenant's highest pruned epoch, so a pruned run's next lease gets a higher one.
CREATE INDEX IF NOT EXISTS "{run_leases}_by_expiry" ON "{run_leases}" (expires_at);
CREATE TABLE IF NOT EXISTS "{lease_floors}" (
    tenant  TEXT PRIMARY KEY,
    epoch   INTEGER NOT NULL
);

-- A run's append-only event log: seq is gap-free per run, starting at 1 (every write holds the
-- file's write lock, so the next seq is MAX(seq) + 1 read inside the appending statement).
-- delete_run deletes the run's rows, so a run made again starts at 1.
CREATE TABLE IF NOT EXISTS "{events}" (
    tenant    TEXT NOT NULL,
    run_id    TEXT NOT NULL,
    seq       INTEGER NOT NULL CHECK (seq > 0),
    type      TEXT NOT NULL,
    data      TEXT NOT NULL,
    at        REAL NOT NULL,
    event_id  TEXT,
    terminal  INTEGER NOT NULL DEFAULT 0 CHECK (terminal IN (0, 1)),
    PRIMARY KEY (tenant, run_id, seq)
);
-- An event_id is the retry identity of an append within its run.
CREATE UNIQUE INDEX IF NOT EXISTS "{events}_by_event_id" ON "{events}" (tenant, run_id, event_id)
    WHERE event_id IS NOT NULL;

-- Work queues -------------------------------------------------------------------------------

-- ready_seq orders a tenant's ready items of equal priority and due time by when they last
-- became ready (one more than the last of that group, found in the index {work}_ready).
CREATE TABLE IF NOT EXISTS "{work}" (
    tenant            TEXT NOT NULL,
    item_id           TEXT NOT NULL,
    payload           TEXT NOT NULL,
    priority          INTEGER NOT NULL DEFAULT 0,
    state             TEXT NOT NULL CHECK (state IN ('ready', 'leased', 'dead')),
    attempts          INTEGER NOT NULL DEFAULT 0,
    available_at      REAL NOT NULL,
    enqueued_at       REAL NOT NULL,
    ready_seq         INTEGER NOT NULL,
    dedupe_key        TEXT,
    worker            TEXT,
    token             INTEGER,
    claimed_at        REAL,
    lease_expires_at  REAL,
    last_error        TEXT,
    dead_reason       TEXT,
    dead_at           REAL,
    max_attempts      INTEGER CHECK (max_attempts IS NULL OR max_attempts >= 1),
    PRIMARY KEY (tenant, item_id)
);
-- claim: a tenant's head, highest priority first, then first due, then first ready (named in
-- the claim with INDEXED BY, so the plan needs no statistics; runyard never runs ANALYZE); an
-- item becoming ready seeks the end of its (tenant, priority, due time) group here for its
-- ready_seq.
CREATE INDEX IF NOT EXISTS "{work}_ready" ON "{work}" (tenant, priority DESC, available_at, ready_seq)
    WHERE state = 'ready';
-- claim: whether a tenant has due work (one seek, whatever its items' priorities).
CREATE INDEX IF NOT EXISTS "{work}_due" ON "{work}" (tenant, available_at) WHERE state = 'ready';
-- A dedupe key is live while its item exists (ready, leased or dead); completion deletes it.
CREATE UNIQUE INDEX IF NOT EXISTS "{work}_dedupe" ON "{work}" (tenant, dedupe_key)
    WHERE dedupe_key IS NOT NULL;
-- reap and every claim find lapsed leases here. adopt reads the live leases here too: every
-- live lease of every worker (lease_expires_at >= now), keeping the worker's and sorting them by
-- token, so its cost grows with all live leases, under the write lock (13-32 ms at 105k live
-- leases, 0.8 ms at 2.5k, see docs/sqlite.md). Queue version 3 has no index by worker: it cost
-- two pages per claim and completion (its worker and token change at each).
CREATE INDEX IF NOT EXISTS "{work}_lapsing" ON "{work}" (lease_expires_at, token)
    WHERE state = 'leased';
CREATE INDEX IF NOT EXISTS "{work}_dead" ON "{work}" (tenant, dead_at, item_id) WHERE state = 'dead';

-- The counters. claims: every claim, and every lease adopt re-tokens, takes the next value as
-- its fencing token (never reused, so a stale token can never match a later one). turns
-- (queue version 5): every claim, and only a claim, takes the next value as its tenant's new
-- turn, so an adopt changes no tenant's place in the rotation (before version 5 the turn was
-- the token, and an adopt between two claims moved the tenants that joined after it). The
-- INSERT names no turns column: an older file that this script reaches before its migration
-- has none (the migration adds it).
CREATE TABLE IF NOT EXISTS "{counters}" (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    claims  INTEGER NOT NULL,
    turns   INTEGER NOT NULL DEFAULT 0
);
INSERT OR IGNORE INTO "{counters}" (id, claims) VALUES (1, 0);

-- A tenant's turn: claims serve the tenant with the oldest turn that has due work; a new
-- tenant's turn is the turn counter's current value, ties go by tenant name.
CREATE TABLE IF NOT EXISTS "{turns}" (
    tenant  TEXT PRIMARY KEY,
    turn    INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS "{turns}_by_turn" ON "{turns}" (turn, tenant);

-- The bookkeeping of turns and the counters runs inside the writing statement, as triggers.
CREATE TRIGGER IF NOT EXISTS "{work}_claimed" AFTER UPDATE OF token ON "{work}"
WHEN NEW.state = 'leased' AND OLD.state = 'ready'
BEGIN
    UPDATE "{counters}" SET claims = NEW.token, turns = turns + 1 WHERE id = 1;
    UPDATE "{turns}" SET turn = (SELECT c.turns FROM "{counters}" c WHERE c.id = 1)
    WHERE tenant = NEW.tenant;
END;

-- Parked tenants (queue version 4): a claim serves the tenant with the oldest turn that has due
-- work, so every tenant in front of it has none (its items delayed, leased or dead, or none
-- left). The claim moves up to 64 of them here with their turns, so later claims do not probe
-- them again: due_at is the tenant's first due time among its ready items, NULL without one.
-- A claim that finds nothing due parks the first 64 of the rotation (none has due work). Each
-- claim first puts back the tenants whose due_at came (runyard.sqlite.queue_transactions);
-- an item becoming ready earlier puts its tenant back at once (the triggers below). A tenant is
-- in the turns table or here, never both; prune walks both.
CREATE TABLE IF NOT EXISTS "{turns_parked}" (
    tenant  TEXT PRIMARY KEY,
    turn    INTEGER NOT NULL,
    due_at  REAL
);
CREATE INDEX IF NOT EXISTS "{turns_parked}_due" ON "{turns_parked}" (due_at, tenant)
    WHERE due_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS "{turns_parked}_by_turn" ON "{turns_parked}" (turn, tenant);
-- A tenant entering either table leaves the other (so every statement that parks a tenant or
-- puts one back is a single INSERT).
CREATE TRIGGER IF NOT EXISTS "{turns_parked}_enters" AFTER INSERT ON "{turns_parked}"
BEGIN
    DELETE FROM "{turns}" WHERE tenant = NEW.tenant;
END;
CREATE TRIGGER IF NOT EXISTS "{turns}_enters" AFTER INSERT ON "{turns}"
BEGIN
    DELETE FROM "{turns_parked}" WHERE tenant = NEW.tenant;
END;
-- BEFORE the claimed row changes (and before the _claimed trigger moves the tenant's turn): the
-- tenants in front of the claimed one, up to 64, oldest turn first.
-- It parks nothing while the file's queue is at an older version: a runyard of version 3 still
-- claiming from it would never put the parked tenants back (the script runs before a store
-- checks the versions, so it may reach such a file before its migration).
CREATE TRIGGER IF NOT EXISTS "{work}_parks" BEFORE UPDATE OF token ON "{work}"
WHEN NEW.state = 'leased' AND OLD.state = 'ready'
    AND (SELECT s.version FROM "{schema_table}" s WHERE s.component = 'queue') >= 4
BEGIN
    INSERT OR REPLACE INTO "{turns_parked}" (tenant, turn, due_at)
    SELECT t.tenant, t.turn,
           (SELECT MIN(d.available_at) FROM "{work}" d WHERE d.tenant = t.tenant AND d.state = 'ready')
    FROM "{turns}" t
    WHERE (t.turn, t.tenant) < ((SELECT x.turn FROM "{turns}" x WHERE x.tenant = NEW.tenant), NEW.tenant)
    ORDER BY t.turn, t.tenant
    LIMIT 64;
END;
-- An item entering ready (enqueue, retry, release, requeue) due before its parked tenant's
-- due_at puts the tenant back with its turn. A new item of a tenant in neither table (a new
-- tenant, or one prune forgot) gives it the turn counter's current value as its turn. (This
-- trigger keeps the name of queue version 3's, which knew no parked tenants, so that an older
-- runyard's schema script finds it and leaves it; the migrations replace the old one. Version
-- 5's migration replaces the _claimed trigger the same way.)
CREATE TRIGGER IF NOT EXISTS "{work}_enters" AFTER INSERT ON "{work}"
BEGIN
    INSERT OR REPLACE INTO "{turns}" (tenant, turn)
    SELECT p.tenant, p.turn FROM "{turns_parked}" p
    WHERE p.tenant = NEW.tenant AND (p.due_at IS NULL OR p.due_at > NEW.available_at);
    INSERT OR IGNORE INTO "{turns}" (tenant, turn)
    SELECT NEW.tenant, c.turns FROM "{counters}" c
    WHERE c.id = 1 AND NOT EXISTS (SELECT 1 FROM "{turns_parked}" p WHERE p.tenant = NEW.tenant);
END;
CREATE TRIGGER IF NOT EXISTS "{work}_rejoins_ready" AFTER UPDATE OF state ON "{work}"
WHEN NEW.state = 'ready'
BEGIN
    INSERT OR REPLACE INTO "{turns}" (tenant, turn)
    SELECT p.tenant, p.turn FROM "{turns_parked}" p
    WHERE p.tenant = NEW.tenant AND (p.due_at IS NULL OR p.due_at > NEW.available_at);
END;

-- Execution store ---------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS "{executions}" (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    execution_id   TEXT NOT NULL UNIQUE,
    definition_id  TEXT NOT NULL,
    status         TEXT NOT NULL,
    version        INTEGER NOT NULL CHECK (version > 0),
    context        TEXT NOT NULL,
    parent_id      TEXT,
    root_path      TEXT NOT NULL,
    created_at     REAL NOT NULL,
    updated_at     REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS "{executions}_by_status" ON "{executions}" (status, seq);
CREATE INDEX IF NOT EXISTS "{executions}_by_definition" ON "{executions}" (definition_id, seq);

CREATE TABLE IF NOT EXISTS "{outbox}" (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    execution_id  TEXT NOT NULL,
    target_id     TEXT NOT NULL,
    event_id      TEXT NOT NULL,
    event_name    TEXT NOT NULL,
    data          TEXT NOT NULL,
    created_at    REAL NOT NULL
);

CREATE TABLE IF NOT EXISTS "{spawns}" (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    parent_id   TEXT NOT NULL,
    child_id    TEXT NOT NULL,
    root_path   TEXT NOT NULL,
    context     TEXT NOT NULL,
    created_at  REAL NOT NULL
);

CREATE TABLE IF NOT EXISTS "{processed}" (
    execution_id  TEXT NOT NULL,
    event_id      TEXT NOT NULL,
    processed_at  REAL NOT NULL,
    PRIMARY KEY (execution_id, event_id)
);
-- prune_processed (executions version 2): the oldest marks first.
CREATE INDEX IF NOT EXISTS "{processed}_by_age"
    ON "{processed}" (processed_at, execution_id, event_id);

CREATE TABLE IF NOT EXISTS "{timers}" (
    execution_id  TEXT NOT NULL,
    path          TEXT NOT NULL,
    fire_at       REAL NOT NULL,
    PRIMARY KEY (execution_id, path)
);
CREATE INDEX IF NOT EXISTS "{timers}_due" ON "{timers}" (fire_at, execution_id, path);

CREATE TABLE IF NOT EXISTS "{trace_heads}" (
    execution_id  TEXT PRIMARY KEY,
    last_index    INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS "{trace}" (
    execution_id  TEXT NOT NULL,
    idx           INTEGER NOT NULL,
    recorded_at   REAL NOT NULL,
    event_id      TEXT,
    event_name    TEXT,
    data          TEXT NOT NULL,
    PRIMARY KEY (execution_id, idx)
);

INSERT OR IGNORE INTO "{schema_table}" (component, version)
VALUES ('state', 4), ('queue', 5), ('executions', 2);
