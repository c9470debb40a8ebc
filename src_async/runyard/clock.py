"""Injectable time: the system clock for production, a manual one for tests."""

from __future__ import annotations

import threading
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "ManualClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """A source of wall-clock time in seconds since the epoch."""

    def now(self) -> float:
        """Return the current time in seconds."""
        ...


class SystemClock:
    """The machine's wall clock."""

    def now(self) -> float:
        """Return ``time.time()``."""
        return time.time()

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A clock that only moves when told to; tests build crashed states without sleeping."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        """Return the current manual time."""
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move time forward by ``seconds`` (never backwards); return the new time.

        Raises ValueError for a negative step.
        """
        if seconds < 0:
            raise ValueError(f"a clock never moves backwards (got {seconds})")
        with self._lock:
            self._now += seconds
            return self._now

    def __repr__(self) -> str:
        return f"ManualClock(now={self._now})"
