"""A log handler that tells a test when a follower has noticed its listener is gone."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from runyard._flavours import AsyncEvent

__all__ = ["LostListener", "watching_for_lost_listener"]

LOST = "lost their listener"


class LostListener(logging.Handler):
    """Sets ``flag`` when runyard.follow logs that live updates lost their listener."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.flag = AsyncEvent()

    def emit(self, record: logging.LogRecord) -> None:
        if LOST in record.getMessage():
            self.flag.set()


@contextmanager
def watching_for_lost_listener() -> Iterator[LostListener]:
    """Attach a LostListener to the runyard.follow logger for the block."""
    handler = LostListener()
    logger = logging.getLogger("runyard.follow")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
