"""JSON encoding shared by every backend: strict, so every backend accepts the same values."""

from __future__ import annotations

import json
import re
from typing import Any

from runyard.errors import StatePersistenceError

__all__ = ["MAX_JSON_DEPTH", "copy_json", "dump_json", "fresh_json", "load_json"]

# The deepest nesting of arrays and objects a stored value may have, on every backend (deeper
# values raised RecursionError, or were refused by one backend and stored by another).
MAX_JSON_DEPTH = 512

# An escaped NUL that is not itself an escaped backslash followed by "u0000".
_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
# One encoder for every call: json.dumps with options builds a new JSONEncoder each time.
_ENCODER = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":"))
# Text goes straight to the decoder: json.loads first checks the type and for a byte order mark,
# which text written by dump_json never starts with (it would fail to decode either way).
_DECODE = json.JSONDecoder().decode
# A JSON string in encoded text (its brackets are no nesting).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')  # unrolled: 4x the speed of (?:a|b)*
# Brackets as parentheses (which JSON has only inside strings), and all else to take out.
_PARENS = str.maketrans("[{]}", "(())")
_NOT_BRACKET = re.compile(r"[^()]+")


def _depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON ``text`` (up to MAX_JSON_DEPTH + 1).

    Each pass of ``str.replace`` takes away the innermost pairs of the text's brackets (its
    strings taken out first), so the passes count the depth at C speed: a list of thousands of
    small objects costs a few passes, not a Python loop over its characters."""
    shape = _NOT_BRACKET.sub("", _STRING.sub("", text).translate(_PARENS))
    depth = 0
    while shape and depth <= MAX_JSON_DEPTH:
        shape = shape.replace("()", "")
        depth += 1
    return depth


def dump_json(value: Any, *, max_bytes: int | None = None, what: str = "value") -> str:
    """Encode ``value`` as compact JSON text.

    Raises StatePersistenceError(reason="invalid") for values PostgreSQL's jsonb refuses
    (NaN, Infinity, NUL characters, lone surrogates), nested deeper than MAX_JSON_DEPTH, or
    that JSON cannot encode, and
    StatePersistenceError(reason="too_large") past ``max_bytes``; neither is retryable.
    """
    try:
        text = _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise StatePersistenceError(
            f"{what} is not storable JSON: {exc}", reason="invalid"
        ) from None
    except RecursionError:
        raise StatePersistenceError(
            f"{what} is nested too deeply: the limit is {MAX_JSON_DEPTH} levels of arrays and "
            "objects",
            reason="invalid",
        ) from None
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and _depth(text) > MAX_JSON_DEPTH:
        raise StatePersistenceError(
            f"{what} is nested more than {MAX_JSON_DEPTH} levels deep: the limit is "
            f"{MAX_JSON_DEPTH} levels of arrays and objects",
            reason="invalid",
        )
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


def fresh_json(value: Any) -> Any:
    """A copy of ``value``, a value dump_json accepted, through its JSON text (unchecked;
    unlike copy.deepcopy, it copies any nesting dump_json lets through)."""
    return _DECODE(_ENCODER.encode(value))
