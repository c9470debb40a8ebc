"""The published SQLite schema and the table names it is rendered for (no I/O)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import cache
from importlib import resources

from runyard._sql import MAX_TABLE_NAME, check_table_name
from runyard.errors import ConfigurationError

__all__ = [
    "DATABASE_NOW",
    "MAX_TABLE_PREFIX",
    "SCHEMA_VERSIONS",
    "SQLITE_SCHEMA",
    "SqliteTables",
    "check_table_prefix",
    "check_tables",
    "create_script",
    "migration_sql",
    "migration_steps",
    "missing_schema_message",
    "named_indexes",
    "queue_triggers_sql",
    "render",
    "schema_named",
    "schema_sql",
    "version_message",
]

# The schema version of each component this runyard was written for (rows of the schema table).
# state 2: the run event logs (the events table), see docs/events.md.
# queue 2: the work table's max_attempts column (a per-item attempt budget); the index over
# every ready_seq is gone (the claim index finds the next one).
# state 3: prune(): the lease_floors table and the run_leases (expires_at) index.
# executions 2: prune_processed(): the processed (processed_at, execution_id, event_id) index.
# queue 3: no index by worker (adopt walks the live leases in the lapsing index): a claim and
# its completion write two pages fewer.
# state 4: list_runs by status: the runs (tenant, status, seq) index.
# queue 4: parked tenants (the turns_parked table, its indexes and three triggers): a claim no
# longer probes, at every call, the tenants in front of the one it serves that have no due work.
# queue 5: the counters' turns column (a turn counter that only claims move; adopt's tokens no
# longer change the turns of tenants that join after it), and the two triggers that use it.
SCHEMA_VERSIONS: dict[str, int] = {"state": 4, "queue": 5, "executions": 2}

# State 1, 2 or 3 to 4: SQLITE_SCHEMA adds every table and index of the state since version 1
# (the events table, the lease floors, the index of leases by expiry, the index by status).
_STATE_4 = "UPDATE \"{schema_table}\" SET version = 4 WHERE component = 'state'"

# Queue 4 to 5: the turn counter starts where the claim counter is (every turn so far was a
# token), and the two triggers that give turns are replaced by version 5's, under their names.
_QUEUE_TRIGGERS_5 = (
    'DROP TRIGGER IF EXISTS "{work}_claimed"; {create_claimed}; '
    'DROP TRIGGER IF EXISTS "{work}_enters"; {create_enters}'
)
_QUEUE_FROM_4 = (
    'ALTER TABLE "{counters}" ADD COLUMN turns INTEGER NOT NULL DEFAULT 0; '
    'UPDATE "{counters}" SET turns = claims WHERE id = 1; '
    + _QUEUE_TRIGGERS_5
    + "; UPDATE \"{schema_table}\" SET version = 5 WHERE component = 'queue'"
)
# Queue 3 to 5: SQLITE_SCHEMA adds the parked table, its indexes and triggers (version 4); the
# _enters trigger of version 3 (it knew no parked tenants) is replaced as from version 4.
_QUEUE_FROM_3 = _QUEUE_FROM_4
# Queue 2 to 5 (the indexes of ready items are version 2's).
_QUEUE_FROM_2 = 'DROP INDEX IF EXISTS "{work}_by_worker"; ' + _QUEUE_FROM_3

# How a file at an older version of a component reaches the current one: the SQL to run (after
# SQLITE_SCHEMA, which adds missing tables and indexes), keyed by (component, version found).
_MIGRATIONS: dict[tuple[str, int], str] = {
    ("queue", 1): (
        'ALTER TABLE "{work}" ADD COLUMN max_attempts INTEGER '
        "CHECK (max_attempts IS NULL OR max_attempts >= 1); "
        'DROP INDEX IF EXISTS "{work}_ready_seq"; ' + _QUEUE_FROM_2
    ),
    ("queue", 2): _QUEUE_FROM_2,
    ("queue", 3): _QUEUE_FROM_3,
    ("queue", 4): _QUEUE_FROM_4,
    ("state", 1): _STATE_4,
    ("state", 2): _STATE_4,
    ("state", 3): _STATE_4,
}


@dataclass(frozen=True)
class SqliteTables:
    """The names of runyard's SQLite tables.

    Every name must be a plain lower-case identifier, and no two the same; anything else raises
    ConfigurationError, so no name can ever inject SQL or stand for two tables.
    """

    runs: str = "runyard_runs"
    sessions: str = "runyard_sessions"
    run_leases: str = "runyard_run_leases"
    lease_floors: str = "runyard_run_lease_floors"
    events: str = "runyard_run_events"
    work: str = "runyard_work_items"
    turns: str = "runyard_tenant_turns"
    counters: str = "runyard_counters"
    schema_table: str = "runyard_schema"
    executions: str = "runyard_executions"
    outbox: str = "runyard_execution_outbox"
    spawns: str = "runyard_execution_spawns"
    processed: str = "runyard_execution_processed"
    timers: str = "runyard_execution_timers"
    trace: str = "runyard_execution_trace"
    trace_heads: str = "runyard_execution_trace_heads"

    def __post_init__(self) -> None:
        seen: dict[str, str] = {}
        for f in fields(self):
            name = getattr(self, f.name)
            check_table_name(name, f"table name {f.name}", reserved_prefix="sqlite_")
            if name in seen:
                raise ConfigurationError(
                    f"table names {seen[name]} and {f.name} are both {name!r}: every table "
                    "needs a name of its own"
                )
            seen[name] = f.name
        parked = check_table_name(
            self.turns_parked,
            "table name turns_parked (turns + '_parked')",
            reserved_prefix="sqlite_",
        )
        if parked in seen:
            raise ConfigurationError(
                f"table name {seen[parked]} is {parked!r}, the parked tenants' table of turns "
                f"{self.turns!r}: every table needs a name of its own"
            )
        self._check_object_names()

    def _check_object_names(self) -> None:
        """Refuse names that give two of the schema's objects one name (a table named like
        another table's index or trigger, ``<table>_<suffix>``): SQLite would refuse the
        table, or skip the index as already there."""
        names = self.names()
        made: dict[str, str] = {}
        for kind, field, suffix in _schema_objects():
            name = names[field] + suffix
            what = f"{kind.lower()} {name!r} ({field}{' + ' + repr(suffix) if suffix else ''})"
            if name in made:
                raise ConfigurationError(
                    f"these table names give the schema two objects named {name!r}: "
                    f"{made[name]} and {what}; every table needs a name that no index or "
                    "trigger of the schema has (a table's are named <table>_<suffix>)"
                )
            made[name] = what

    @property
    def turns_parked(self) -> str:
        """The parked tenants' table (queue version 4), named after the rotation's."""
        return self.turns + "_parked"

    @classmethod
    def with_prefix(cls, prefix: str) -> SqliteTables:
        """Return the default names with ``runyard_`` replaced by ``prefix``.

        Raises ConfigurationError naming ``table_prefix`` and the rule when a name it makes is
        not a plain identifier (see ``check_table_prefix``)."""
        check_table_prefix(prefix)
        return cls(
            **{f.name: prefix + str(f.default).removeprefix("runyard_") for f in fields(cls)}
        )

    def names(self) -> dict[str, str]:
        """The values that fill the braces of the schema and statement templates."""
        return {
            **{f.name: getattr(self, f.name) for f in fields(self)},
            "turns_parked": self.turns_parked,
        }

    def relations(self, component: str) -> tuple[str, ...]:
        """The tables ``component`` (state, queue or executions) needs, schema table first."""
        by_component = {
            "state": (self.runs, self.sessions, self.run_leases, self.lease_floors, self.events),
            "queue": (self.work, self.turns, self.turns_parked, self.counters),
            "executions": (
                self.executions,
                self.outbox,
                self.spawns,
                self.processed,
                self.timers,
                self.trace,
                self.trace_heads,
            ),
        }
        return (self.schema_table, *by_component[component])


# The longest table name after the prefix ("execution_trace_heads"): what a prefix leaves room for.
_LONGEST_SUFFIX = max(
    (str(f.default).removeprefix("runyard_") for f in fields(SqliteTables)), key=len
)
MAX_TABLE_PREFIX = MAX_TABLE_NAME - len(_LONGEST_SUFFIX)
_PREFIX = re.compile(rf"[a-z_][a-z0-9_]{{0,{MAX_TABLE_PREFIX - 1}}}")


def check_tables(tables: object) -> SqliteTables:
    """``tables`` if it is a SqliteTables, the default names for None; else ConfigurationError
    naming ``tables`` (a prefix string given in its place failed later as an AttributeError,
    after the file was made)."""
    if tables is None:
        return SqliteTables()
    if not isinstance(tables, SqliteTables):
        raise ConfigurationError(
            f"tables must be a runyard.sqlite.SqliteTables (or None for the default names), "
            f"not {type(tables).__name__}; SqliteTables.with_prefix(prefix) makes one from a "
            "prefix",
            fields=("tables",),
        )
    return tables


def check_table_prefix(prefix: object) -> str:
    """Return ``prefix`` if every table name it makes (``SqliteTables.with_prefix``) is a plain
    identifier; else raise ConfigurationError naming ``table_prefix`` and the rule: at most
    MAX_TABLE_PREFIX (27) lower-case letters, digits and underscores, starting with a letter
    or underscore, and not with ``sqlite_`` (SQLite's own tables); not empty (the tables
    would be named ``runs``, ``schema``, ... beside an application's own)."""
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix) or prefix.startswith("sqlite_"):
        raise ConfigurationError(
            f"table_prefix={prefix!r} is not a table prefix: use at most {MAX_TABLE_PREFIX} "
            "lower-case letters, digits and underscores (at least one), starting with a letter "
            f"or underscore and not with 'sqlite_' (the longest table name, "
            f"<prefix>{_LONGEST_SUFFIX}, must be a plain identifier of at most {MAX_TABLE_NAME} "
            "characters)",
            fields=("table_prefix",),
        )
    return prefix


# The schema's tables, indexes and triggers: (kind, the field naming the table, suffix).
_OBJECT = re.compile(r'CREATE (?:UNIQUE )?(TABLE|INDEX|TRIGGER) IF NOT EXISTS "\{(\w+)\}(\w*)"')


@cache
def _schema_objects() -> tuple[tuple[str, str, str], ...]:
    return tuple(_OBJECT.findall(_template()))


@cache
def _template() -> str:
    return resources.files("runyard.sqlite").joinpath("schema.sql").read_text("utf-8")


def schema_sql(tables: SqliteTables | None = None) -> str:
    """Return the DDL of runyard's SQLite schema for ``tables`` (the defaults when None).

    Every statement is idempotent; apply it with ``executescript`` or your migration tool.
    """
    return _template().format_map((tables or SqliteTables()).names())


def _trigger(suffix: str) -> str:
    """The schema's CREATE statement of the ``{work}<suffix>`` trigger (a template), which a
    queue migration runs after dropping the older version's."""
    text = _template()
    start = text.index(f'CREATE TRIGGER IF NOT EXISTS "{{work}}{suffix}"')
    return text[start : text.index("END;", start) + len("END")]


def _rendered_migration(migration: str, tables: SqliteTables) -> str:
    """A migration's SQL for ``tables``, the CREATE statements of its triggers filled in."""
    for suffix in ("_enters", "_claimed"):
        migration = migration.replace(f"{{create{suffix}}}", _trigger(suffix))
    return migration.format_map(tables.names())


def migration_sql(component: str, version: int, tables: SqliteTables) -> str:
    """The SQL that takes ``component``'s tables at ``version`` to this runyard's (after the
    schema for ``tables`` is applied), rendered for ``tables``; KeyError when none is known."""
    return _rendered_migration(_MIGRATIONS[(component, version)], tables)


def queue_triggers_sql(tables: SqliteTables) -> str:
    """The SQL that replaces a queue's _claimed and _enters triggers with this version's."""
    return _rendered_migration(_QUEUE_TRIGGERS_5, tables)


def create_script(tables: SqliteTables | None = None) -> str:
    """The schema DDL wrapped in one ``BEGIN IMMEDIATE`` transaction: all of it or nothing."""
    return f"BEGIN IMMEDIATE;\n{schema_sql(tables)}\nCOMMIT;\n"


def schema_named(tables: SqliteTables | None) -> str:
    """How a message names the schema to apply: SQLITE_SCHEMA holds the default table names."""
    if tables is None or tables == SqliteTables():
        return "runyard.sqlite.SQLITE_SCHEMA"
    return (
        "runyard.sqlite.schema_sql(tables) for these table names (SQLITE_SCHEMA holds the "
        "default names)"
    )


def named_indexes(tables: SqliteTables, component: str) -> dict[str, str]:
    """The indexes ``component``'s statements name with ``INDEXED BY`` (placeholder -> name).
    A file without one is refused when a store opens (each statement that names it would
    fail with "no such index")."""
    if component == "state":
        return {"runs_by_status": f"{tables.runs}_by_status"}
    if component == "queue":
        return {
            "work_ready": f"{tables.work}_ready",
            "work_due": f"{tables.work}_due",
            "turns_parked_due": f"{tables.turns_parked}_due",
        }
    return {}


def missing_schema_message(what: str, where: str, tables: SqliteTables | None = None) -> str:
    """The ConfigurationError text for a database without runyard's schema, with the repair."""
    return (
        f"{what} in {where}: create runyard's schema first: open the store with "
        "create_schema=True, or call runyard.sqlite.create_schema(path), or apply "
        f"{schema_named(tables)} with your migration tool (see docs/sqlite.md)"
    )


def version_message(
    tables: SqliteTables,
    component: str,
    found: int | None,
    where: str,
    *,
    migrate_from: int | None = None,
) -> str:
    """The ConfigurationError text for a component at another schema version, with the repair:
    the SQL that migrates the file when runyard knows it (from ``migrate_from``, the version
    the component's own tables are at, when known; else from ``found``), else the matching
    runyard."""
    wanted = SCHEMA_VERSIONS[component]
    head = (
        f"{tables.schema_table} in {where} says component {component!r} is at schema version "
        f"{found}, but this runyard was written for version {wanted}: "
    )
    start = found if migrate_from is None else migrate_from
    migration = None if start is None else _MIGRATIONS.get((component, start))
    if migration is None:
        return head + (
            f"migrate the file ({schema_named(tables)}, see docs/sqlite.md) or install "
            "the matching runyard"
        )
    return (
        head
        + "migrate the file: "
        + migration_steps(_rendered_migration(migration, tables), tables)
    )


def migration_steps(sql: str, tables: SqliteTables) -> str:
    """The repair a refusal gives: the schema for ``tables``, then ``sql`` in one transaction."""
    return (
        f"apply {schema_named(tables)}, then run `{sql}` in one transaction (see "
        "docs/sqlite.md), or install the matching runyard"
    )


SQLITE_SCHEMA = schema_sql()
"""The DDL for the default table names, versioned by the rows it writes to the schema table."""


# The database's clock in seconds since the epoch (julianday: millisecond resolution). SQLite
# gives every call in one statement the same 'now'.
DATABASE_NOW = "(julianday('now') - 2440587.5) * 86400.0"
_NOW_PARAMETER = re.compile(r":now\b")


def render(
    templates: dict[str, str], tables: SqliteTables, indexes: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Fill every template's table names (``{runs}`` ...) for ``tables``, and the index names
    of ``indexes`` (placeholder to name), as quoted identifiers; make ``:now`` the database's
    time unless the caller binds one (an injected clock)."""
    names = {name: f'"{value}"' for name, value in {**tables.names(), **(indexes or {})}.items()}
    now = f"COALESCE(:now, {DATABASE_NOW})"
    return {
        name: _NOW_PARAMETER.sub(now, text.format_map(names)).strip()
        for name, text in templates.items()
    }
