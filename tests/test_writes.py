"""runyard.writes: how a write whose reply was lost is settled from the record read back."""

from __future__ import annotations

import pytest
from runyard.errors import StateConflictError, StoreOutcomeUnknown
from runyard.writes import mint_write_id, resent_refusal, settle_versioned_write


def _settle(found_version: int, found_write_id: str | None, *, may_resend: bool = True) -> str:
    return settle_versioned_write(
        expected_version=4,
        found_version=found_version,
        found_write_id=found_write_id,
        write_id="mine",
        may_resend=may_resend,
    )


def test_the_records_last_write_being_this_one_settles_it_as_landed() -> None:
    assert _settle(5, "mine") == "ours"


def test_the_same_blob_written_by_another_write_is_a_conflict_not_a_success() -> None:
    # The blob is never compared: the next version under another id is another writer's.
    assert _settle(5, "theirs") == "conflict"
    assert _settle(5, None) == "conflict"  # written before write ids existed


def test_a_record_still_at_the_expected_version_is_sent_again_once() -> None:
    assert _settle(4, "older") == "resend"
    assert _settle(4, "older", may_resend=False) == "unknown"


@pytest.mark.parametrize("found", [0, 3, 6, 9])
def test_a_record_moved_further_without_this_id_is_unknown(found: int) -> None:
    # This write may have landed and been written over (or the record deleted since).
    assert _settle(found, "theirs") == "unknown"


def test_write_ids_are_fresh_per_call() -> None:
    ids = {mint_write_id() for _ in range(1000)}
    assert len(ids) == 1000 and all(len(i) == 32 for i in ids)


def test_a_resent_write_refused_at_the_next_version_is_a_conflict() -> None:
    refusal = resent_refusal("run", "r", 4, 5)
    assert isinstance(refusal, StateConflictError)
    assert (refusal.expected, refusal.actual) == (4, 5)


def test_a_resent_write_refused_further_on_is_outcome_unknown() -> None:
    refusal = resent_refusal("session", "s", 4, 7)
    assert isinstance(refusal, StoreOutcomeUnknown)
    assert "session 's'" in str(refusal) and "version 7" in str(refusal)


def _settle_create(found_version: int, found: str | None, deleted: str | None) -> str:
    return settle_versioned_write(
        expected_version=0,
        found_version=found_version,
        found_write_id=found,
        write_id="mine",
        may_resend=True,
        deleted_write_id=deleted,
    )


def test_a_create_deleted_after_it_landed_is_never_sent_again() -> None:
    # Sent again, it would create the record over another party's delete.
    assert _settle_create(0, None, "mine") == "unknown"
    # Created again by another writer since: still this write's version 1 first, not a conflict.
    assert _settle_create(1, "theirs", "mine") == "unknown"


def test_a_create_whose_key_holds_another_writes_tombstone_is_sent_again() -> None:
    # Another writer's record was deleted there: this write has not landed (yet).
    assert _settle_create(0, None, "theirs") == "resend"
    assert _settle_create(1, "theirs", "theirs") == "conflict"


def test_a_create_found_as_written_is_ours_whatever_the_tombstone() -> None:
    assert _settle_create(1, "mine", "theirs") == "ours"


def test_a_write_that_landed_before_a_delete_is_refused_as_outcome_unknown() -> None:
    refusal = resent_refusal("run", "r", 0, 1, landed=True)
    assert isinstance(refusal, StoreOutcomeUnknown)
    assert "landed and the run was deleted afterwards" in str(refusal)
