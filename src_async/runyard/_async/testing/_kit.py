"""The policy every queue case of the conformance kit runs under."""

from __future__ import annotations

from runyard.policy import QueuePolicy

__all__ = ["KIT_POLICY"]

# Deterministic: jitter is always half the ceiling, so attempt 1 backs off 5 s, attempt 2 10 s,
# attempt 3 20 s (after a failure or a lapse alike).
KIT_POLICY = QueuePolicy(
    lease_seconds=30,
    max_attempts=3,
    backoff_base=10,
    backoff_cap=60,
    max_lease_seconds=120,
    random=lambda: 0.5,
)
