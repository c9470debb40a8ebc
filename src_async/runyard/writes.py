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

__all__ = ["Settlement", "mint_write_id", "resent_refusal", "settle_versioned_write"]

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
    """The error for a version refusal met by a write sent again after its reply was lost.

    A send that finds its own write id at the next version is answered with the record (Redis
    scripts), so a refusal at the next version is another write's: StateConflictError. Further
    on, the first send may have landed and been written over: StoreOutcomeUnknown.
    """
    if actual == expected_version + 1:
        return StateConflictError(expected_version, actual, what=what)
    return StoreOutcomeUnknown(
        f"{what} {subject!r}: the reply to a write was lost, and sent again it found the "
        f"{what} at version {actual} without this write's id (it may have landed and been "
        "written over); read it and decide"
    )
