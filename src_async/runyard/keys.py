"""Identifier validation and length-prefixed keys: no two (tenant, id) pairs build one key."""

from __future__ import annotations

import zlib

from runyard.errors import InvalidArgumentError

__all__ = [
    "MAX_IDENTIFIER_BYTES",
    "InvalidIdentifierError",
    "decode_cursor",
    "encode_cursor",
    "validate_identifier",
]

MAX_IDENTIFIER_BYTES = 256


class InvalidIdentifierError(InvalidArgumentError):
    """A tenant, run, session or item identifier is empty, too long, or not storable text."""


_IDENTIFIER_RULE = f"non-empty UTF-8 text without NUL, at most {MAX_IDENTIFIER_BYTES} bytes"


def validate_identifier(value: object, what: str = "identifier") -> str:
    """Return ``value`` if it is a usable identifier.

    Raises InvalidIdentifierError when it is not a str, is empty, holds NUL, is not encodable
    as UTF-8 (lone surrogates), or is longer than MAX_IDENTIFIER_BYTES in UTF-8.
    """
    if not isinstance(value, str):
        problem = f"must be a str, not {type(value).__name__}"
    elif not value:
        problem = "must not be empty"
    elif "\x00" in value:
        problem = "must not contain NUL"
    else:
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError:
            problem = "is not valid UTF-8 text (lone surrogate)"
        else:
            if size <= MAX_IDENTIFIER_BYTES:
                return value
            problem = f"is {size} bytes; the limit is {MAX_IDENTIFIER_BYTES} bytes of UTF-8"
    raise InvalidIdentifierError(
        f"{what} {problem} ({_IDENTIFIER_RULE})", argument=what, limit=_IDENTIFIER_RULE
    )


def encode_cursor(seq: int, scope: str | None = None) -> str:
    """Return the opaque listing cursor for a position after ``seq``; with ``scope`` (the
    tenant of a ``list_runs``) it is bound to it (a CRC-32 mark of the scope), and taken back
    for that scope only (see decode_cursor)."""
    return f"s{seq}" if scope is None else f"s{seq}.{_scope_mark(scope)}"


def _scope_mark(scope: str) -> str:
    return f"{zlib.crc32(scope.encode('utf-8')):08x}"


def _is_mark(mark: str) -> bool:
    return len(mark) == 8 and all(c in "0123456789abcdef" for c in mark)


def decode_cursor(cursor: str | None, scope: str | None = None) -> int:
    """Return the sequence a cursor stands for (0 for None).

    Raises InvalidIdentifierError for a cursor no runyard store issued, and for one bound to
    another scope than ``scope`` (a run cursor of another tenant: a seq is a position in one
    tenant's runs, and numbered differently by backend, so it stood for another position
    there). A cursor without a scope mark (as issued before marks) is taken for any scope.
    """
    if cursor is None:
        return 0
    position, _, mark = cursor.partition(".") if isinstance(cursor, str) else ("", "", "")
    digits = position[1:] if position.startswith("s") else ""
    # A seq is a bigint: past it, PostgreSQL and SQLite raised their own errors, and past
    # 4,300 digits int() did.
    if (
        not (digits.isascii() and digits.isdigit())
        or len(digits) > 19
        or int(digits) >= 2**63
        or (mark and (scope is None or not _is_mark(mark)))
        or (cursor.endswith(".") and not mark)
    ):
        raise InvalidIdentifierError(
            f"cursor {cursor!r} was not issued by a runyard store",
            argument="cursor",
            limit="a next_cursor this store returned",
        )
    if mark and scope is not None and mark != _scope_mark(scope):
        raise InvalidIdentifierError(
            f"cursor {cursor!r} was issued for another tenant's listing, not {scope!r}'s: a "
            "cursor goes on only the listing it came from",
            argument="cursor",
            limit="a next_cursor this store returned for this tenant",
        )
    return int(digits)
