"""Rows into models, and the reasons a refused write was refused, for both PostgreSQL twins."""

from __future__ import annotations

from runyard._sql import (
    Row,
    decode_dead_letter,
    decode_item,
    decode_lease,
    decode_run,
    decode_run_lease,
    decode_session,
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


def item_state(decision: FailureDecision) -> str:
    """The state a failed or lapsed item takes under ``decision``: dead, or ready again."""
    return "dead" if decision.outcome == "dead" or decision.retry_at is None else "ready"
