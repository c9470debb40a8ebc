"""Rows of the SQLite stores decoded into runyard's models, and refusals explained (no I/O)."""

from __future__ import annotations

from runyard._json import load_json
from runyard._sql import (
    Row,
    decode_dead_letter,
    decode_item,
    decode_lease,
    decode_run,
    decode_run_lease,
    decode_session,
)
from runyard.events import RunEvent
from runyard.executions.models import (
    DueTimer,
    Event,
    Execution,
    OutboxEntry,
    SpawnEntry,
    TraceEntry,
)
from runyard.models import RunKey, WorkItem
from runyard.queue_args import CheckedItem

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
    "due_at",
    "entered_item",
]


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


def due_at(item: CheckedItem, now: float) -> float:
    """When an item enqueued at ``now`` (the pinned time) is due, as SQLite stores it: after
    its delay, or at its ``run_at``, a past one at once; never before 0 (the time the
    statement binds as ``:available_at``)."""
    return max(now + item.delay_seconds, 0.0 if item.run_at is None else item.run_at)


def entered_item(tenant: str, item: CheckedItem, now: float, due: float) -> WorkItem:
    """The item an enqueue has just inserted at ``now``, due at ``due`` (``due_at``): what it
    sent; the WorkItem ``decode_item`` builds from the stored row."""
    return WorkItem.model_validate(
        {
            "tenant": tenant,
            "item_id": item.item_id,
            "payload": load_json(item.payload),
            "priority": item.priority,
            "state": "ready",
            "attempts": 0,
            "available_at": due,
            "enqueued_at": now,
            "dedupe_key": item.dedupe_key,
            "worker": None,
            "lease_expires_at": None,
            "last_error": None,
            "max_attempts": item.max_attempts,
        }
    )
