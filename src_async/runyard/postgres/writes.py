"""How the PostgreSQL state store reads back a record's last write to settle a lost reply (no
I/O; the settling is runyard.writes, the reads _async/postgres/writes.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from runyard.models import RunKey, RunRecord, SessionRecord
from runyard.postgres.rows import decode_run, decode_session
from runyard.postgres.statements import RUN_COLUMN_COUNT, SESSION_COLUMN_COUNT

__all__ = ["WriteTarget", "run_target", "session_target"]

R = TypeVar("R", RunRecord, SessionRecord)


@dataclass(frozen=True)
class WriteTarget(Generic[R]):
    """A versioned record whose last write a settle reads back: the statement ``read`` (with
    ``ids``) returns one row, its ``columns`` columns (NULLs: no record), then its write id,
    then its tombstone's; ``decode`` builds the record; ``what`` and ``subject`` name it in
    errors."""

    what: str
    subject: str
    read: str
    ids: tuple[str, ...]
    columns: int
    decode: Callable[[Sequence[Any]], R]


def run_target(key: RunKey) -> WriteTarget[RunRecord]:
    """How a run's last write is read back (``get_run_write``)."""
    ids = (key.tenant, key.run_id)
    return WriteTarget("run", key.run_id, "get_run_write", ids, RUN_COLUMN_COUNT, decode_run)


def session_target(tenant: str, session_id: str) -> WriteTarget[SessionRecord]:
    """How a session's last write is read back (``get_session_write``)."""
    ids = (tenant, session_id)
    return WriteTarget(
        "session", session_id, "get_session_write", ids, SESSION_COLUMN_COUNT, decode_session
    )
