"""What the SQL backends (PostgreSQL, SQLite) share and no other backend needs; no I/O.

The plain-identifier check of table names, the order in which a refused fenced run write or
settle is explained (the memory backend's), and the range of outbox and spawn seqs. Both
backends import it; neither imports the other.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from runyard.errors import (
    ConfigurationError,
    LeaseLostError,
    RunyardError,
    StateConflictError,
    WorkItemNotFoundError,
)

if TYPE_CHECKING:
    from runyard.models import RunKey
    from runyard.policy import QueuePolicy

__all__ = [
    "MAX_SEQ",
    "check_table_name",
    "fence_refusal",
    "is_seq",
    "run_refusal",
    "settle_refusal",
]

Row = Sequence[Any]

# The largest seq a SQL backend stores (int64 on both).
MAX_SEQ = 2**63 - 1

# Lower-case plain identifiers only, short enough that derived index and sequence names
# ("<table>_token_seq", "<table>_by_session") stay within PostgreSQL's 63-byte limit.
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,47}")


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
            f"{what}={name!r} is not a plain identifier: use 1 to 48 lower-case letters, "
            f"digits and underscores, starting with a letter or underscore{extra}"
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
