"""QueuePolicy: leases, retries, backoff and the dead letter, decided once for every backend."""

from __future__ import annotations

import numbers
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Literal

from runyard.errors import InvalidArgumentError
from runyard.validation import MAX_DELAY_SECONDS, is_finite, shown

__all__ = ["MAX_POLICY_ATTEMPTS", "RECLAIM_PER_CLAIM", "FailureDecision", "QueuePolicy"]

RECLAIM_PER_CLAIM = 8
"""Lapsed leases a ``claim`` or ``claim_many`` takes back (as ``reap`` would) before it claims:
a small, fixed bound, so recovery needs no reaper under load and a claim stays cheap."""


# The policy's times (seconds), and whether each must be above 0 (else from 0).
_SECONDS = (
    ("lease_seconds", True),
    ("max_lease_seconds", True),
    ("backoff_base", False),
    ("backoff_cap", False),
)
MAX_POLICY_ATTEMPTS = 2**31 - 1
"""The most ``max_attempts`` a policy may give (PostgreSQL reads it as an ``integer``)."""
_ATTEMPTS_RULE = f"an int from 1 to {MAX_POLICY_ATTEMPTS}"


def _refused(setting: str, problem: str, rule: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"QueuePolicy {setting} {problem} ({rule})", argument=setting, limit=rule
    )


def _check_seconds(setting: str, value: object, positive: bool) -> float:
    """Return a policy time as an int or float (another real number, a numpy scalar, a
    Fraction or a Decimal, as a float), or refuse one that is not a finite number of seconds
    in range: NaN compares false with everything, so it passed the range checks and every
    backend then did something else with it (a lease that never lapsed, a raw driver error,
    a lost item on Redis)."""
    bound = "above 0" if positive else "from 0"
    rule = f"a finite number of seconds {bound} up to {MAX_DELAY_SECONDS}"
    if isinstance(value, bool) or not isinstance(value, numbers.Real | Decimal):
        raise _refused(setting, f"must be a number, not {type(value).__name__}", rule)
    try:
        seconds = value if isinstance(value, int | float) else float(value)
    except OverflowError:  # a Fraction or Decimal past a float's range
        raise _refused(setting, f"is {shown(value)}, out of range", rule) from None
    if not is_finite(seconds):
        raise _refused(setting, f"is {shown(value)}, not finite", rule)
    low = seconds > 0 if positive else seconds >= 0
    if not low or seconds > MAX_DELAY_SECONDS:
        raise _refused(setting, f"is {shown(value)}, out of range", rule)
    return seconds


def _check_attempts(value: object) -> int:
    """Return a policy's ``max_attempts`` as an int (a numpy integer too), or refuse it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        kind = type(value).__name__
        raise _refused("max_attempts", f"must be an int, not {kind}", _ATTEMPTS_RULE)
    attempts = int(value)
    if not 1 <= attempts <= MAX_POLICY_ATTEMPTS:
        raise _refused("max_attempts", f"is {attempts}, out of range", _ATTEMPTS_RULE)
    return attempts


@dataclass(frozen=True)
class FailureDecision:
    """What becomes of a failed or lapsed item: back to ready at ``retry_at``, or dead."""

    outcome: Literal["retry", "dead"]
    retry_at: float | None
    reason: str


@dataclass(frozen=True)
class QueuePolicy:
    """Lease length, attempt budget and capped exponential backoff with full jitter.

    ``random`` is the jitter source (a float in [0, 1)); inject one for deterministic tests.
    Raises InvalidArgumentError (a ValueError) naming the setting and its rule for one outside
    its range: the times are finite numbers of seconds up to ten years (``lease_seconds`` and
    ``max_lease_seconds`` above 0, the backoff from 0; a real number of another type, such as
    a numpy scalar or a Decimal, is kept as a float), ``max_attempts`` an int from 1 to
    2**31 - 1, ``lease_seconds <= max_lease_seconds`` and ``backoff_base <= backoff_cap``.
    """

    lease_seconds: float = 30.0
    max_attempts: int = 5
    backoff_base: float = 1.0
    backoff_cap: float = 300.0
    max_lease_seconds: float = 3600.0
    random: Callable[[], float] = field(default=random.random, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name, positive in _SECONDS:  # frozen: the checked values are set as such
            object.__setattr__(self, name, _check_seconds(name, getattr(self, name), positive))
        object.__setattr__(self, "max_attempts", _check_attempts(self.max_attempts))
        if self.backoff_cap < self.backoff_base:
            rule = "0 <= backoff_base <= backoff_cap"
            raise _refused("backoff_cap", f"is below backoff_base {self.backoff_base}", rule)
        if self.max_lease_seconds < self.lease_seconds:
            rule = "lease_seconds <= max_lease_seconds"
            raise _refused(
                "max_lease_seconds", f"is below lease_seconds {self.lease_seconds}", rule
            )

    def backoff_ceiling(self, attempts: int) -> float:
        """The longest wait ``backoff(attempts)`` can draw: min(cap, base * 2^(n-1))."""
        # The exponent is capped so a huge attempt count cannot overflow the float.
        return min(self.backoff_cap, self.backoff_base * 2.0 ** min(max(attempts - 1, 0), 1000))

    def backoff(self, attempts: int) -> float:
        """Seconds to wait before the next attempt: uniform in [0, backoff_ceiling(attempts)]."""
        return float(self.backoff_ceiling(attempts) * self.random())

    def attempt_budget(self, max_attempts: int | None) -> int:
        """The attempts an item may use: its own ``max_attempts``, or the policy's when None."""
        return self.max_attempts if max_attempts is None else max_attempts

    def on_failure(
        self, attempts: int, now: float, *, retryable: bool, max_attempts: int | None = None
    ) -> FailureDecision:
        """Decide a failed attempt: dead when not retryable or out of attempts (the item's
        ``max_attempts``, else the policy's), else retry after the backoff."""
        budget = self.attempt_budget(max_attempts)
        if not retryable:
            return FailureDecision("dead", None, "failed (not retryable)")
        if attempts >= budget:
            return FailureDecision("dead", None, f"failed {attempts} of {budget} attempts")
        return FailureDecision("retry", now + self.backoff(attempts), "failed (retrying)")

    def on_lapse(
        self, attempts: int, now: float, *, max_attempts: int | None = None
    ) -> FailureDecision:
        """Decide a lease that lapsed (reaped or reclaimed by a claim): ready again after the
        backoff, or dead when out of attempts (the item's ``max_attempts``, else the policy's)."""
        budget = self.attempt_budget(max_attempts)
        if attempts >= budget:
            return FailureDecision("dead", None, f"lease lapsed on attempt {attempts} of {budget}")
        return FailureDecision("retry", now + self.backoff(attempts), "lease lapsed")

    def lease_expiry(self, now: float, claimed_at: float) -> float:
        """Expiry of a lease claimed at ``claimed_at``, renewed at ``now``, never past the cap."""
        return min(now + self.lease_seconds, claimed_at + self.max_lease_seconds)

    def renewal_capped(self, now: float, claimed_at: float) -> bool:
        """True when a heartbeat at ``now`` can no longer extend the lease (max_lease_seconds)."""
        return now >= claimed_at + self.max_lease_seconds
