"""What a SQLite store checks of the file's schema when it opens (no I/O): the tables it
needs, the versions in the schema table, and, for a queue, the version its own tables are at
(read from their CREATE texts: the schema row is shared by every set of queue tables in a file,
and each set is migrated on its own)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from runyard.sqlite.schema import (
    SCHEMA_VERSIONS,
    SqliteTables,
    migration_sql,
    migration_steps,
    missing_schema_message,
    named_indexes,
    queue_triggers_sql,
    version_message,
)

__all__ = [
    "Objects",
    "foreign_refusal",
    "queue_set_version",
    "read_objects",
    "schema_refusal",
    "verify_statements",
]

# The queue's triggers (each on the table named by the field, with this suffix).
_QUEUE_TRIGGERS = (
    ("work", "_claimed"),
    ("work", "_parks"),
    ("work", "_enters"),
    ("work", "_rejoins_ready"),
    ("turns", "_enters"),
    ("turns_parked", "_enters"),
)


def _uncommented(sql: str) -> str:
    """CREATE text without its SQL comments (a migration tool or an edited copy may add some)."""
    return re.sub(r"--[^\n]*|/\*.*?\*/", " ", sql, flags=re.DOTALL)


def _squeezed(sql: str) -> str:
    """CREATE text without white space, quotes or brackets, lower-cased: what the marks of a
    version are looked for in, however a migration tool wrote the statement."""
    return re.sub(r"[\s\"`\[\]]", "", _uncommented(sql)).lower()


Objects = Mapping[tuple[str, str], str]  # (type, name) -> CREATE text, from sqlite_master

# What marks version 5's _claimed and _enters triggers (in their squeezed text): the turn
# counter moved by a claim, and read for a tenant first seen.
_CLAIMED_5 = "turns=turns+1"
_ENTERS_5 = "c.turns"


def _has_column(objects: Objects, table: str, column: str) -> bool:
    """Whether ``table``'s CREATE text defines ``column`` (whatever its type is spelled)."""
    text = re.sub(r"[\"`\[\]]", "", _uncommented(objects.get(("table", table), ""))).lower()
    return re.search(rf"[,(]\s*{column}\b", text) is not None


def queue_set_version(tables: SqliteTables, objects: Objects) -> int:
    """The queue version (1 to 5) that the file's own objects for ``tables`` are at, read from
    their CREATE texts, newest mark first (``objects``: (type, name) -> text, for tables,
    indexes and triggers; an older runyard's schema script may have put an older index back
    on a current set). The schema table's row is one per component for the whole file, while
    queues named table by table share the file and are migrated set by set, so the row alone
    cannot say it."""
    if _has_column(objects, tables.counters, "turns"):
        return 5
    enters = _squeezed(objects.get(("trigger", tables.work + "_enters"), ""))
    if f"from{tables.turns_parked}p" in enters:
        return 4
    if not _has_column(objects, tables.work, "max_attempts"):
        return 1
    return 2 if ("index", f"{tables.work}_by_worker") in objects else 3


def _queue_set_refusal(tables: SqliteTables, objects: Objects, where: str) -> str | None:
    """Why a queue whose schema row says this version cannot use its own tables, or None."""
    wanted = SCHEMA_VERSIONS["queue"]
    at = queue_set_version(tables, objects)
    shared = (
        f"{tables.schema_table} in {where} says component 'queue' is at schema version "
        f"{wanted}, but the queue tables of {tables.work} "
    )
    tail = (
        "(that row is shared by every set of queue tables in the file, and each set is "
        "migrated on its own): migrate these tables: "
    )
    if at != wanted:
        steps = migration_steps(migration_sql("queue", at, tables), tables)
        return shared + f"are at version {at} " + tail + steps
    names = tables.names()
    for field, suffix in _QUEUE_TRIGGERS:
        name = names[field] + suffix
        if ("trigger", name) not in objects:
            return missing_schema_message(f"trigger {name} does not exist", where, tables)
    repair = _trigger_repair(tables, objects)
    if repair is not None:
        return (
            shared
            + "have an older version's _claimed or _enters trigger "
            + tail
            + (f"run `{repair}` in one transaction (see docs/sqlite.md)")
        )
    return None


def _trigger_repair(tables: SqliteTables, objects: Objects) -> str | None:
    """The SQL that finishes a migration to version 5 stopped after its ALTER (the turns
    column there, an older _claimed or _enters trigger, or none), or None. An older _claimed
    never moved the turn counter (it gave turns from the tokens), so it starts at the token
    counter, as the whole migration starts it."""
    claimed = _CLAIMED_5 in _squeezed(objects.get(("trigger", tables.work + "_claimed"), ""))
    enters = _ENTERS_5 in _squeezed(objects.get(("trigger", tables.work + "_enters"), ""))
    if claimed and enters:
        return None
    restart = "" if claimed else f'UPDATE "{tables.counters}" SET turns = claims WHERE id = 1; '
    return restart + queue_triggers_sql(tables)


def _already_current(tables: SqliteTables, found: int, where: str, repair: str | None) -> str:
    """The refusal of a queue whose tables are current while the shared row says ``found``
    (``repair``: the SQL finishing their migration, when it stopped half way)."""
    wanted = SCHEMA_VERSIONS["queue"]
    row = f"UPDATE \"{tables.schema_table}\" SET version = {wanted} WHERE component = 'queue'"
    if repair is not None:
        return (
            f"{tables.schema_table} in {where} says component 'queue' is at schema version "
            f"{found}, and the queue tables of {tables.work} have version {wanted}'s turns "
            "column but an older _claimed or _enters trigger (a migration stopped half way): "
            f"run `{repair}; {row}` in one transaction (see docs/sqlite.md)"
        )
    return (
        f"{tables.schema_table} in {where} says component 'queue' is at schema version "
        f"{found}, but the queue tables of {tables.work} are already at version {wanted}: "
        f"another set of queue tables in the file may still be at version {found} (its queue "
        "refuses to open with the migration for it, which sets the row); with none left, run "
        f"`{row}`"
    )


def schema_refusal(
    tables: SqliteTables,
    component: str,
    present: set[str],
    versions: Mapping[str, int] | None,
    where: str,
    objects: Objects | None = None,
) -> str | None:
    """Why ``component`` cannot use the file (the ConfigurationError text), or None.

    ``present`` holds the file's tables; ``versions`` the schema table's rows (None without
    it); ``objects`` the CREATE texts of the file's tables, indexes and triggers by (type,
    name) (a queue's own tables are checked when given). A component at another version is refused
    with its migration first, before a table of this version it lacks is named (the
    migration's first step adds it). The schema row is shared by every set of queue tables
    in the file, so a queue's migration is the one for the version its own tables are at, and
    a queue whose own tables are behind the row (or ahead of it) is refused saying so. Last,
    with ``objects``, an index the component's statements name (``named_indexes``) that the
    file lacks is named, with the repair (the schema script, which creates it)."""
    wanted = SCHEMA_VERSIONS[component]
    found = None if versions is None else versions.get(component)
    own = objects if component == "queue" and tables.work in present else None
    if found is not None and found != wanted:
        if found < wanted and own is not None:
            at = queue_set_version(tables, own)
            if at == wanted:
                return _already_current(tables, found, where, _trigger_repair(tables, own))
            return version_message(tables, component, found, where, migrate_from=at)
        return version_message(tables, component, found, where)
    for name in tables.relations(component):
        if name not in present:
            return missing_schema_message(f"table {name} does not exist", where, tables)
    if found != wanted:
        return version_message(tables, component, found, where)
    refusal = None if own is None else _queue_set_refusal(tables, own, where)
    for name in named_indexes(tables, component).values():
        if refusal is None and objects is not None and ("index", name) not in objects:
            # a statement names it (INDEXED BY): without it, "no such index" at every call
            refusal = missing_schema_message(f"index {name} does not exist", where, tables)
    return refusal


def read_objects(rows: Sequence[Sequence[object]]) -> tuple[set[str], Objects]:
    """The file's tables, and every object's CREATE text by (type, name), from the rows of
    verify_statements' first read. Names are lower-cased: SQLite's are case-insensitive (a
    table a migration tool created as ``RUNYARD_RUNS`` is runyard's ``runyard_runs``), and
    runyard's own are lower-case."""
    present = {str(name).lower() for kind, name, _ in rows if kind == "table"}
    return present, {(str(kind), str(name).lower()): str(sql or "") for kind, name, sql in rows}


def foreign_refusal(
    rows: Sequence[Sequence[object]], tables: SqliteTables, where: str, empty_ok: bool
) -> str | None:
    """Why a database (the rows of verify_statements' first read) is refused before runyard
    writes to it (WAL included): it has no schema table for ``tables``, unless it holds no
    object at all and ``empty_ok`` (a new file the caller gives the schema); or None."""
    present, _ = read_objects(rows)
    if tables.schema_table in present or (empty_ok and not rows):
        return None
    return missing_schema_message(f"table {tables.schema_table} does not exist", where, tables)


def verify_statements(tables: SqliteTables) -> tuple[str, str]:
    """The two reads of verify(): the file's tables, indexes and triggers (type, name, CREATE
    statement), and the schema table's versions."""
    return (
        "SELECT type, name, sql FROM sqlite_master WHERE type IN ('table', 'index', 'trigger')",
        f'SELECT component, version FROM "{tables.schema_table}"',
    )
