"""The PostgreSQL execution store's non-I/O logic, shared by both twins.

Turns a checked commit (``plan_commit``) into the parameters of one statement, and rows back
into models. Every value is checked before anything is sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from runyard._json import dump_json, load_json
from runyard.executions.models import (
    DueTimer,
    Event,
    Execution,
    OutboxEntry,
    SpawnEntry,
    TimerOp,
    TraceEntry,
    TraceStep,
)
from runyard.executions.planning import CommitPlan, is_timer_path, trace_data

__all__ = [
    "CommitCall",
    "commit_call",
    "decode_commit",
    "decode_due_timer",
    "decode_execution",
    "decode_outbox",
    "decode_spawn",
    "decode_trace",
    "is_timer_path",
    "trace_text",
]

Row = Sequence[Any]


@dataclass(frozen=True)
class CommitCall:
    """The statement one commit sends, and its arguments."""

    name: str
    args: tuple[Any, ...]


def trace_text(step: TraceStep, max_value_bytes: int) -> str:
    """Return a trace step's data as JSON text (``trace_data``). Raises TypeError,
    InvalidIdentifierError, StatePersistenceError."""
    return trace_data(step, max_value_bytes)


def _net_timers(timers: Sequence[TimerOp]) -> dict[str, float | None]:
    # The commit's timer ops applied in order, per path: the last op on a path decides.
    final: dict[str, float | None] = {}
    for op in timers:
        final[op.path] = op.fire_at if op.action == "schedule" else None
    return final


def commit_call(plan: CommitPlan, *, now: float, trace_max: int) -> CommitCall:
    """Build the one statement that writes ``plan`` (already checked by ``plan_commit``).

    A state-only commit (no emits, timers, spawns or trace) takes the short statement that
    ``save`` uses: the CAS and the optional processed mark.
    """
    exe = plan.execution
    head = (
        exe.id,
        exe.definition_id,
        exe.status,
        dump_json(exe.context),
        exe.parent_id,
        exe.root_path,
        now,
        exe.version,
        plan.processed_event_id,
    )
    verb = "create" if exe.version == 0 else "update"
    if not (plan.emits or plan.timers or plan.spawns or plan.trace is not None):
        return CommitCall(f"exec_save_{verb}", head)
    timers = _net_timers(plan.timers)
    scheduled = {path: at for path, at in timers.items() if at is not None}
    trace = plan.trace
    args = (
        *head,
        [target for target, _ in plan.emits],
        [event.id for _, event in plan.emits],
        [event.name for _, event in plan.emits],
        [dump_json(event.data) for _, event in plan.emits],
        [path for path, at in timers.items() if at is None],
        list(scheduled),
        list(scheduled.values()),
        [s.child_id for s in plan.spawns],
        [s.root_path for s in plan.spawns],
        [dump_json(s.context) for s in plan.spawns],
        trace is not None,
        None if trace is None else trace.event_id,
        None if trace is None else trace.event_name,
        "null" if trace is None else dump_json(trace.data),
        trace_max,
    )
    return CommitCall(f"exec_commit_{verb}", args)


def decode_commit(row: Row) -> tuple[bool, int, list[int]]:
    """Return (written, the version the statement saw, the outbox seqs) of a commit's row."""
    seqs = [int(s) for s in row[2]] if len(row) > 2 and row[2] is not None else []
    return bool(row[0]), int(row[1] or 0), seqs


def decode_execution(row: Row) -> Execution:
    """Build an Execution from the execution columns of ``_postgres_executions_sql``."""
    return Execution(
        id=row[0],
        definition_id=row[1],
        status=row[2],
        version=int(row[3]),
        context=load_json(row[4]),
        parent_id=row[5],
        root_path=row[6],
        created_at=float(row[7]),
        updated_at=float(row[8]),
    )


def decode_outbox(row: Row) -> OutboxEntry:
    """Build an OutboxEntry from (seq, target_id, event_id, event_name, data)."""
    return OutboxEntry(
        seq=int(row[0]),
        target_id=row[1],
        event=Event(id=row[2], name=row[3], data=load_json(row[4])),
    )


def decode_spawn(row: Row) -> SpawnEntry:
    """Build a SpawnEntry from (seq, parent_id, child_id, root_path, context)."""
    return SpawnEntry(
        seq=int(row[0]),
        parent_id=row[1],
        child_id=row[2],
        root_path=row[3],
        context=load_json(row[4]),
    )


def decode_due_timer(row: Row) -> DueTimer:
    """Build a DueTimer from (execution_id, path, fire_at)."""
    return DueTimer(execution_id=row[0], path=row[1], fire_at=float(row[2]))


def decode_trace(row: Row) -> TraceEntry:
    """Build a TraceEntry from (idx, recorded_at, event_id, event_name, data)."""
    return TraceEntry(
        index=int(row[0]),
        recorded_at=float(row[1]),
        event_id=row[2],
        event_name=row[3],
        data=load_json(row[4]),
    )
