"""Every SQL statement the PostgreSQL execution store sends, rendered once per StateTables.

Same conventions as ``_postgres_sql``: native ``$n`` placeholders with a cast on every use (so
psycopg and asyncpg run the same text), JSON stored and selected as text, time always a parameter.

A commit is ONE statement: the compare-and-swap on the execution row is the first
data-modifying CTE (``cas``) and every other write selects from it, so a commit that loses the
CAS writes nothing (and allocates no seq). The statement also returns the version its snapshot
saw, which the store reports in StoreConflict.
"""

from __future__ import annotations

from functools import cache

from runyard.postgres.schema import StateTables
from runyard.postgres.statements import Statements, statements
from runyard.postgres.statements.retention import EXECUTION_RETENTION

__all__ = ["EXECUTION_COLUMN_COUNT", "execution_statements", "list_statement_name"]

_EXECUTION_COLUMNS = (
    "execution_id",
    "definition_id",
    "status",
    "version",
    "context::text",
    "parent_id",
    "root_path",
    "created_at",
    "updated_at",
    "seq",
)
EXECUTION_COLUMN_COUNT = len(_EXECUTION_COLUMNS)

# $1 id $2 definition_id $3 status $4 context $5 parent_id $6 root_path $7 now $8 expected
_CAS_CREATE = """cas AS (
    INSERT INTO {executions} AS e (execution_id, definition_id, status, version, context,
                                   parent_id, root_path, created_at, updated_at)
    SELECT $1::text, $2::text, $3::text, 1, $4::text, $5::text, $6::text,
           $7::float8, $7::float8
    WHERE $8::bigint = 0
    ON CONFLICT (execution_id) DO NOTHING
    RETURNING e.execution_id
)"""
_CAS_UPDATE = """cas AS (
    UPDATE {executions} AS e
    SET definition_id = $2::text, status = $3::text, version = e.version + 1,
        context = $4::text, parent_id = $5::text, root_path = $6::text,
        updated_at = $7::float8
    WHERE e.execution_id = $1::text AND e.version = $8::bigint
    RETURNING e.execution_id
)"""

# $9 processed event id (NULL: none)
_MARK = """mark AS (
    INSERT INTO {processed} (execution_id, event_id, processed_at)
    SELECT cas.execution_id, $9::text, $7::float8 FROM cas WHERE $9::text IS NOT NULL
    ON CONFLICT (execution_id, event_id) DO NOTHING
)"""

# The version this statement's snapshot saw (0: none). When a concurrent commit won after the
# snapshot was taken this still shows the expected version, and the store reads it again.
_FOUND = "(SELECT f.version FROM {executions} f WHERE f.execution_id = $1::text)"

# $10-$13 emits (target ids, event ids, names, data as JSON text), in order
# $14 timer paths to cancel; $15, $16 timer paths to (re-)schedule and their fire times: the
#     net effect of the commit's timer ops in order, so no row is written twice
# $17-$19 spawns (child ids, root paths, contexts as JSON text), in order
# $20 a trace step? $21 its event id $22 its event name $23 its data $24 trace_max
_FULL_WRITES = """emitted AS (
    INSERT INTO {outbox} (execution_id, target_id, event_id, event_name, data, created_at)
    SELECT cas.execution_id, m.target_id, m.event_id, m.event_name, m.data, $7::float8
    FROM cas, unnest($10::text[], $11::text[], $12::text[], $13::text[])
         WITH ORDINALITY AS m(target_id, event_id, event_name, data, n)
    ORDER BY m.n
    RETURNING seq
), cancelled AS (
    DELETE FROM {timers} t USING cas
    WHERE t.execution_id = cas.execution_id AND t.path = ANY($14::text[])
), scheduled AS (
    INSERT INTO {timers} AS t (execution_id, path, fire_at)
    SELECT cas.execution_id, s.path, s.fire_at
    FROM cas, unnest($15::text[], $16::float8[]) AS s(path, fire_at)
    ON CONFLICT (execution_id, path) DO UPDATE SET fire_at = EXCLUDED.fire_at
), spawned AS (
    INSERT INTO {spawns} (parent_id, child_id, root_path, context, created_at)
    SELECT cas.execution_id, c.child_id, c.root_path, c.context, $7::float8
    FROM cas, unnest($17::text[], $18::text[], $19::text[])
         WITH ORDINALITY AS c(child_id, root_path, context, n)
    ORDER BY c.n
), {trace_writes}"""

# The trace ring: bump the execution's head (its row lock orders concurrent steps), insert the
# step at the new index, and delete what fell out of the ring. Used by commit and append_trace.
# The delete looks only at the last TRIM_WINDOW indices below the ring, so it never walks the
# dead index entries of every step ever trimmed (they pile up until vacuum). A step committed
# by a concurrent transaction this statement's snapshot cannot see is deleted by one of the
# next TRIM_WINDOW steps; read_trace filters on the head, so it never shows more than trace_max.
TRIM_WINDOW = 32
_TRACE_WRITES = """head AS (
    INSERT INTO {trace_heads} AS h (execution_id, last_index)
    SELECT {source_id}, 1 {source_from}
    ON CONFLICT (execution_id) DO UPDATE SET last_index = h.last_index + 1
    RETURNING h.execution_id, h.last_index
), traced AS (
    INSERT INTO {trace} (execution_id, idx, recorded_at, event_id, event_name, data)
    SELECT head.execution_id, head.last_index, {now}, {event_id}::text, {event_name}::text,
           {data}::text
    FROM head
), trimmed AS (
    DELETE FROM {trace} t USING head
    WHERE t.execution_id = head.execution_id
      AND t.idx > head.last_index - {trace_max}::bigint - {TRIM_WINDOW}
      AND t.idx <= head.last_index - {trace_max}::bigint
)"""

_TRACE_WRITES = _TRACE_WRITES.replace("{TRIM_WINDOW}", str(TRIM_WINDOW))
_COMMIT_TRACE = _TRACE_WRITES.replace("{source_id}", "cas.execution_id").replace(
    "{source_from}", "FROM cas WHERE $20::boolean"
)
_APPEND_TRACE = _TRACE_WRITES.replace("{source_id}", "$1::text").replace("{source_from}", "")

_TEMPLATES: dict[str, str] = {
    # -- save / state-only commit: CAS and the optional processed mark ---------------------
    "exec_save_create": f"WITH {_CAS_CREATE}, {_MARK}\nSELECT (SELECT count(*) FROM cas), {_FOUND}",
    "exec_save_update": f"WITH {_CAS_UPDATE}, {_MARK}\nSELECT (SELECT count(*) FROM cas), {_FOUND}",
    # -- the full commit: everything in one statement --------------------------------------
    "exec_commit_create": f"WITH {_CAS_CREATE}, {_MARK}, {_FULL_WRITES}\n"
    f"SELECT (SELECT count(*) FROM cas), {_FOUND}, ARRAY(SELECT seq FROM emitted ORDER BY seq)",
    "exec_commit_update": f"WITH {_CAS_UPDATE}, {_MARK}, {_FULL_WRITES}\n"
    f"SELECT (SELECT count(*) FROM cas), {_FOUND}, ARRAY(SELECT seq FROM emitted ORDER BY seq)",
    # -- reads -------------------------------------------------------------------------------
    # $1 id
    "exec_load": "SELECT {exe_cols} FROM {executions} e WHERE e.execution_id = $1::text",
    "exec_version": "SELECT e.version FROM {executions} e WHERE e.execution_id = $1::text",
    # $1 id $2 event id: one row, always
    "exec_load_for_event": """
SELECT EXISTS (SELECT 1 FROM {processed} p
               WHERE p.execution_id = $1::text AND p.event_id = $2::text),
       {exe_cols}
FROM (SELECT 1) AS one LEFT JOIN {executions} e ON e.execution_id = $1::text""",
    "exec_is_processed": """
SELECT EXISTS (SELECT 1 FROM {processed} p
               WHERE p.execution_id = $1::text AND p.event_id = $2::text)""",
    # -- outbox and spawns -------------------------------------------------------------------
    # $1 limit
    "exec_pending_outbox": """
SELECT o.seq, o.target_id, o.event_id, o.event_name, o.data::text
FROM {outbox} o ORDER BY o.seq LIMIT $1::bigint""",
    "exec_ack_outbox": "DELETE FROM {outbox} o WHERE o.seq = $1::bigint RETURNING o.seq",
    "exec_pending_spawns": """
SELECT s.seq, s.parent_id, s.child_id, s.root_path, s.context::text
FROM {spawns} s ORDER BY s.seq LIMIT $1::bigint""",
    "exec_ack_spawn": "DELETE FROM {spawns} s WHERE s.seq = $1::bigint RETURNING s.seq",
    # -- timers ------------------------------------------------------------------------------
    # $1 now $2 limit
    "exec_due_timers": """
SELECT t.execution_id, t.path, t.fire_at FROM {timers} t
WHERE t.fire_at <= $1::float8
ORDER BY t.fire_at, t.execution_id, t.path LIMIT $2::bigint""",
    # $1 id $2 path $3 the fire time the sweep read
    "exec_delete_timer": """
DELETE FROM {timers} t
WHERE t.execution_id = $1::text AND t.path = $2::text AND t.fire_at = $3::float8
RETURNING 1""",
    # -- trace -------------------------------------------------------------------------------
    # $1 id $2 trace_max: only the ring, even if a concurrent step has not trimmed it yet
    "exec_read_trace": """
SELECT t.idx, t.recorded_at, t.event_id, t.event_name, t.data::text
FROM {trace} t JOIN {trace_heads} h ON h.execution_id = t.execution_id
WHERE t.execution_id = $1::text AND h.execution_id = $1::text
  AND t.idx > h.last_index - $2::bigint
ORDER BY t.idx""",
    # $1 id $2 now $3 event id $4 event name $5 data $6 trace_max
    "exec_append_trace": f"WITH {_APPEND_TRACE}\nSELECT head.last_index FROM head",
}

_TRACE_PARAMS = {
    "exec_commit_create": ("$7::float8", "$21", "$22", "$23", "$24"),
    "exec_commit_update": ("$7::float8", "$21", "$22", "$23", "$24"),
    "exec_append_trace": ("$2::float8", "$3", "$4", "$5", "$6"),
}

# list_executions: one statement per combination of filters, so each can use its index.
# $1 after seq $2 limit + 1, then the filters given, in this order.
_LIST_FILTERS = (("status", "e.status = {p}::text"), ("definition", "e.definition_id = {p}::text"))


def list_statement_name(status: bool, definition: bool, roots_only: bool) -> str:
    """Return the name of the listing statement for the filters given."""
    return f"exec_list_{int(status)}{int(definition)}{int(roots_only)}"


def _list_templates() -> dict[str, str]:
    out = {}
    for status in (False, True):
        for definition in (False, True):
            for roots in (False, True):
                where = ["e.seq > $1::bigint"]
                n = 3
                for given, (_, clause) in zip((status, definition), _LIST_FILTERS, strict=True):
                    if given:
                        where.append(clause.replace("{p}", f"${n}"))
                        n += 1
                if roots:
                    where.append("e.parent_id IS NULL")
                out[list_statement_name(status, definition, roots)] = (
                    "SELECT {exe_cols} FROM {executions} e WHERE "
                    + " AND ".join(where)
                    + " ORDER BY e.seq LIMIT $2::bigint"
                )
    return out


def _render(name: str, text: str) -> str:
    text = text.replace("{trace_writes}", _COMMIT_TRACE)
    params = _TRACE_PARAMS.get(name)
    if params is not None:
        keys = ("now", "event_id", "event_name", "data", "trace_max")
        for key, value in zip(keys, params, strict=True):
            text = text.replace("{" + key + "}", value)
    return text


@cache
def execution_statements(tables: StateTables) -> Statements:
    """Return the execution store's statements (and the shared verify ones) for ``tables``."""
    values = tables.placeholders()
    values["exe_cols"] = ", ".join(f"e.{c}" for c in _EXECUTION_COLUMNS)
    texts = dict(statements(tables).texts)
    templates = {**_TEMPLATES, **EXECUTION_RETENTION, **_list_templates()}
    for name, template in templates.items():
        texts[name] = _render(name, template).format_map(values).strip()
    return Statements(texts)
