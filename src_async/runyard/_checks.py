"""Checks every backend shares (page sizes, TTLs) and the defaults they share; no I/O."""

from __future__ import annotations

import math

from runyard.errors import InvalidArgumentError

__all__ = ["DEFAULT_MAX_VALUE_BYTES", "DEFAULT_STATUS", "check_limit", "check_ttl"]


DEFAULT_MAX_VALUE_BYTES = 262_144
DEFAULT_STATUS = "running"


def check_limit(limit: int, what: str = "limit") -> int:
    """Return ``limit`` if it is a positive page size of at most 10,000; else raise ValueError."""
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 10_000:
        raise ValueError(f"{what} must be an int between 1 and 10000, not {limit!r}")
    return limit


def check_ttl(ttl_seconds: float) -> float:
    """Return ``ttl_seconds`` as a float if it is a positive, finite number; else raise
    InvalidArgumentError (a ValueError)."""
    number = isinstance(ttl_seconds, int | float) and not isinstance(ttl_seconds, bool)
    if not (number and math.isfinite(ttl_seconds) and ttl_seconds > 0):
        raise InvalidArgumentError(
            f"ttl_seconds must be a positive, finite number of seconds, not {ttl_seconds!r}",
            argument="ttl_seconds",
            limit="a finite number of seconds above 0",
        )
    return float(ttl_seconds)
