"""JSON encoding shared by every backend: strict, so every backend accepts the same values."""

from __future__ import annotations

import json
import re
from itertools import accumulate
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
# An escaped character of a JSON string (taken out first, so every quote left is a string's).
_ESCAPED = re.compile(r"\\.", re.DOTALL)
# Each bracket's step in depth; everything but brackets is taken out before stepping.
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def _depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON ``text``, in time linear in its length
    (C loops only: a regex over its escapes, a split on quotes, ``bytes.translate`` and an
    ``accumulate`` over the brackets left)."""
    if "\\" in text:
        text = _ESCAPED.sub("", text)
    outside = "".join(text.split('"')[::2])  # every other piece is a string's inside
    brackets = outside.encode("utf-8", "surrogatepass").translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def dump_json(
    value: Any, *, max_bytes: int | None = None, what: str = "value", envelope: int = 0
) -> str:
    """Encode ``value`` as compact JSON text.

    Raises StatePersistenceError(reason="invalid") for values PostgreSQL's jsonb refuses
    (NaN, Infinity, NUL characters, lone surrogates), nested deeper than MAX_JSON_DEPTH (plus
    ``envelope``: the levels a store's own wrapper puts around the user's value), or that JSON
    cannot encode, and StatePersistenceError(reason="too_large") past ``max_bytes`` (checked
    first); neither is retryable.
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
    limit = MAX_JSON_DEPTH + envelope
    if text.count("[") + text.count("{") > limit and (depth := _depth(text)) > limit:
        raise StatePersistenceError(
            f"{what} is nested {depth - envelope} levels deep: the limit is {MAX_JSON_DEPTH} "
            "levels of arrays and objects",
            reason="invalid",
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
