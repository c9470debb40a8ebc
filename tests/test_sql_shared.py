"""runyard._sql: what PostgreSQL and SQLite share, one copy for both."""

from __future__ import annotations

import pytest
from runyard import ConfigurationError, QueuePolicy, RunKey
from runyard._sql import (
    MAX_SEQ,
    check_table_name,
    fence_refusal,
    is_seq,
    run_refusal,
    settle_refusal,
)
from runyard.errors import LeaseLostError, StateConflictError, WorkItemNotFoundError
from runyard.postgres import StateTables
from runyard.sqlite import SqliteTables


@pytest.mark.parametrize("bad", ["", "Runs", "run-s", "1runs", "r" * 49, None, 7])
def test_both_backends_refuse_the_same_table_names(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="plain identifier"):
        check_table_name(bad, "table name runs")
    with pytest.raises(ConfigurationError, match="table name runs="):
        SqliteTables(runs=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="table name runs="):
        StateTables(runs=bad)  # type: ignore[arg-type]


def test_only_sqlite_reserves_its_own_prefix() -> None:
    assert StateTables(runs="sqlite_runs").runs == "sqlite_runs"
    with pytest.raises(ConfigurationError, match="'sqlite_'"):
        SqliteTables(runs="sqlite_runs")


def test_a_fenced_write_is_explained_in_the_memory_backends_order() -> None:
    live = (3, 2, "worker", 100.0)
    assert fence_refusal("r", 2, live, now=50.0) is None
    taken = fence_refusal("r", 1, live, now=50.0)
    assert isinstance(taken, LeaseLostError) and taken.reason == "taken"
    lapsed = fence_refusal("r", 2, live, now=101.0)
    assert isinstance(lapsed, LeaseLostError) and lapsed.reason == "expired"
    released = fence_refusal("r", 2, (3, 2, None, None), now=50.0)
    assert isinstance(released, LeaseLostError) and released.reason == "expired"
    never = fence_refusal("r", 1, None, now=50.0)
    assert isinstance(never, LeaseLostError) and never.reason == "taken"
    # The version is explained before the fence.
    conflict = run_refusal(RunKey("t", "r"), 2, 1, live, now=50.0)
    assert isinstance(conflict, StateConflictError) and (conflict.expected, conflict.actual) == (
        2,
        3,
    )
    assert run_refusal(RunKey("t", "r"), 3, None, live, now=50.0) is None


def test_a_settle_is_explained_in_the_memory_backends_order() -> None:
    policy = QueuePolicy(lease_seconds=10, max_lease_seconds=60)
    probe = (7, "leased", 0.0, 10.0)
    assert settle_refusal("t", "i", 7, probe, 5.0, policy) is None
    assert isinstance(settle_refusal("t", "i", 7, None, 5.0, policy), WorkItemNotFoundError)
    reasons = [
        settle_refusal("t", "i", 8, probe, 5.0, policy),  # another token
        settle_refusal("t", "i", 7, (7, "ready", None, None), 5.0, policy),
        settle_refusal("t", "i", 7, (7, "leased", 0.0, 100.0), 61.0, policy),  # past the cap
        settle_refusal("t", "i", 7, probe, 11.0, policy),  # past the expiry
    ]
    assert [getattr(r, "reason", None) for r in reasons] == ["taken", "taken", "capped", "expired"]


@pytest.mark.parametrize(
    ("seq", "ok"), [(1, True), (MAX_SEQ, True), (0, False), (MAX_SEQ + 1, False), (True, False)]
)
def test_is_seq(seq: object, ok: bool) -> None:
    assert is_seq(seq) is ok
