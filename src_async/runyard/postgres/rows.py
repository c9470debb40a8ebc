"""Rows into models, and the reasons a refused write was refused, for both PostgreSQL twins."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runyard._json import load_json
from runyard.models import (
    DeadLetter,
    Lease,
    RunLease,
    RunRecord,
    SessionRecord,
    WorkItem,
)
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

Row = Sequence[Any]


def _json(value: Any) -> Any:
    # Blobs are text columns (execution JSON is jsonb selected as text): the same str either way.
    return load_json(value)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def decode_run(row: Row) -> RunRecord:
    """Build a RunRecord from the run columns of ``_postgres_sql``."""
    return RunRecord(
        tenant=row[0],
        run_id=row[1],
        blob=_json(row[2]),
        version=row[3],
        status=row[4],
        session_id=row[5],
        input_tokens=row[6],
        output_tokens=row[7],
        cost_micros=row[8],
        iterations=row[9],
        cursor=row[10],
        created_at=float(row[11]),
        updated_at=float(row[12]),
        seq=row[13],
    )


def decode_session(row: Row) -> SessionRecord:
    """Build a SessionRecord from (tenant, session_id, blob, version, created_at, updated_at)."""
    return SessionRecord(
        tenant=row[0],
        session_id=row[1],
        blob=_json(row[2]),
        version=row[3],
        created_at=float(row[4]),
        updated_at=float(row[5]),
    )


def decode_run_lease(row: Row) -> RunLease:
    """Build a RunLease from (tenant, run_id, holder, epoch, expires_at)."""
    return RunLease(
        tenant=row[0], run_id=row[1], holder=row[2], epoch=row[3], expires_at=float(row[4])
    )


def decode_item(row: Row) -> WorkItem:
    """Build a WorkItem from the work columns of ``_postgres_sql``."""
    return WorkItem(
        tenant=row[0],
        item_id=row[1],
        payload=_json(row[2]),
        priority=row[3],
        state=row[4],
        attempts=row[5],
        available_at=float(row[6]),
        enqueued_at=float(row[7]),
        dedupe_key=row[8],
        worker=row[9],
        lease_expires_at=_float(row[10]),
        last_error=row[11],
    )


def decode_lease(row: Row) -> Lease:
    """Build the Lease of a leased work row (work columns: token, claimed_at follow the item)."""
    item = decode_item(row)
    return Lease(
        item=item,
        token=row[12],
        worker=row[9],
        claimed_at=float(row[13]),
        expires_at=float(row[10]),
    )


def decode_dead_letter(row: Row) -> DeadLetter:
    """Build a DeadLetter from a dead work row."""
    return DeadLetter(item=decode_item(row), reason=row[14] or "", dead_at=float(row[15]))


def item_state(decision: FailureDecision) -> str:
    """The state a failed or lapsed item takes under ``decision``: dead, or ready again."""
    return "dead" if decision.outcome == "dead" or decision.retry_at is None else "ready"
