"""WorkerSettings: how a worker runs, checked once for both twins."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from runyard.errors import ConfigurationError
from runyard.validation import is_finite, shown

__all__ = ["WorkerSettings"]


def _positive(name: str, value: float | None, *, zero: bool = False) -> None:
    if value is None:
        return
    ok = isinstance(value, int | float) and not isinstance(value, bool) and is_finite(value)
    if not ok or value < 0 or (value == 0 and not zero):
        rule = "a finite number >= 0" if zero else "a finite number > 0"
        raise ConfigurationError(f"worker setting {name} must be {rule}, not {shown(value)}")


@dataclass(frozen=True)
class WorkerSettings:
    """How a worker runs. Raises ConfigurationError for a value outside its range.

    - ``concurrency``: jobs at once (tasks in the async twin, threads in the sync twin).
    - ``heartbeat_seconds``: how often held leases are renewed, in one round trip; None: a
      third of the queue's ``policy.lease_seconds`` (10 s when the queue has no policy).
      The worker refuses one not under half the lease (ConfigurationError).
    - ``job_timeout``: seconds a job may run before it is failed (retryable); None: no limit.
    - ``shutdown_grace``: seconds in-flight jobs may finish after a stop before they are handed
      back to ready.
    - ``handback_seconds``: seconds the store calls of a shutdown may take past the grace
      (settles and hand-backs retried through store errors, a wait for an adopt in flight);
      then the worker exits anyway, as ``abort()`` does: what it did not hand back lapses and
      is recovered.
    - ``backstop_seconds``: the polling backstop; wake-ups are lossy hints.
    - ``flush_seconds``: how long a finished job's settle may wait to share a round trip.
    - ``batched``: use the queue's batched calls when it declares ``batched_operations``.
    - ``reap_seconds``: how often an idle worker returns lapsed leases (of crashed workers).
    - ``store_backoff_base``/``store_backoff_cap``: the jittered backoff after a store error.
    """

    concurrency: int = 1
    heartbeat_seconds: float | None = None
    job_timeout: float | None = None
    shutdown_grace: float = 30.0
    handback_seconds: float = 10.0
    backstop_seconds: float = 1.0
    flush_seconds: float = 0.002
    batched: bool = True
    reap_seconds: float = 5.0
    store_backoff_base: float = 0.1
    store_backoff_cap: float = 10.0
    random: Callable[[], float] = field(default=random.random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.concurrency, int) or not 1 <= self.concurrency <= 10_000:
            raise ConfigurationError(
                f"worker setting concurrency must be an int from 1 to 10000, "
                f"not {self.concurrency!r}"
            )
        _positive("heartbeat_seconds", self.heartbeat_seconds)
        _positive("job_timeout", self.job_timeout)
        _positive("shutdown_grace", self.shutdown_grace, zero=True)
        _positive("handback_seconds", self.handback_seconds, zero=True)
        _positive("backstop_seconds", self.backstop_seconds)
        _positive("flush_seconds", self.flush_seconds, zero=True)
        _positive("reap_seconds", self.reap_seconds)
        _positive("store_backoff_base", self.store_backoff_base)
        _positive("store_backoff_cap", self.store_backoff_cap)

    def heartbeat_every(self, lease_seconds: float | None) -> float:
        """Seconds between heartbeat rounds for leases of ``lease_seconds``. Raises
        ConfigurationError when ``heartbeat_seconds`` is not under half the lease: a lease
        must outlive one heartbeat round that fails, or a job runs again while it runs."""
        if self.heartbeat_seconds is None:
            return lease_seconds / 3 if lease_seconds else 10.0
        if lease_seconds and self.heartbeat_seconds >= lease_seconds / 2:
            raise ConfigurationError(
                f"worker setting heartbeat_seconds must be under half the queue's "
                f"lease_seconds ({lease_seconds:g} s), not {self.heartbeat_seconds!r}: a lease "
                f"must outlive one heartbeat round that fails"
            )
        return self.heartbeat_seconds

    def store_backoff(self, attempt: int) -> float:
        """Seconds to wait after the ``attempt``-th store error in a row: capped exponential,
        jittered between half and all of the ceiling."""
        ceiling = min(self.store_backoff_cap, self.store_backoff_base * 2.0 ** min(attempt, 30))
        return float(ceiling * (0.5 + self.random() / 2))
