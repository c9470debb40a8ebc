"""What a handler can raise and what a worker reports; one class for both twins."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PermanentFailure", "WorkerReport"]


class PermanentFailure(Exception):
    """Raise from a handler to dead-letter the item at once instead of retrying it."""


@dataclass
class WorkerReport:
    """What one worker did."""

    completed: int = 0
    failed: int = 0
    lost: int = 0
    reaped: int = 0
