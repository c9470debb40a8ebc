"""Rows into models, and the reasons a refused write was refused, for both PostgreSQL twins."""

from __future__ import annotations

from runyard._sql import (
    Row,
    decode_run,
    decode_run_lease,
    decode_session,
)
from runyard._sql import decode_dead_letter as _decode_dead_letter
from runyard._sql import decode_item as _decode_item
from runyard._sql import decode_lease as _decode_lease
from runyard.models import DeadLetter, Lease, WorkItem
from runyard.policy import FailureDecision

__all__ = [
    "Row",
    "decode_dead_letter",
    "decode_item",
    "decode_lease",
    "decode_run",
    "decode_run_lease",
    "decode_session",
    "item_state",
]

# The work columns (runyard.postgres.statements) end with the item's own max_attempts (queue
# schema version 3), after the columns both SQL backends share.
_MAX_ATTEMPTS = 16


def decode_item(row: Row) -> WorkItem:
    """Build a WorkItem from the work columns, its own max_attempts included."""
    item = _decode_item(row)
    if len(row) > _MAX_ATTEMPTS and row[_MAX_ATTEMPTS] is not None:
        return item.model_copy(update={"max_attempts": int(row[_MAX_ATTEMPTS])})
    return item


def decode_lease(row: Row) -> Lease:
    """Build the Lease of a leased work row."""
    lease = _decode_lease(row)
    if len(row) > _MAX_ATTEMPTS and row[_MAX_ATTEMPTS] is not None:
        return lease.model_copy(update={"item": decode_item(row)})
    return lease


def decode_dead_letter(row: Row) -> DeadLetter:
    """Build a DeadLetter from a dead work row."""
    letter = _decode_dead_letter(row)
    if len(row) > _MAX_ATTEMPTS and row[_MAX_ATTEMPTS] is not None:
        return letter.model_copy(update={"item": decode_item(row)})
    return letter


def item_state(decision: FailureDecision) -> str:
    """The state a failed or lapsed item takes under ``decision``: dead, or ready again."""
    return "dead" if decision.outcome == "dead" or decision.retry_at is None else "ready"
