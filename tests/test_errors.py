"""One error hierarchy for both twins; retryable says whether trying again may succeed."""

from __future__ import annotations

import pytest
import runyard
from runyard import errors


def test_every_error_is_a_runyard_error_with_retryable() -> None:
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.RunyardError), name
        assert isinstance(cls.retryable, bool), name


def test_conflict_errors_carry_both_versions() -> None:
    err = errors.StateConflictError(expected=3, actual=5)
    assert (err.expected, err.actual) == (3, 5) and "expected 3, found 5" in str(err)
    store = errors.StoreConflict("exe-1", expected=1, found=2)
    assert (store.execution_id, store.expected, store.found) == ("exe-1", 1, 2)


def test_persistence_reason_decides_retryable() -> None:
    assert errors.StatePersistenceError("x", reason="unavailable").retryable
    assert errors.StatePersistenceError("x", reason="contended").retryable
    assert not errors.StatePersistenceError("x", reason="too_large").retryable


def test_availability_errors_are_retryable_and_outcome_unknown_is_not() -> None:
    assert errors.QueueUnavailableError().retryable
    assert errors.PoolExhaustedError().retryable
    assert not errors.StoreOutcomeUnknown().retryable


def test_lease_lost_names_the_reason() -> None:
    err = errors.LeaseLostError("item-1", "capped")
    assert err.reason == "capped" and "capped" in str(err)


def test_public_names_resolve() -> None:
    for name in runyard.__all__:
        assert getattr(runyard, name) is not None, name


def test_both_conflicts_name_the_stored_version_actual_and_found() -> None:
    run = errors.StateConflictError(3, 5)
    execution = errors.StoreConflict("e1", 3, 5)
    for conflict in (run, execution):
        assert (conflict.expected, conflict.actual, conflict.found) == (3, 5, 5)
    # The alias is read-only: one value, never two that disagree.
    with pytest.raises(AttributeError):
        run.found = 9  # type: ignore[misc]
    with pytest.raises(AttributeError):
        execution.actual = 9  # type: ignore[misc]
    assert (run.actual, execution.found) == (5, 5)
