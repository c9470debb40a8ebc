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
