"""The execution store's writes, each run whole on the driver's thread (shared by both twins).

``commit_body`` and ``trace_body`` are bodies of one ``BEGIN IMMEDIATE`` transaction
(``flavours.in_transaction``), as in ``queue_transactions``: they send their statements on the
``sqlite3`` connection ``raw``, which lives on aiosqlite's thread in the async twin, so a commit
is one trip to the driver whatever it carries. ``now`` is the injected clock's time, or None:
the database's, read by the first statement and used by every later one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

from runyard._json import dump_json, load_json
from runyard.errors import StoreConflict
from runyard.executions.models import TraceEntry, TraceStep
from runyard.executions.planning import CommitPlan
from runyard.sqlite.flavours import Row

__all__ = ["commit_body", "trace_body"]


def _rows(raw: sqlite3.Connection, sql: str, params: Mapping[str, Any]) -> list[Row]:
    return raw.execute(sql, params).fetchall()


def commit_body(
    raw: sqlite3.Connection,
    sql: Mapping[str, str],
    now: float | None,
    plan: CommitPlan,
    context: str,
    trace_max: int,
) -> list[int]:
    """The compare-and-swap on the execution row first (a lost CAS raises StoreConflict, and
    the transaction is rolled back before anything else is written), then the outbox entries,
    the processed mark, the timer operations in order, the spawn intents and the trace step.
    ``context`` is the execution's context, encoded before the transaction began. Returns the
    outbox seqs."""
    snapshot = plan.execution
    expected = snapshot.version
    ids = {"execution_id": snapshot.id}
    # The columns the listing indexes cover are written apart, and only when one changed: an
    # UPDATE that names an indexed column rewrites its index entries even for the same value.
    labels = {**ids, "definition_id": snapshot.definition_id, "status": snapshot.status}
    row = {
        **ids,
        "context": context,
        "parent_id": snapshot.parent_id,
        "root_path": snapshot.root_path,
        "now": now,
    }
    if expected == 0:
        written = _rows(raw, sql["create"], {**labels, **row})
    else:
        written = _rows(raw, sql["update"], {**row, "expected": expected})
        if written:
            raw.execute(sql["relabel"], labels)
    if not written:
        found = _rows(raw, sql["version"], ids)
        raise StoreConflict(snapshot.id, expected, int(found[0][0]) if found else 0)
    # Everything else this commit writes carries the execution's update time.
    now = float(written[0][1])
    seqs = []
    for target_id, event in plan.emits:
        emit = {
            **ids,
            "target_id": target_id,
            "event_id": event.id,
            "event_name": event.name,
            "data": dump_json(event.data),
            "now": now,
        }
        seqs.append(int(_rows(raw, sql["emit"], emit)[0][0]))
    if plan.processed_event_id is not None:
        raw.execute(sql["mark_processed"], {**ids, "event_id": plan.processed_event_id, "now": now})
    for op in plan.timers:
        if op.action == "schedule":
            raw.execute(sql["schedule_timer"], {**ids, "path": op.path, "fire_at": op.fire_at})
        else:
            raw.execute(sql["cancel_timer"], {**ids, "path": op.path})
    for spawn in plan.spawns:
        child = {
            "parent_id": snapshot.id,
            "child_id": spawn.child_id,
            "root_path": spawn.root_path,
            "context": dump_json(spawn.context),
            "now": now,
        }
        raw.execute(sql["spawn"], child)
    if plan.trace is not None:
        trace_body(raw, sql, now, snapshot.id, plan.trace, dump_json(plan.trace.data), trace_max)
    return seqs


def trace_body(
    raw: sqlite3.Connection,
    sql: Mapping[str, str],
    now: float | None,
    execution_id: str,
    step: TraceStep,
    data: str,
    trace_max: int,
) -> TraceEntry:
    """Record ``step`` (its data already encoded) under the execution's next index and drop
    the steps past the newest ``trace_max``; return the entry."""
    ids = {"execution_id": execution_id}
    index = int(_rows(raw, sql["next_trace_index"], ids)[0][0])
    record = {
        **ids,
        "idx": index,
        "now": now,
        "event_id": step.event_id,
        "event_name": step.event_name,
        "data": data,
    }
    recorded = _rows(raw, sql["record_trace"], record)
    raw.execute(sql["trim_trace"], {**ids, "idx": index, "trace_max": trace_max})
    return TraceEntry(
        index=index,
        recorded_at=float(recorded[0][0]),
        event_id=step.event_id,
        event_name=step.event_name,
        data=load_json(data),
    )
