"""QueuePolicy decides retries, backoff and the dead letter for every backend."""

from __future__ import annotations

import math
import random
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st
from runyard.errors import InvalidArgumentError
from runyard.policy import QueuePolicy
from runyard.redis.items import retry_table
from runyard.validation import shown


def test_backoff_is_capped_exponential_with_full_jitter() -> None:
    top = QueuePolicy(backoff_base=2, backoff_cap=30, random=lambda: 1.0)
    assert [top.backoff(n) for n in range(1, 7)] == [2, 4, 8, 16, 30, 30]
    bottom = QueuePolicy(backoff_base=2, backoff_cap=30, random=lambda: 0.0)
    assert bottom.backoff(5) == 0


def test_a_huge_attempt_count_still_backs_off_to_the_cap() -> None:
    policy = QueuePolicy(backoff_base=1, backoff_cap=60, random=lambda: 1.0)
    assert policy.backoff(5000) == 60


@given(st.integers(min_value=1, max_value=200), st.floats(min_value=0, max_value=0.999))
def test_backoff_never_exceeds_the_cap(attempts: int, draw: float) -> None:
    policy = QueuePolicy(backoff_base=1, backoff_cap=60, random=lambda: draw)
    assert 0 <= policy.backoff(attempts) <= 60


def test_retryable_failure_within_attempts_retries_later() -> None:
    policy = QueuePolicy(max_attempts=3, backoff_base=10, random=lambda: 0.5)
    decision = policy.on_failure(1, now=100.0, retryable=True)
    assert (decision.outcome, decision.retry_at) == ("retry", 105.0)


def test_last_attempt_and_permanent_failures_go_to_the_dead_letter() -> None:
    policy = QueuePolicy(max_attempts=3)
    assert policy.on_failure(3, now=0, retryable=True).outcome == "dead"
    assert policy.on_failure(1, now=0, retryable=False).outcome == "dead"


def test_lapsed_lease_retries_after_the_backoff_until_attempts_run_out() -> None:
    policy = QueuePolicy(max_attempts=2, backoff_base=10, random=lambda: 0.5)
    assert policy.on_lapse(1, now=50.0).retry_at == 55.0
    assert policy.on_lapse(2, now=50.0).outcome == "dead"
    assert QueuePolicy(backoff_base=0).on_lapse(1, now=50.0).retry_at == 50.0


def test_an_items_own_max_attempts_overrides_the_policys() -> None:
    policy = QueuePolicy(max_attempts=5)
    assert policy.on_failure(2, now=0, retryable=True, max_attempts=2).reason == (
        "failed 2 of 2 attempts"
    )
    assert policy.on_lapse(1, now=0, max_attempts=1).outcome == "dead"
    assert policy.on_lapse(4, now=0, max_attempts=9).outcome == "retry"
    assert policy.on_failure(5, now=0, retryable=True, max_attempts=None).outcome == "dead"


def test_lease_expiry_never_passes_max_lease() -> None:
    policy = QueuePolicy(lease_seconds=30, max_lease_seconds=100)
    assert policy.lease_expiry(now=10, claimed_at=0) == 40
    assert policy.lease_expiry(now=90, claimed_at=0) == 100
    assert not policy.renewal_capped(now=99.9, claimed_at=0)
    assert policy.renewal_capped(now=100, claimed_at=0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lease_seconds": 0},
        {"max_attempts": 0},
        {"backoff_base": 10, "backoff_cap": 5},
        {"lease_seconds": 60, "max_lease_seconds": 30},
    ],
)
def test_settings_out_of_range_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        QueuePolicy(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "setting, bad",
    [
        (setting, bad)
        for setting in ("lease_seconds", "max_lease_seconds", "backoff_base", "backoff_cap")
        for bad in (
            math.nan,
            math.inf,
            -math.inf,
            True,
            "30",
            None,
            10 * 365 * 86_400 + 1,
            10**400,
            10**5000,
            Fraction(10**400),
        )
    ]
    + [("max_attempts", bad) for bad in (0, 2**31, 1.5, True, None, math.nan)],
    ids=lambda value: shown(value)[:40],  # repr refuses an int past 4,300 digits
)
def test_a_setting_that_is_not_a_number_in_range_is_refused_naming_it(
    setting: str, bad: object
) -> None:
    """NaN compares false with everything, so it passed the range checks: memory and
    PostgreSQL then granted leases that never lapse, SQLite raised a raw TypeError, and Redis
    left an item half claimed (its script failed after its first writes)."""
    with pytest.raises(InvalidArgumentError) as caught:
        QueuePolicy(**{setting: bad})  # type: ignore[arg-type]
    assert caught.value.argument == setting
    assert setting in str(caught.value) and caught.value.limit in str(caught.value)


def test_the_policy_limits_are_accepted() -> None:
    ten_years = 10 * 365 * 86_400
    policy = QueuePolicy(
        lease_seconds=ten_years, max_lease_seconds=ten_years, backoff_cap=ten_years
    )
    assert policy.max_lease_seconds == ten_years
    assert QueuePolicy(max_attempts=2**31 - 1, backoff_base=0, backoff_cap=0).max_attempts == (
        2**31 - 1
    )


def test_other_real_numbers_are_taken_as_floats() -> None:
    # The checks refused what the comparisons had taken (a Decimal, a Fraction, a numpy
    # scalar); they are kept as floats, which every backend sends as it sends a float.
    policy = QueuePolicy(lease_seconds=Decimal("2.5"), backoff_base=Fraction(1, 2))
    assert (policy.lease_seconds, policy.backoff_base) == (2.5, 0.5)
    assert type(policy.lease_seconds) is float and type(policy.backoff_base) is float
    assert QueuePolicy(lease_seconds=30).lease_seconds == 30  # an int stays as it was given


def test_the_redis_retry_table_draws_what_backoff_draws_row_by_row() -> None:
    # The table's ceilings are kept per policy settings; every call still draws afresh.
    policy = QueuePolicy(
        max_attempts=4, backoff_base=2, backoff_cap=50, random=random.Random(7).random
    )
    twin = QueuePolicy(
        max_attempts=4, backoff_base=2, backoff_cap=50, random=random.Random(7).random
    )
    for _ in range(2):
        table = retry_table(policy)
        rows = int(table[1])
        assert table[0] == "4" and rows == 6  # 2 * 2^5 = 64 passes the cap of 50
        expected = [
            twin.on_lapse(n, 0.0, max_attempts=rows + 1).retry_at for n in range(1, rows + 1)
        ]
        assert [float(row) for row in table[2:]] == expected
