"""Rows of the SQLite work table decoded into runyard's models (no I/O).

The columns are ``WORK_COLUMNS``: the shared SQL work columns (runyard._sql), then
``max_attempts``.
"""

from __future__ import annotations

from runyard._json import load_json
from runyard._sql import Row
from runyard.models import DeadLetter, Lease, WorkItem

__all__ = ["decode_dead_letter", "decode_item", "decode_lease"]


def decode_item(row: Row) -> WorkItem:
    """Build a WorkItem (its own ``max_attempts`` included) from a work row."""
    return WorkItem(
        tenant=row[0],
        item_id=row[1],
        payload=load_json(row[2]),
        priority=row[3],
        state=row[4],
        attempts=row[5],
        available_at=float(row[6]),
        enqueued_at=float(row[7]),
        dedupe_key=row[8],
        worker=row[9],
        lease_expires_at=None if row[10] is None else float(row[10]),
        last_error=row[11],
        max_attempts=row[16],
    )


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
