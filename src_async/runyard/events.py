"""The run event log's shared pieces: RunEvent, the terminal statuses, checks (no I/O)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from runyard._json import dump_json, load_json
from runyard.errors import InvalidArgumentError, RunyardError, StoreOutcomeUnknown
from runyard.keys import validate_identifier
from runyard.validation import MAX_VERSION_NUMBER as _MAX_SEQ
from runyard.validation import check_limit, check_status

__all__ = [
    "RETRY_HINT",
    "TERMINAL_STATUSES",
    "EventConflictError",
    "RunEvent",
    "check_after",
    "check_finalize",
    "event_body",
    "lost_append",
    "same_content",
    "same_data",
]

RETRY_HINT = "pass event_id= to make it retryable"
"""What a lost reply to an append or finalize without an ``event_id`` tells the caller."""

TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "error", "cancelled"})
"""The statuses ``finalize`` may set and that end a ``follow`` (a store may declare others)."""


class RunEvent(BaseModel):
    """One entry of a run's append-only log; ``seq`` is gap-free per run, starting at 1.

    ``terminal`` marks the event ``finalize`` wrote together with the terminal status.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant: str
    run_id: str
    seq: int
    type: str
    data: Any
    at: float
    event_id: str | None = None
    terminal: bool = False


class EventConflictError(RunyardError):
    """An ``event_id`` was sent again with other content than the event stored under it."""

    retryable = False

    def __init__(self, run_id: str, event_id: str, seq: int) -> None:
        self.run_id, self.event_id, self.seq = run_id, event_id, seq
        super().__init__(
            f"event_id {event_id!r} of run {run_id!r} is already stored as event {seq} with "
            "other content: a retry must send the same type and data, a new event a new id"
        )


def event_body(
    event_type: str, data: Any, event_id: str | None, *, max_bytes: int
) -> tuple[str, str]:
    """Check an event's type, id and data before anything is sent; return the data as
    canonical JSON text (keys sorted, so a retry compares equal) and the type.

    Raises InvalidIdentifierError naming ``type``/``event_id``, StatePersistenceError for data
    that cannot be stored or is larger than ``max_bytes``.
    """
    validate_identifier(event_type, "type")
    if event_id is not None:
        validate_identifier(event_id, "event_id")
    text = dump_json(data, max_bytes=max_bytes, what="event data")
    canonical = json.dumps(
        load_json(text), sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    return event_type, canonical


def same_data(stored: Any, sent: Any) -> bool:
    """Whether two JSON values are the same event data: equal, with a bool never equal to a
    number (Python's ``True == 1`` had made a retry sending 1 return the event stored with
    true, on every backend but Redis); numbers compare by value (PostgreSQL's jsonb gives
    1e20 back as 100000000000000000000). Iterative: values nest up to MAX_JSON_DEPTH."""
    pending = [(stored, sent)]
    while pending:
        a, b = pending.pop()
        if isinstance(a, dict):
            if not isinstance(b, dict) or a.keys() != b.keys():
                return False
            pending += [(a[k], b[k]) for k in a]
        elif isinstance(a, list):
            if not isinstance(b, list) or len(a) != len(b):
                return False
            pending += zip(a, b, strict=True)
        elif isinstance(b, (dict, list)):
            return False
        elif isinstance(a, bool) or isinstance(b, bool):
            if type(a) is not type(b) or a != b:
                return False
        elif a != b:
            return False
    return True


def same_content(event: RunEvent, event_type: str, data_text: str) -> bool:
    """Whether a stored event has the type and data (``same_data``) of a (retried) append."""
    return event.type == event_type and same_data(event.data, load_json(data_text))


def check_after(after: int, limit: int = 1) -> None:
    """Raise InvalidArgumentError (a ValueError) naming ``after`` (a seq: an int from 0 to
    2**63 - 1) or ``limit`` (1..10000) when out of range."""
    if not isinstance(after, int) or isinstance(after, bool) or not 0 <= after <= _MAX_SEQ:
        raise InvalidArgumentError(
            f"after must be an int from 0 to 2**63 - 1 (a seq already seen), not {after!r}",
            argument="after",
            limit="an int from 0 to 2**63 - 1",
        )
    check_limit(limit)


def check_finalize(status: str, terminal_statuses: frozenset[str]) -> None:
    """Raise InvalidArgumentError (a ValueError) naming ``status`` when it is not a status
    every store accepts (runyard.validation.check_status) or not one of the store's terminal
    statuses."""
    check_status(status)
    if status not in terminal_statuses:
        known = ", ".join(sorted(terminal_statuses))
        raise InvalidArgumentError(
            f"status {status!r} is not terminal; finalize takes one of: {known}",
            argument="status",
            limit=f"one of: {known}",
        )


def lost_append(run_id: str, lost: BaseException) -> StoreOutcomeUnknown:
    """The error for an append without an ``event_id`` whose reply was lost (never resent:
    it may have been applied), on every backend."""
    return StoreOutcomeUnknown(f"append_event to {run_id!r}: {lost}; {RETRY_HINT}")
