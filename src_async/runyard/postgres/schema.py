"""The published PostgreSQL schema and the table names it is rendered for (no I/O)."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from functools import cache
from importlib import resources

from runyard._sql import check_table_name

__all__ = ["EXPECTED_SCHEMA", "SCHEMA_VERSIONS", "StateTables", "schema_sql"]

# The schema version of each component this runyard was written for (rows of the schema table).
# state 2: the run event logs (events, event_heads), see docs/events.md.
# state 3: run and session blobs and event data are text (the client's JSON text, returned as
#   sent) instead of jsonb; the (tenant, status, seq) index on runs, for list_runs by status.
# state 4: prune(): lease epochs come from a sequence (never reused, so a pruned lease row's
#   epoch is never handed out again) and an index finds leases that are not live.
# state 5: runs and sessions keep the id of their last write (write_id), so a write whose reply
#   was lost is settled by its own id, never by comparing blobs (runyard.writes).
# state 6: the session index is (tenant, session_id, seq), so a page of list_runs with a
#   session is a range of it from the cursor, never a sort of the session's runs; the
#   tombstones table keeps a deleted run's or session's last write id (runyard.writes), so a
#   write whose reply was lost and whose record was deleted before the read-back is not sent
#   again over the delete.
# executions 2: prune_processed(): the (processed_at, execution_id, event_id) index.
# executions 3: contexts, outbox and trace data are text (the client's JSON text, returned as
#   sent) instead of jsonb, as the state tables' since state 3.
# queue 2: work payloads are text; the rotation holds only tenants with ready work (no count),
#   retired by a function.
# queue 3: a per-item max_attempts column on the work table; maintained counts (counts, delays)
#   that stats reads instead of the work table.
# queue 4: the due index's predicate holds a priority bound only its probes state, so a claim's
#   head is never planned on it (a vacuumed, never analyzed table read the whole backlog).
# queue 5: tenants whose ready items are all delayed are parked out of the rotation (the
#   turns' _parked table, _park and _rejoin functions), so a claim never probes them one by one.
SCHEMA_VERSIONS: dict[str, int] = {"state": 6, "queue": 5, "executions": 3}

# The execution store's tables (StateTables fields), in the order verify() checks them.
EXECUTION_TABLES = (
    "executions",
    "outbox",
    "spawns",
    "processed",
    "timers",
    "trace",
    "trace_heads",
)


@dataclass(frozen=True)
class StateTables:
    """The names of runyard's tables (and optionally their schema).

    Every name must be a plain lower-case identifier; anything else raises ConfigurationError,
    so no name can ever inject SQL.
    """

    runs: str = "runyard_runs"
    sessions: str = "runyard_sessions"
    run_leases: str = "runyard_run_leases"
    tombstones: str = "runyard_tombstones"
    work: str = "runyard_work_items"
    turns: str = "runyard_tenant_turns"
    schema_table: str = "runyard_schema"
    schema: str | None = None
    executions: str = "runyard_executions"
    outbox: str = "runyard_execution_outbox"
    spawns: str = "runyard_execution_spawns"
    processed: str = "runyard_execution_processed"
    timers: str = "runyard_execution_timers"
    trace: str = "runyard_execution_trace"
    trace_heads: str = "runyard_execution_trace_heads"
    events: str = "runyard_run_events"
    event_heads: str = "runyard_run_event_heads"
    counts: str = "runyard_queue_counts"
    delays: str = "runyard_queue_delays"

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "schema" and value is None:
                continue
            check_table_name(value, f"table name {f.name}" if f.name != "schema" else "schema")

    @classmethod
    def with_prefix(cls, prefix: str, *, schema: str | None = None) -> StateTables:
        """Return the default names with ``runyard_`` replaced by ``prefix``."""
        return cls(
            runs=f"{prefix}runs",
            sessions=f"{prefix}sessions",
            run_leases=f"{prefix}run_leases",
            tombstones=f"{prefix}tombstones",
            work=f"{prefix}work_items",
            turns=f"{prefix}tenant_turns",
            schema_table=f"{prefix}schema",
            schema=schema,
            executions=f"{prefix}executions",
            outbox=f"{prefix}execution_outbox",
            spawns=f"{prefix}execution_spawns",
            processed=f"{prefix}execution_processed",
            timers=f"{prefix}execution_timers",
            trace=f"{prefix}execution_trace",
            trace_heads=f"{prefix}execution_trace_heads",
            events=f"{prefix}run_events",
            event_heads=f"{prefix}run_event_heads",
            counts=f"{prefix}queue_counts",
            delays=f"{prefix}queue_delays",
        )

    @property
    def turns_parked(self) -> str:
        """The parked tenants' table (queue version 5), named after the rotation's."""
        return self.turns + "_parked"

    def qualified(self, name: str) -> str:
        """Return ``name`` quoted and, when a schema is set, schema-qualified."""
        return f'"{self.schema}"."{name}"' if self.schema else f'"{name}"'

    def sequence(self, kind: str) -> str:
        """Return the qualified name of one of the sequences: the work queue's (work, token,
        turn) or the run leases' epochs (lease_epoch)."""
        bases = {"work": self.work, "token": self.work, "turn": self.turns}
        base = bases.get(kind, self.run_leases)
        suffix = {
            "work": "_ready_seq",
            "token": "_token_seq",
            "turn": "_counter_seq",
            "lease_epoch": "_epoch_seq",
        }[kind]
        return self.qualified(base + suffix)

    def placeholders(self) -> dict[str, str]:
        """The values that fill the braces of the schema and statement templates."""
        values = {
            "runs": self.qualified(self.runs),
            "sessions": self.qualified(self.sessions),
            "run_leases": self.qualified(self.run_leases),
            "tombstones": self.qualified(self.tombstones),
            "tombstones_name": self.tombstones,
            "work": self.qualified(self.work),
            "turns": self.qualified(self.turns),
            "schema_table": self.qualified(self.schema_table),
            "runs_name": self.runs,
            "run_leases_name": self.run_leases,
            "work_name": self.work,
            "turns_name": self.turns,
            "work_seq": self.sequence("work"),
            "token_seq": self.sequence("token"),
            "turn_seq": self.sequence("turn"),
            "lease_epoch_seq": self.sequence("lease_epoch"),
            "turns_retire": self.qualified(self.turns + "_retire"),
            "turns_park": self.qualified(self.turns + "_park"),
            "turns_rejoin": self.qualified(self.turns + "_rejoin"),
            "turns_parked": self.qualified(self.turns_parked),
            "counts": self.qualified(self.counts),
            "delays": self.qualified(self.delays),
            "delays_name": self.delays,
            "counts_seq": self.qualified(self.counts + "_shard_seq"),
        }
        # Sequence names as text literals for nextval('...'); identifiers never hold a quote.
        values["work_seq_name"] = values["work_seq"]
        values["token_seq_name"] = values["token_seq"]
        values["turn_seq_name"] = values["turn_seq"]
        values["lease_epoch_seq_name"] = values["lease_epoch_seq"]
        for name in (*EXECUTION_TABLES, "events", "event_heads"):
            values[name] = self.qualified(getattr(self, name))
            values[f"{name}_name"] = getattr(self, name)
        return values

    def state_relations(self) -> tuple[str, ...]:
        """Qualified names of everything the state store needs."""
        return (
            self.qualified(self.schema_table),
            self.qualified(self.runs),
            self.qualified(self.sessions),
            self.qualified(self.run_leases),
            self.sequence("lease_epoch"),
            self.qualified(self.tombstones),
            self.qualified(self.events),
            self.qualified(self.event_heads),
        )

    def queue_relations(self) -> tuple[str, ...]:
        """Qualified names of everything the work queue needs."""
        return (
            self.qualified(self.schema_table),
            self.qualified(self.work),
            self.qualified(self.turns),
            self.qualified(self.turns_parked),
            self.sequence("work"),
            self.sequence("token"),
            self.sequence("turn"),
            self.qualified(self.counts),
            self.qualified(self.delays),
            self.qualified(self.counts + "_shard_seq"),
        )

    def execution_relations(self) -> tuple[str, ...]:
        """Qualified names of everything the execution store needs."""
        return (
            self.qualified(self.schema_table),
            *(self.qualified(getattr(self, name)) for name in EXECUTION_TABLES),
        )


@cache
def _template() -> str:
    return resources.files("runyard.postgres").joinpath("schema.sql").read_text("utf-8")


def schema_sql(tables: StateTables | None = None) -> str:
    """Return the DDL of runyard's schema for ``tables`` (the defaults when None).

    Apply it with your migration tool; runyard itself never runs DDL. With ``tables.schema``
    set, the DDL does not create that schema: its first line says the caller must.
    """
    tables = tables or StateTables()
    ddl = _template().format_map(tables.placeholders())
    if tables.schema is None:
        return ddl
    note = (
        f'-- The schema "{tables.schema}" must exist already: this DDL does not create it '
        f'(CREATE SCHEMA "{tables.schema}"; in your migration, before what follows).\n'
    )
    return note + ddl


@cache
def index_names(tables: StateTables) -> tuple[str, ...]:
    """The names of the indexes runyard's schema creates for ``tables`` (verify() refuses a
    database where one of them is INVALID)."""
    return tuple(re.findall(r'CREATE (?:UNIQUE )?INDEX "([^"]+)"', schema_sql(tables)))


EXPECTED_SCHEMA = schema_sql()
"""The DDL for the default table names, versioned by the rows it writes to the schema table."""
