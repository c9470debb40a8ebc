"""Rows into models, and the reasons a refused write was refused, for both PostgreSQL twins."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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
    "PruneCursor",
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


@dataclass(frozen=True)
class PruneCursor:
    """Where the work queue's ``prune`` resumes: after the rotation row (``turn``, ``tenant``),
    in the pass bounded by ``bound`` (the highest turn at the pass's start; None: a new pass,
    bounded by the statement)."""

    turn: int = -(2**63)  # before every row of the rotation
    tenant: str = ""
    bound: int | None = None

    def args(self) -> tuple[int, str, int | None]:
        """The prune statement's $1, $5 and $6."""
        return self.turn, self.tenant, self.bound

    @classmethod
    def after(cls, row: Sequence[Any]) -> tuple[PruneCursor, int]:
        """The cursor for the next call from the statement's row, and how many it removed;
        the first cursor again once the pass ended (the row's turn is NULL)."""
        last_turn, last_tenant, removed, bound = row
        if last_turn is None:
            return cls(), int(removed)
        cursor = cls(int(last_turn), str(last_tenant), None if bound is None else int(bound))
        return cursor, int(removed)
