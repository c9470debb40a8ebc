"""JSON encoding shared by every backend: strict, so every backend accepts the same values."""

from __future__ import annotations

import json
import re
from typing import Any

from runyard.errors import StatePersistenceError

__all__ = ["copy_json", "dump_json", "load_json"]

# An escaped NUL that is not itself an escaped backslash followed by "u0000".
_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
# One encoder for every call: json.dumps with options builds a new JSONEncoder each time.
_ENCODER = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":"))
# Text goes straight to the decoder: json.loads first checks the type and for a byte order mark,
# which text written by dump_json never starts with (it would fail to decode either way).
_DECODE = json.JSONDecoder().decode


def dump_json(value: Any, *, max_bytes: int | None = None, what: str = "value") -> str:
    """Encode ``value`` as compact JSON text.

    Raises StatePersistenceError(reason="invalid") for values PostgreSQL's jsonb refuses
    (NaN, Infinity, NUL characters, lone surrogates) or that JSON cannot encode, and
    StatePersistenceError(reason="too_large") past ``max_bytes``; neither is retryable.
    """
    try:
        text = _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise StatePersistenceError(
            f"{what} is not storable JSON: {exc}", reason="invalid"
        ) from None
    if "\\u0000" in text and _NUL.search(text):
        raise StatePersistenceError(f"{what} holds a NUL character", reason="invalid")
    if text.isascii():  # one byte a character, and no surrogate to refuse
        size = len(text)
    else:
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise StatePersistenceError(
                f"{what} holds a lone surrogate", reason="invalid"
            ) from None
    if max_bytes is not None and size > max_bytes:
        raise StatePersistenceError(
            f"{what} is {size} bytes encoded; the limit is {max_bytes} (max_value_bytes)",
            reason="too_large",
        )
    return text


def load_json(text: str | bytes) -> Any:
    """Decode JSON text written by dump_json."""
    if type(text) is str:
        return _DECODE(text)
    return json.loads(text)


def copy_json(value: Any, max_bytes: int | None = None, what: str = "value") -> Any:
    """Return a fresh copy of ``value`` through its stored form, checked as dump_json checks it."""
    return load_json(dump_json(value, max_bytes=max_bytes, what=what))
