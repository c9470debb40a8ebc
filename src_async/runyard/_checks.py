"""Checks every backend shares (page sizes, TTLs) and the defaults they share; no I/O."""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_VALUE_BYTES", "DEFAULT_STATUS", "check_limit", "check_ttl"]


DEFAULT_MAX_VALUE_BYTES = 262_144
DEFAULT_STATUS = "running"


def check_limit(limit: int, what: str = "limit") -> int:
    """Return ``limit`` if it is a positive page size of at most 10,000; else raise ValueError."""
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 10_000:
        raise ValueError(f"{what} must be an int between 1 and 10000, not {limit!r}")
    return limit


def check_ttl(ttl_seconds: float) -> float:
    """Return ``ttl_seconds`` as a float if it is positive; else raise ValueError."""
    if not ttl_seconds > 0:
        raise ValueError(f"ttl_seconds must be positive, not {ttl_seconds!r}")
    return float(ttl_seconds)
