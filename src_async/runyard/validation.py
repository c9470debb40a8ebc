"""The one validation layer every store and twin calls at each method's entry; no I/O.

Each check returns the value it accepts (normalised where the rule says so) or raises
InvalidArgumentError naming the argument, the problem and the limit, before anything is sent.
The limits are documented in docs/protocols.md ("Limits and validation"); the conformance kit
(``runyard._async.testing.validation``) holds every store to them.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

from runyard.errors import InvalidArgumentError, StateInUseError, StatePersistenceError
from runyard.keys import validate_identifier

if TYPE_CHECKING:
    from runyard.models import CounterDelta, Lease, RunLease

__all__ = [
    "COUNTER_FIELDS",
    "DEFAULT_MAX_VALUE_BYTES",
    "DEFAULT_STATUS",
    "MAX_COUNTER",
    "MAX_DELAY_SECONDS",
    "MAX_ERROR_BYTES",
    "MAX_ITEM_ATTEMPTS",
    "MAX_PRIORITY",
    "MAX_RUN_AT",
    "MAX_STATUS_BYTES",
    "MAX_VERSION_NUMBER",
    "MIN_PRIORITY",
    "check_counter",
    "check_delay",
    "check_delta",
    "check_error_text",
    "check_failure",
    "check_flag",
    "check_limit",
    "check_max_attempts",
    "check_older_than",
    "check_patch_result",
    "check_priority",
    "check_run_lease",
    "check_schedule",
    "check_status",
    "check_ttl",
    "check_version_number",
    "check_write_guards",
    "counter_overflow",
    "is_finite",
    "item_id_or_new",
    "session_in_use",
    "session_still_growing",
    "settle_target",
    "shown",
    "storable_error_tail",
    "storable_error_text",
]

# Counters stay exact on every backend: Lua numbers are doubles (exact to 2**53), Redis
# HINCRBY and PostgreSQL bigint are int64. A patch whose result would pass this is refused whole.
DEFAULT_MAX_VALUE_BYTES = 262_144
DEFAULT_STATUS = "running"
MAX_COUNTER = 2**53 - 1
MAX_VERSION_NUMBER = 2**63 - 1
COUNTER_FIELDS = ("input_tokens", "output_tokens", "cost_micros", "iterations", "cursor")
MIN_PRIORITY = -(2**31)
MAX_PRIORITY = 2**31 - 1
MAX_DELAY_SECONDS = 10 * 365 * 86_400  # ten years
MAX_RUN_AT = 253_402_300_799.0  # 9999-12-31T23:59:59Z in seconds since the epoch
MAX_ITEM_ATTEMPTS = 10_000
MAX_STATUS_BYTES = 64
MAX_ERROR_BYTES = 16_384

_COUNTER_RULE = f"an int from 0 to {MAX_COUNTER} (2**53 - 1)"
_PRIORITY_RULE = f"an int from {MIN_PRIORITY} to {MAX_PRIORITY}"
_DELAY_RULE = f"a finite number of seconds from 0 to {MAX_DELAY_SECONDS}"


def _refuse(argument: str, problem: str, limit: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"{argument} {problem} ({limit})", argument=argument, limit=limit)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_counter(value: object, argument: str) -> int:
    """Return ``value`` if it is an int in 0..MAX_COUNTER; else raise InvalidArgumentError."""
    if not _is_int(value):
        raise _refuse(argument, f"must be an int, not {type(value).__name__}", _COUNTER_RULE)
    assert isinstance(value, int)
    if not 0 <= value <= MAX_COUNTER:
        raise _refuse(argument, f"is {value}, out of range", _COUNTER_RULE)
    return value


def check_delta(delta: CounterDelta) -> CounterDelta:
    """Return ``delta`` if every amount is in range (a delta built with ``model_construct``
    skips the model's own check). Raises InvalidArgumentError."""
    from runyard.models import CounterDelta

    if not isinstance(delta, CounterDelta):
        raise _refuse(
            "delta", f"must be a CounterDelta, not {type(delta).__name__}", "a CounterDelta"
        )
    for name in COUNTER_FIELDS:
        value = getattr(delta, name)
        # A plain int in range (what the model's own check leaves) needs no message built.
        if type(value) is not int or not 0 <= value <= MAX_COUNTER:
            check_counter(value, f"delta.{name}")
    return delta


def check_patch_result(current: dict[str, int], delta: CounterDelta) -> None:
    """Raise InvalidArgumentError if adding ``delta`` to ``current`` would pass MAX_COUNTER;
    the store then writes nothing."""
    for name in COUNTER_FIELDS:
        total = current[name] + getattr(delta, name)
        if total > MAX_COUNTER:
            raise counter_overflow(name, current[name], getattr(delta, name))


def counter_overflow(name: str, current: int, amount: int) -> InvalidArgumentError:
    """The refusal of a patch that would take counter ``name`` past MAX_COUNTER."""
    return _refuse(
        f"delta.{name}",
        f"would take {name} from {current} to {current + amount}; nothing was written",
        f"counters stay from 0 to {MAX_COUNTER} (2**53 - 1)",
    )


def check_priority(priority: object) -> int:
    """Return ``priority`` if it is an int (not a bool) in MIN_PRIORITY..MAX_PRIORITY."""
    if not _is_int(priority):
        raise _refuse("priority", f"must be an int, not {type(priority).__name__}", _PRIORITY_RULE)
    assert isinstance(priority, int)
    if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise _refuse("priority", f"is {priority}, out of range", _PRIORITY_RULE)
    return priority


def shown(value: object) -> str:
    """``repr(value)`` for a refusal's message, but an int of more than 30 digits by its size
    (its repr is long, and past 4,300 digits Python refuses to make one: the refusal raised
    ValueError instead); every such int is past every limit here."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value).bit_length() > 100:
        return f"an int of about {int(abs(value).bit_length() * 0.30103) + 1} digits"
    return repr(value)


def is_finite(value: float) -> bool:
    """``math.isfinite``, False for an int past a float's range (for which it raised a bare
    OverflowError, not the caller's error naming the argument: ``run_at=10**400``)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def check_delay(delay_seconds: object, argument: str = "delay_seconds") -> float:
    """Return ``delay_seconds`` as a float if it is finite and in 0..MAX_DELAY_SECONDS."""
    if isinstance(delay_seconds, bool) or not isinstance(delay_seconds, int | float):
        raise _refuse(
            argument, f"must be a number, not {type(delay_seconds).__name__}", _DELAY_RULE
        )
    if not is_finite(delay_seconds):
        raise _refuse(argument, f"is {shown(delay_seconds)}, not finite", _DELAY_RULE)
    if not 0 <= delay_seconds <= MAX_DELAY_SECONDS:
        raise _refuse(argument, f"is {shown(delay_seconds)}, out of range", _DELAY_RULE)
    return float(delay_seconds)


_RUN_AT_RULE = f"a finite time in seconds since the epoch, from 0 to {MAX_RUN_AT:.0f}"


def check_schedule(delay_seconds: object, run_at: object) -> tuple[float, float | None]:
    """Return ``(delay_seconds, run_at)`` checked: a delay (see ``check_delay``) or an absolute
    ``run_at`` (seconds since the epoch, on the store's clock), never both.

    A ``run_at`` in the past makes the item due at once.
    """
    delay = check_delay(delay_seconds)
    if run_at is None:
        return delay, None
    if isinstance(run_at, bool) or not isinstance(run_at, int | float):
        raise _refuse("run_at", f"must be a number, not {type(run_at).__name__}", _RUN_AT_RULE)
    if not is_finite(run_at) or not 0 <= run_at <= MAX_RUN_AT:
        raise _refuse("run_at", f"is {shown(run_at)}, out of range", _RUN_AT_RULE)
    if delay:
        raise _refuse(
            "run_at", "was given with a non-zero delay_seconds", "one of run_at or delay_seconds"
        )
    return 0.0, float(run_at)


def check_max_attempts(max_attempts: object) -> int | None:
    """Return a per-item ``max_attempts`` (None: the policy's) if it is an int from 1 to
    MAX_ITEM_ATTEMPTS."""
    if max_attempts is None:
        return None
    rule = f"None or an int from 1 to {MAX_ITEM_ATTEMPTS}"
    if not _is_int(max_attempts):
        raise _refuse("max_attempts", f"must be an int, not {type(max_attempts).__name__}", rule)
    assert isinstance(max_attempts, int)
    if not 1 <= max_attempts <= MAX_ITEM_ATTEMPTS:
        raise _refuse("max_attempts", f"is {max_attempts}, out of range", rule)
    return max_attempts


def check_older_than(older_than: object) -> float:
    """Return ``older_than`` (an age in seconds, as ``check_delay`` bounds it) as a float."""
    return check_delay(older_than, "older_than")


def _check_text(value: object, argument: str, max_bytes: int, *, empty_ok: bool) -> str:
    rule = f"{'' if empty_ok else 'non-empty '}UTF-8 text without NUL, at most {max_bytes} bytes"
    if not isinstance(value, str):
        raise _refuse(argument, f"must be a str, not {type(value).__name__}", rule)
    if not value and not empty_ok:
        raise _refuse(argument, "must not be empty (pass None to keep the current one)", rule)
    if "\x00" in value:
        raise _refuse(argument, "must not contain NUL", rule)
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise _refuse(argument, "is not valid UTF-8 text (lone surrogate)", rule) from None
    if size > max_bytes:
        raise _refuse(argument, f"is {size} bytes", rule)
    return value


def check_status(status: str | None, argument: str = "status") -> str | None:
    """Return ``status`` (None keeps the current one) if it is non-empty text without NUL or
    lone surrogates, at most MAX_STATUS_BYTES in UTF-8."""
    if status is None:
        return None
    return _check_text(status, argument, MAX_STATUS_BYTES, empty_ok=False)


def check_error_text(error: str | None) -> str | None:
    """Return ``error`` (None keeps the last one) if it is text without NUL or lone
    surrogates, at most MAX_ERROR_BYTES in UTF-8."""
    if error is None:
        return None
    return _check_text(error, "error", MAX_ERROR_BYTES, empty_ok=True)


def check_failure(error: str | None, retryable: object) -> None:
    """Check a ``fail``'s ``error`` (see ``check_error_text``) and ``retryable``, a bool (it
    was read by truthiness: ``"no"`` retried, ``None`` dead-lettered)."""
    check_error_text(error)
    if not isinstance(retryable, bool):
        raise _refuse(
            "retryable", f"must be a bool, not {type(retryable).__name__}", "True or False"
        )


def check_flag(value: object, argument: str) -> bool:
    """Return ``value`` if it is a bool; else raise InvalidArgumentError naming ``argument``
    (flags were read by truthiness: ``cascade="no"`` cascaded)."""
    if not isinstance(value, bool):
        raise _refuse(argument, f"must be a bool, not {type(value).__name__}", "True or False")
    return value


def check_run_lease(lease: object) -> RunLease:
    """Return ``lease`` if it is a RunLease whose fields are what acquire_lease hands out (a
    RunLease is a plain model anyone can build); else raise InvalidArgumentError."""
    from runyard.models import RunLease

    if not isinstance(lease, RunLease):
        raise _refuse("lease", f"must be a RunLease, not {type(lease).__name__}", "a RunLease")
    validate_identifier(lease.tenant, "tenant")
    validate_identifier(lease.run_id, "run_id")
    validate_identifier(lease.holder, "holder")
    check_version_number(lease.epoch, "epoch")
    return lease


def storable_error_text(text: str) -> str:
    """Return ``text`` made acceptable to check_error_text: NUL and lone surrogates replaced,
    cut to MAX_ERROR_BYTES of UTF-8 (for callers that report arbitrary exception text)."""
    return _storable(text)[:MAX_ERROR_BYTES].decode("utf-8", "ignore")


def storable_error_tail(text: str, limit: int) -> str:
    """Return ``text`` made acceptable as ``storable_error_text`` makes it, in at most
    ``limit`` bytes of UTF-8: whole, or ``...`` and a line break and its end (a traceback's
    end holds the frames nearest the raise)."""
    clean = _storable(text)
    if len(clean) <= limit:
        return clean.decode("utf-8")
    return "...\n" + clean[len(clean) - max(0, limit - 4) :].decode("utf-8", "ignore")


def _storable(text: str) -> bytes:
    return text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace")


def _new_item_id() -> str:
    """A random (version 4) UUID's 32 hex digits, as ``uuid.uuid4().hex`` gives them, without
    building a UUID object (half the time of every enqueue's id)."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # RFC 4122 variant
    return raw.hex()


def item_id_or_new(item_id: str | None) -> tuple[str, bool]:
    """Return ``(item_id, minted)``: a fresh id when None, else the validated caller's id
    (an empty id is refused like any other bad identifier, never replaced)."""
    if item_id is None:
        return _new_item_id(), True
    return validate_identifier(item_id, "item_id"), False


def settle_target(
    tenant_or_lease: str | Lease, item_id: str | None, token: int | None
) -> tuple[str, str, int]:
    """Return ``(tenant, item_id, token)`` for a settle called as ``settle(lease)`` or as
    ``settle(tenant, item_id, token=...)``; validated. Raises InvalidArgumentError for a mix."""
    from runyard.models import Lease

    if isinstance(tenant_or_lease, Lease):
        lease = tenant_or_lease
        if item_id is not None or (token is not None and token != lease.token):
            raise _refuse(
                "lease",
                "was passed with a different item_id or token",
                "pass a Lease alone, or tenant, item_id and token=",
            )
        # A Lease is a plain model anyone can build: its fields are checked as the same
        # arguments passed alone are (no backend is sent a token past a bigint, or an id
        # memory would refuse).
        check_version_number(lease.token, "token")
        return (
            validate_identifier(lease.tenant, "tenant"),
            validate_identifier(lease.item_id, "item_id"),
            lease.token,
        )
    if item_id is None or token is None:
        raise _refuse(
            "item_id" if item_id is None else "token",
            "is missing",
            "pass a Lease alone, or tenant, item_id and token=",
        )
    check_version_number(token, "token")
    return (
        validate_identifier(tenant_or_lease, "tenant"),
        validate_identifier(item_id, "item_id"),
        token,
    )


def check_limit(limit: int, what: str = "limit") -> int:
    """Return ``limit`` if it is a page size from 1 to 10,000; else raise InvalidArgumentError
    (a ValueError)."""
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 10_000:
        raise _refuse(what, f"{limit!r} is not a page size", "an int from 1 to 10000")
    return limit


def check_ttl(ttl_seconds: float) -> float:
    """Return ``ttl_seconds`` as a float if it is a positive, finite number; else raise
    InvalidArgumentError (a ValueError)."""
    number = isinstance(ttl_seconds, int | float) and not isinstance(ttl_seconds, bool)
    if not (number and is_finite(ttl_seconds) and ttl_seconds > 0):
        raise _refuse(
            "ttl_seconds",
            f"{shown(ttl_seconds)} is not a positive, finite number of seconds",
            "a finite number of seconds above 0",
        )
    return float(ttl_seconds)


_VERSION_RULE = f"an int from 0 to {MAX_VERSION_NUMBER} (a PostgreSQL bigint)"


def check_version_number(value: object, argument: str) -> int:
    """Return ``value`` if it is an int from 0 to 2**63 - 1 (versions, fences, tokens); else
    raise InvalidArgumentError naming ``argument``. ``bool`` and floats are refused."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise _refuse(argument, f"must be an int, not {type(value).__name__}", _VERSION_RULE)
    if not 0 <= value <= MAX_VERSION_NUMBER:
        raise _refuse(argument, f"{value} is out of range", _VERSION_RULE)
    return value


def check_write_guards(
    expected_version: object = None, fence: object = None, *, version_required: bool = False
) -> None:
    """Check a write's ``expected_version`` and ``fence`` (either may be None unless
    ``version_required``) before anything is sent."""
    if expected_version is not None or version_required:
        check_version_number(expected_version, "expected_version")
    if fence is not None:
        check_version_number(fence, "fence")


def session_in_use(session_id: str, runs: int) -> StateInUseError:
    """delete_session without ``cascade`` on a session that still has ``runs`` runs."""
    return StateInUseError(
        f"session {session_id!r} still has {runs} run(s); delete them first or pass cascade=True"
    )


def session_still_growing(session_id: str) -> StatePersistenceError:
    """delete_session(cascade=True) gave up: runs kept being added while it deleted them."""
    return StatePersistenceError(
        f"runs kept being added to session {session_id!r} while deleting it; try again",
        reason="contended",
    )
