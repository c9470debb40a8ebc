"""Write identities of runs and sessions: how a lost reply is settled (no I/O).

Every ``put_run``, ``put_session``, ``patch_run`` and ``finalize`` on a networked store mints a
write id; the store keeps the id of the record's last write beside it (Redis: the hash field
``write_id``; PostgreSQL: the ``write_id`` column). When a reply is lost, the store reads the
record back and settles by that id, never by comparing blobs: two writers that wrote the same
blob are still two writes.
"""

from __future__ import annotations

import uuid
from typing import Literal

from runyard.errors import StateConflictError, StoreOutcomeUnknown

__all__ = [
    "Settlement",
    "mint_write_id",
    "not_this_write",
    "resent_refusal",
    "settle_versioned_write",
]

Settlement = Literal["ours", "resend", "conflict", "unknown"]


def mint_write_id() -> str:
    """A new write id: 32 hex digits, unique per call."""
    return uuid.uuid4().hex


def settle_versioned_write(
    *,
    expected_version: int,
    found_version: int,
    found_write_id: str | None,
    write_id: str,
    may_resend: bool,
) -> Settlement:
    """What a compare-and-swap write whose reply was lost did, from the record read back.

    ``ours``: the record's last write is this one (return the record). ``resend``: the record
    is still at ``expected_version``, so this write has not landed yet; sending it again with
    the same id is safe (the CAS admits only one of the two, and a send that finds its own id
    at the next version returns the record). ``conflict``: the next version was written by
    another write, so this one never can be (StateConflictError). ``unknown``: the record has
    moved further (or was deleted) without this write's id on it, so this write may have
    landed and been overwritten: StoreOutcomeUnknown.
    """
    if found_write_id == write_id and found_version > 0:
        return "ours"
    if found_version == expected_version:
        return "resend" if may_resend else "unknown"
    if found_version == expected_version + 1:
        return "conflict"
    return "unknown"


def resent_refusal(
    what: str, subject: str, expected_version: int, actual: int
) -> StateConflictError | StoreOutcomeUnknown:
    """The error for a lost write that did not land as this write, from the version it met.

    Raised both for a settlement of ``conflict`` or ``unknown`` (the version read back) and for
    a version refusal met by a write sent again after its reply was lost (a send that finds
    its own write id at the next version is answered with the record, so a refusal there is
    another write's). At the next version: another write took it, StateConflictError.
    Anywhere else: this write may have landed and been written over (or may still be
    resent), StoreOutcomeUnknown.
    """
    if actual == expected_version + 1:
        return StateConflictError(expected_version, actual, what=what)
    return StoreOutcomeUnknown(
        f"{what} {subject!r}: the reply to a write was lost, and the {what} is now at version "
        f"{actual} without this write's id (it may have landed and been written over); read "
        "it and decide"
    )


def not_this_write(
    operation: str, run_id: str, lost: Exception, advice: str = "read it and decide"
) -> StoreOutcomeUnknown:
    """The error for a lost patch_run/finalize whose run, read back, was last written by
    another write (a write without a version to resend at: only its id can settle it)."""
    return StoreOutcomeUnknown(
        f"{operation} of {run_id!r}: {lost}, and the run's last write is not this one; it may "
        f"or may not have been applied ({advice})"
    )
