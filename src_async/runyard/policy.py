"""QueuePolicy: leases, retries, backoff and the dead letter, decided once for every backend."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["RECLAIM_PER_CLAIM", "FailureDecision", "QueuePolicy"]

RECLAIM_PER_CLAIM = 8
"""Lapsed leases a ``claim`` or ``claim_many`` takes back (as ``reap`` would) before it claims:
a small, fixed bound, so recovery needs no reaper under load and a claim stays cheap."""


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
    Raises ValueError for a setting outside its range.
    """

    lease_seconds: float = 30.0
    max_attempts: int = 5
    backoff_base: float = 1.0
    backoff_cap: float = 300.0
    max_lease_seconds: float = 3600.0
    random: Callable[[], float] = field(default=random.random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.lease_seconds <= 0:
            raise ValueError("lease_seconds must be positive")
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.backoff_base < 0 or self.backoff_cap < self.backoff_base:
            raise ValueError("backoff needs 0 <= backoff_base <= backoff_cap")
        if self.max_lease_seconds < self.lease_seconds:
            raise ValueError("max_lease_seconds must be at least lease_seconds")

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
