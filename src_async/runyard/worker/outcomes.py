"""What a handler can raise, what a worker counts and the hooks it calls; one class each for
both twins."""

from __future__ import annotations

import builtins
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from runyard.validation import MAX_ERROR_BYTES, storable_error_tail, storable_error_text
from runyard.worker.job import Job

__all__ = [
    "MAX_LOGGED_CHARS",
    "MAX_MESSAGE_CHARS",
    "MAX_TRACEBACK_CHARS",
    "JobTimeoutError",
    "PermanentFailure",
    "WorkerHooks",
    "WorkerStats",
    "describe_failure",
    "is_permanent",
    "logged_failure",
]

MAX_LOGGED_CHARS = 300
"""A failure's log line shows at most this many characters of the exception (see
``logged_failure``)."""
MAX_TRACEBACK_CHARS = 4000
"""The stored traceback keeps its last this many characters (the frames nearest the raise)."""
MAX_MESSAGE_CHARS = 1000
"""The stored message keeps its first this many characters; so does each message the traceback
shows (a cause's, a context's, an exception group member's), and the notes of each exception
together."""


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
    """The text stored as the item's error: type, message and the end of the traceback,
    within MAX_ERROR_BYTES. Long texts are cut wherever the traceback shows them, so that
    none pushes the frames out of what is stored: the message of the exception and of each
    exception it chains (cause, context, an exception group's members), each to
    MAX_MESSAGE_CHARS, and the notes (``add_note``) of each to MAX_MESSAGE_CHARS together;
    each cut says how many characters it dropped."""
    head = f"{type(exc).__module__}.{type(exc).__qualname__}: {_cut(_safe_str(exc))}\n\n"
    head = storable_error_text(head)
    trace = _short_traceback(exc)
    if len(trace) > MAX_TRACEBACK_CHARS:
        trace = "...\n" + trace[-MAX_TRACEBACK_CHARS:]
    # Its end in what the head leaves (in UTF-8 a character takes up to 4 bytes): the frames
    # nearest the raise are there.
    return head + storable_error_tail(trace, MAX_ERROR_BYTES - len(head.encode()))


def logged_failure(exc: BaseException) -> str:
    """What a log line shows of ``exc``: its ``repr`` on one line, cut to MAX_LOGGED_CHARS
    (the stored error keeps more; a 100,000-character message made one log line that long)."""
    try:
        text = repr(exc)
    except Exception:
        text = f"<{type(exc).__name__} repr() failed>"
    return _cut(" ".join(text.splitlines()), MAX_LOGGED_CHARS)


def _cut(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def _safe_str(value: object) -> str:
    """``str(value)``, or a placeholder when that raises (as the traceback module prints)."""
    try:
        return str(value)
    except Exception:
        return f"<{type(value).__name__} str() failed>"


def _short_traceback(exc: BaseException) -> str:
    """``traceback.format_exception(exc)`` with the long texts cut (``describe_failure``)."""
    shown = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    pending, seen = [shown], set[int]()
    while pending:  # the exception, the ones it chains and an exception group's members
        one = pending.pop()
        if id(one) in seen:
            continue
        seen.add(id(one))
        # The formatter prints _str (a SyntaxError: msg) and __notes__: the texts it took
        # from the exception when it was built (Python 3.10 to 3.13), cut here.
        for name in ("_str", "msg"):
            text = getattr(one, name, None)
            if isinstance(text, str):
                setattr(one, name, _cut(text))
        notes = getattr(one, "__notes__", None)
        if notes is not None:
            setattr(one, "__notes__", _cut_notes(notes))  # noqa: B010 (not in 3.10 stubs)
        pending += [chained for chained in (one.__cause__, one.__context__) if chained]
        pending += getattr(one, "exceptions", None) or []
    return "".join(shown.format())


def _cut_notes(notes: object) -> list[str]:
    """The notes, MAX_MESSAGE_CHARS of them in all: a note that passes it is cut, and the
    notes after it are counted in one line."""
    if isinstance(notes, str) or not isinstance(notes, Sequence):
        return [_cut(_safe_str(notes))]  # not a list of notes: printed as it is
    texts = [_safe_str(note) for note in notes]
    kept: list[str] = []
    left = MAX_MESSAGE_CHARS
    for i, text in enumerate(texts):
        if left <= 0:
            rest = texts[i:]
            chars = sum(len(note) for note in rest)
            kept.append(f"... ({len(rest)} more notes, {chars} characters)")
            break
        kept.append(_cut(text, left))
        left -= len(text)
    return kept
