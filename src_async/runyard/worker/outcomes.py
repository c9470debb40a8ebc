"""What a handler can raise, what a worker counts and the hooks it calls; one class each for
both twins."""

from __future__ import annotations

import builtins
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runyard.validation import storable_error_text
from runyard.worker.job import Job

__all__ = [
    "MAX_MESSAGE_CHARS",
    "MAX_TRACEBACK_CHARS",
    "JobTimeoutError",
    "PermanentFailure",
    "WorkerHooks",
    "WorkerStats",
    "describe_failure",
    "is_permanent",
]

MAX_TRACEBACK_CHARS = 4000
"""The stored traceback keeps its last this many characters (the frames nearest the raise)."""
MAX_MESSAGE_CHARS = 1000
"""The stored message keeps its first this many characters."""


class PermanentFailure(Exception):
    """Raise from a handler to dead-letter the item at once instead of retrying it."""


class JobTimeoutError(Exception):
    """A job ran past the worker's ``job_timeout``; the item is failed (retryable)."""


@dataclass
class WorkerStats:
    """What one worker did so far (``worker.stats()`` returns a copy).

    ``failed`` counts handler errors and timeouts, each then ``retried`` or ``dead`` (or
    ``lost`` too, when its fail is refused: the lease was lost meanwhile);
    ``lost`` counts leases the worker lost (capped, taken) and so never settled;
    ``handed_back`` counts jobs returned to ready at shutdown.
    """

    completed: int = 0
    failed: int = 0
    retried: int = 0
    dead: int = 0
    lost: int = 0
    timed_out: int = 0
    handed_back: int = 0
    in_flight: int = 0
    reaped: int = 0
    claim_round_trips: int = 0
    heartbeat_round_trips: int = 0
    settle_round_trips: int = 0
    store_errors: int = 0


@dataclass
class WorkerHooks:
    """Callbacks the worker calls from its loop; an Exception in a hook is logged, not raised.
    Any other BaseException (SystemExit, KeyboardInterrupt) stops the worker as ``stop()``
    does, and its ``run()`` raises it once the shutdown is done.

    ``on_job_end(job, outcome)`` gets "completed", "retried", "dead", "lost" or "handed_back".
    """

    on_job_start: Callable[[Job], None] | None = None
    on_job_end: Callable[[Job, str], None] | None = None
    on_failure: Callable[[Job, BaseException], None] | None = None
    on_dead: Callable[[Job, BaseException], None] | None = None


def is_permanent(exc: BaseException) -> bool:
    """Whether ``exc`` dead-letters at once: a PermanentFailure, or an exception group (an
    ``asyncio.TaskGroup``'s) whose every exception is one."""
    if isinstance(exc, PermanentFailure):
        return True
    group: Any = getattr(builtins, "BaseExceptionGroup", None)  # Python 3.11 and later
    if group is None or not isinstance(exc, group):
        return False
    matched, rest = exc.split(PermanentFailure)
    return matched is not None and rest is None


def describe_failure(exc: BaseException) -> str:
    """The text stored as the item's error: type, message and the end of the traceback. A
    message longer than MAX_MESSAGE_CHARS is cut, in the traceback too: it must not push
    the frames out of what is stored."""
    message = str(exc)
    if len(message) > MAX_MESSAGE_CHARS:
        short = (
            f"{message[:MAX_MESSAGE_CHARS]}... ({len(message) - MAX_MESSAGE_CHARS} more characters)"
        )
    else:
        short = message
    head = f"{type(exc).__module__}.{type(exc).__qualname__}: {short}"
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if short is not message:
        trace = trace.replace(message, short)
    if len(trace) > MAX_TRACEBACK_CHARS:
        trace = "...\n" + trace[-MAX_TRACEBACK_CHARS:]
    return storable_error_text(f"{head}\n\n{trace}")
