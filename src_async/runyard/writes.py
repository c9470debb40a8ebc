"""Write identities of runs and sessions: how a lost reply is settled (no I/O).

Every ``put_run``, ``put_session``, ``patch_run`` and ``finalize`` on a networked store mints a
write id; the store keeps the id of the record's last write beside it (Redis: the hash field
``write_id``; PostgreSQL: the ``write_id`` column). When a reply is lost, the store reads the
record back and settles by that id, never by comparing blobs: two writers that wrote the same
blob are still two writes.

Deleting a run or session leaves a tombstone for ``TOMBSTONE_SECONDS``: the id of the deleted
record's last write (Redis: a key beside the record's, with that TTL; PostgreSQL: a row of the
tombstones table, which ``prune()`` removes once older). The read-back of a lost write reads it
with the record, so a write that landed and was deleted before the read-back is told from one
that never landed: the first is not sent again (that would undo the delete).
"""

from __future__ import annotations

import uuid
from typing import Literal

from runyard.errors import StateConflictError, StoreOutcomeUnknown

__all__ = [
    "TOMBSTONE_SECONDS",
    "Settlement",
    "mint_write_id",
    "not_this_write",
    "resent_refusal",
    "settle_versioned_write",
]

Settlement = Literal["ours", "resend", "conflict", "unknown"]

# How long a deleted record's last write id is kept (seconds). A read-back settles a lost write
# within the call that sent it, after the store's own retries (Redis: retry_attempts of at most
# socket_timeout each, under a minute with the defaults; PostgreSQL's are shorter): an hour is
# well above that.
TOMBSTONE_SECONDS = 3600


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
    deleted_write_id: str | None = None,
) -> Settlement:
    """What a compare-and-swap write whose reply was lost did, from the record read back.

    ``ours``: the record's last write is this one (return the record). ``resend``: the record
    is still at ``expected_version``, so this write has not landed yet; sending it again with
    the same id is safe (the CAS admits only one of the two, and a send that finds its own id
    at the next version returns the record). ``conflict``: the next version was written by
    another write, so this one never can be (StateConflictError). ``unknown``: the record has
    moved further (or was deleted) without this write's id on it, so this write may have
    landed and been overwritten: StoreOutcomeUnknown. ``deleted_write_id`` is the tombstone's
    (the last write id of the record deleted at this key, if one was deleted lately): when it
    is this write's, the write landed and the record was deleted after it, so whatever is
    there now, the write is never sent again: ``unknown`` (resent_refusal with ``landed``).
    """
    if found_write_id == write_id and found_version > 0:
        return "ours"
    if deleted_write_id == write_id:
        return "unknown"
    if found_version == expected_version:
        return "resend" if may_resend else "unknown"
    if found_version == expected_version + 1:
        return "conflict"
    return "unknown"


def resent_refusal(
    what: str, subject: str, expected_version: int, actual: int, *, landed: bool = False
) -> StateConflictError | StoreOutcomeUnknown:
    """The error for a lost write that did not land as this write, from the version it met.

    Raised both for a settlement of ``conflict`` or ``unknown`` (the version read back) and for
    a version refusal met by a write sent again after its reply was lost (a send that finds
    its own write id at the next version is answered with the record, so a refusal there is
    another write's). At the next version: another write took it, StateConflictError.
    Anywhere else: this write may have landed and been written over (or may still be
    resent), StoreOutcomeUnknown. ``landed``: the tombstone holds this write's id, so it
    landed and the record was deleted afterwards: StoreOutcomeUnknown at any version (the
    caller decides whether to write it again).
    """
    if landed:
        return StoreOutcomeUnknown(
            f"{what} {subject!r}: the reply to a write was lost; the write landed and the {what} "
            f"was deleted afterwards (it is now at version {actual}), so it was not sent again; "
            "read it and decide"
        )
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
