"""Rows of the SQLite work table decoded into runyard's models (no I/O).

The columns are ``WORK_COLUMNS``: the shared SQL work columns (runyard._sql), then
``max_attempts``.
"""

from __future__ import annotations

from runyard._sql import Row
from runyard._sql import decode_item as _decode_shared
from runyard.models import DeadLetter, Lease, WorkItem

__all__ = ["decode_dead_letter", "decode_item", "decode_lease"]


def decode_item(row: Row) -> WorkItem:
    """Build a WorkItem (its own ``max_attempts`` included) from a work row."""
    item = _decode_shared(row)
    if row[16] is None:
        return item
    return item.model_copy(update={"max_attempts": int(row[16])})


def decode_lease(row: Row) -> Lease:
    """Build the Lease of a leased work row."""
    return Lease(
        item=decode_item(row),
        token=row[12],
        worker=row[9],
        claimed_at=float(row[13]),
        expires_at=float(row[10]),
    )


def decode_dead_letter(row: Row) -> DeadLetter:
    """Build a DeadLetter from a dead work row."""
    return DeadLetter(item=decode_item(row), reason=row[14] or "", dead_at=float(row[15]))
