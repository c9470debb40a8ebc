"""The deadline a stop sets for the worker's store waits, shared by both twins (no I/O)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["StopDeadline"]


class StopDeadline:
    """Past ``shutdown_grace + handback_seconds`` from a stop, the worker's store waits (an
    error's backoff, an adopt in flight) and its wait for jobs sending their own complete
    are given up: ``give_up`` logs it once and calls ``on_give_up`` (the worker's abort)."""

    def __init__(self, worker: str, log: logging.Logger, on_give_up: Callable[[], None]) -> None:
        self.worker = worker
        self._log = log
        self.on_give_up = on_give_up
        self._give_up_at: float | None = None  # on time.monotonic(): set by a stop
        self._gave_up = False

    def give_up_at(self, deadline: float) -> None:
        """From a stop on: store waits (an error's backoff, an adopt in flight) end at
        ``deadline`` (``time.monotonic()``), and the worker aborts."""
        self._give_up_at = deadline

    def give_up_in(self) -> float:
        """Seconds until a stop's deadline (infinite before a stop)."""
        if self._give_up_at is None:
            return float("inf")
        return self._give_up_at - time.monotonic()

    def give_up(self, what: str) -> None:
        """Past a stop's deadline: log it (once) and abort the worker."""
        if not self._gave_up:
            self._gave_up = True
            self._log.warning(
                "stopping: gave up waiting on the store (%s) past the shutdown's "
                "handback_seconds; held leases lapse and are recovered",
                what,
                extra={"worker": self.worker, "operation": what},
            )
        self.on_give_up()
