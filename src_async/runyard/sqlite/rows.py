"""Rows of the SQLite stores decoded into runyard's models, and refusals explained (no I/O)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runyard._json import load_json
from runyard.events import RunEvent
from runyard.executions.models import (
    DueTimer,
    Event,
    Execution,
    OutboxEntry,
    SpawnEntry,
    TraceEntry,
)
from runyard.models import DeadLetter, Lease, RunKey, RunLease, RunRecord, SessionRecord, WorkItem

__all__ = [
    "decode_dead_letter",
    "decode_due_timer",
    "decode_event",
    "decode_execution",
    "decode_item",
    "decode_lease",
    "decode_outbox",
    "decode_run",
    "decode_run_lease",
    "decode_session",
    "decode_spawn",
    "decode_trace",
]

Row = Sequence[Any]


def decode_run(row: Row) -> RunRecord:
    """A run from the columns of ``RUN_COLUMNS``."""
    return RunRecord(
        tenant=row[0],
        run_id=row[1],
        blob=load_json(row[2]),
        version=row[3],
        status=row[4],
        session_id=row[5],
        input_tokens=row[6],
        output_tokens=row[7],
        cost_micros=row[8],
        iterations=row[9],
        cursor=row[10],
        created_at=row[11],
        updated_at=row[12],
        seq=row[13],
    )


def decode_session(row: Row) -> SessionRecord:
    """A session from ``tenant, session_id, blob, version, created_at, updated_at``."""
    return SessionRecord(
        tenant=row[0],
        session_id=row[1],
        blob=load_json(row[2]),
        version=row[3],
        created_at=row[4],
        updated_at=row[5],
    )


def decode_run_lease(row: Row) -> RunLease:
    """A run lease from ``tenant, run_id, holder, epoch, expires_at``."""
    return RunLease(tenant=row[0], run_id=row[1], holder=row[2], epoch=row[3], expires_at=row[4])


def decode_item(row: Row) -> WorkItem:
    """A work item from the columns of ``WORK_COLUMNS``."""
    return WorkItem(
        tenant=row[0],
        item_id=row[1],
        payload=load_json(row[2]),
        priority=row[3],
        state=row[4],
        attempts=row[5],
        available_at=row[6],
        enqueued_at=row[7],
        dedupe_key=row[8],
        worker=row[9],
        lease_expires_at=row[10],
        last_error=row[11],
    )


def decode_lease(row: Row) -> Lease:
    """The lease of a leased item, from the columns of ``WORK_COLUMNS``."""
    return Lease(
        item=decode_item(row), token=row[12], worker=row[9], claimed_at=row[13], expires_at=row[10]
    )


def decode_dead_letter(row: Row) -> DeadLetter:
    """A dead letter from the columns of ``WORK_COLUMNS``."""
    return DeadLetter(item=decode_item(row), reason=row[14], dead_at=row[15])


def decode_execution(row: Row) -> Execution:
    """An execution from the columns of ``EXECUTION_COLUMNS``."""
    return Execution(
        id=row[0],
        definition_id=row[1],
        status=row[2],
        version=row[3],
        context=load_json(row[4]),
        parent_id=row[5],
        root_path=row[6],
        created_at=row[7],
        updated_at=row[8],
    )


def decode_outbox(row: Row) -> OutboxEntry:
    """An outbox entry from ``seq, target_id, event_id, event_name, data``."""
    event = Event(id=row[2], name=row[3], data=load_json(row[4]))
    return OutboxEntry(seq=row[0], target_id=row[1], event=event)


def decode_spawn(row: Row) -> SpawnEntry:
    """A spawn entry from ``seq, parent_id, child_id, root_path, context``."""
    return SpawnEntry(
        seq=row[0], parent_id=row[1], child_id=row[2], root_path=row[3], context=load_json(row[4])
    )


def decode_due_timer(row: Row) -> DueTimer:
    """A due timer from ``execution_id, path, fire_at``."""
    return DueTimer(execution_id=row[0], path=row[1], fire_at=row[2])


def decode_trace(row: Row) -> TraceEntry:
    """A trace entry from ``idx, recorded_at, event_id, event_name, data``."""
    return TraceEntry(
        index=row[0], recorded_at=row[1], event_id=row[2], event_name=row[3], data=load_json(row[4])
    )


def decode_event(key: RunKey, row: Row) -> RunEvent:
    """A run event from the columns of ``EVENT_COLUMNS`` (seq, type, data, at, event_id,
    terminal)."""
    return RunEvent(
        tenant=key.tenant,
        run_id=key.run_id,
        seq=row[0],
        type=row[1],
        data=load_json(row[2]),
        at=float(row[3]),
        event_id=row[4],
        terminal=bool(row[5]),
    )
