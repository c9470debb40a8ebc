"""What the SQL backends (PostgreSQL, SQLite) share and no other backend needs; no I/O.

The plain-identifier check of table names, the order in which a refused fenced run write or
settle is explained (the memory backend's), and the range of outbox and spawn seqs. Both
backends import it; neither imports the other.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from runyard._json import load_json
from runyard.errors import (
    ConfigurationError,
    LeaseLostError,
    RunyardError,
    StateConflictError,
    WorkItemNotFoundError,
)
from runyard.models import DeadLetter, Lease, RunLease, RunRecord, SessionRecord, WorkItem

if TYPE_CHECKING:
    from runyard.models import RunKey
    from runyard.policy import QueuePolicy

__all__ = [
    "MAX_SEQ",
    "MAX_TABLE_NAME",
    "check_table_name",
    "decode_dead_letter",
    "decode_item",
    "decode_lease",
    "decode_run",
    "decode_run_lease",
    "decode_session",
    "fence_refusal",
    "is_seq",
    "list_runs_name",
    "run_refusal",
    "settle_refusal",
]

Row = Sequence[Any]

# The largest seq a SQL backend stores (int64 on both).
MAX_SEQ = 2**63 - 1

# Lower-case plain identifiers only, short enough that derived index and sequence names
# ("<table>_token_seq", "<table>_by_session") stay within PostgreSQL's 63-byte limit.
MAX_TABLE_NAME = 48
_IDENTIFIER = re.compile(rf"[a-z_][a-z0-9_]{{0,{MAX_TABLE_NAME - 1}}}")


def check_table_name(name: object, what: str, *, reserved_prefix: str | None = None) -> str:
    """Return ``name`` if it is a plain lower-case identifier of 1 to 48 characters (and does
    not start with ``reserved_prefix``); else raise ConfigurationError naming ``what``.

    A table name is spliced into SQL, so nothing else is ever accepted.
    """
    reserved = reserved_prefix is not None and isinstance(name, str)
    if (
        not isinstance(name, str)
        or not _IDENTIFIER.fullmatch(name)
        or (reserved and name.startswith(reserved_prefix or ""))
    ):
        extra = f" (and not with {reserved_prefix!r})" if reserved_prefix else ""
        raise ConfigurationError(
            f"{what}={name!r} is not a plain identifier: use 1 to {MAX_TABLE_NAME} lower-case "
            f"letters, digits and underscores, starting with a letter or underscore{extra}"
        )
    return name


def fence_refusal(run_id: str, fence: int, probe: Row | None, now: float) -> LeaseLostError | None:
    """Explain a refused fenced run write from ``(version, epoch, holder, expires_at, ...)``.

    Returns None when the lease would have allowed the write. Mirrors the memory backend:
    another epoch is "taken"; the right epoch, released or lapsed, is "expired".
    """
    epoch, holder, expires_at = (probe[1], probe[2], probe[3]) if probe else (None, None, None)
    if (epoch or 0) != fence:
        return LeaseLostError(run_id, "taken")
    if holder is None or expires_at is None or float(expires_at) < now:
        return LeaseLostError(run_id, "expired")
    return None


def run_refusal(
    key: RunKey, expected_version: int, fence: int | None, probe: Row | None, now: float
) -> RunyardError | None:
    """Why a run write was refused, from ``(version, epoch, holder, expires_at, ...)``, in the
    memory backend's order: the version first, then the fence; None when neither explains it."""
    actual = int(probe[0] or 0) if probe else 0
    if actual != expected_version:
        return StateConflictError(expected_version, actual)
    if fence is not None:
        return fence_refusal(key.run_id, fence, probe, now)
    return None


def settle_refusal(
    tenant: str, item_id: str, token: int, probe: Row | None, now: float, policy: QueuePolicy
) -> RunyardError | None:
    """Explain why a settle is refused from ``(token, state, claimed_at, lease_expires_at, ...)``.

    The order is the memory backend's: unknown item, another token ("taken"), past the lease
    cap ("capped"), past the expiry ("expired"). Returns None while the lease is live and
    ``token``'s.
    """
    if probe is None:
        return WorkItemNotFoundError(f"no work item {item_id!r} in tenant {tenant!r}")
    stored_token, state, claimed_at, expires_at = probe[0], probe[1], probe[2], probe[3]
    if state != "leased" or stored_token != token or claimed_at is None or expires_at is None:
        return LeaseLostError(item_id, "taken")
    if policy.renewal_capped(now, float(claimed_at)):
        return LeaseLostError(item_id, "capped")
    if now > float(expires_at):
        return LeaseLostError(item_id, "expired")
    return None


def is_seq(seq: object) -> bool:
    """Whether ``seq`` could be an outbox or spawn seq (any other value names none)."""
    return isinstance(seq, int) and not isinstance(seq, bool) and 1 <= seq <= MAX_SEQ


# -- rows: both SQL backends select the run, session, lease and work columns in one order --

_RUN = RunRecord.model_validate
_ITEM = WorkItem.model_validate


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def decode_run(row: Row) -> RunRecord:
    """Build a RunRecord from the run columns of the SQL backends' statements."""
    # model_validate on a dict: the same validation as RunRecord(...) without the keyword
    # arguments' detour through BaseModel.__init__ (a write's reply is decoded on every call).
    return _RUN(
        {
            "tenant": row[0],
            "run_id": row[1],
            "blob": load_json(row[2]),
            "version": row[3],
            "status": row[4],
            "session_id": row[5],
            "input_tokens": row[6],
            "output_tokens": row[7],
            "cost_micros": row[8],
            "iterations": row[9],
            "cursor": row[10],
            "created_at": float(row[11]),
            "updated_at": float(row[12]),
            "seq": row[13],
        }
    )


def decode_session(row: Row) -> SessionRecord:
    """Build a SessionRecord from (tenant, session_id, blob, version, created_at, updated_at)."""
    return SessionRecord(
        tenant=row[0],
        session_id=row[1],
        blob=load_json(row[2]),
        version=row[3],
        created_at=float(row[4]),
        updated_at=float(row[5]),
    )


def decode_run_lease(row: Row) -> RunLease:
    """Build a RunLease from (tenant, run_id, holder, epoch, expires_at)."""
    return RunLease(
        tenant=row[0], run_id=row[1], holder=row[2], epoch=row[3], expires_at=float(row[4])
    )


# The work columns both SQL backends select end with the item's own max_attempts (PostgreSQL
# queue schema 3, SQLite queue schema 2), after the dead-letter columns.
_MAX_ATTEMPTS = 16


def decode_item(row: Row) -> WorkItem:
    """Build a WorkItem (its own ``max_attempts`` included) from the work columns both SQL
    backends select."""
    return _ITEM(
        {
            "tenant": row[0],
            "item_id": row[1],
            "payload": load_json(row[2]),
            "priority": row[3],
            "state": row[4],
            "attempts": row[5],
            "available_at": float(row[6]),
            "enqueued_at": float(row[7]),
            "dedupe_key": row[8],
            "worker": row[9],
            "lease_expires_at": _float(row[10]),
            "last_error": row[11],
            "max_attempts": row[_MAX_ATTEMPTS] if len(row) > _MAX_ATTEMPTS else None,
        }
    )


def decode_lease(row: Row) -> Lease:
    """Build the Lease of a leased work row (work columns: token, claimed_at follow the item)."""
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


def list_runs_name(status: str | None, session_id: str | None) -> str:
    """The statement list_runs sends for its filters, on PostgreSQL and SQLite alike: with a
    session (a status or none) the session's runs from the session index, else the tenant's
    by status, else all of them."""
    if session_id is not None:
        return "list_runs_by_session"
    return "list_runs" if status is None else "list_runs_by_status"
