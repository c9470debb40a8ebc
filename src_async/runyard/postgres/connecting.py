"""What a failed first connection means: a setting to fix, or a server to wait for; no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg

from runyard.errors import ConfigurationError, RunyardError
from runyard.postgres.errors import Kind, first_line, scrub, unavailable

__all__ = ["connect_budget", "connect_refusal", "probe_problem"]

# libpq's words (a failed connect carries no sqlstate) for the server's connection limit:
# "too many connections for role ...", "sorry, too many clients already" (53300).
_AT_THE_LIMIT = ("too many connections", "too many clients")

# libpq's words for a connection that no retry can make: the DSN or the role is wrong.
_SETTING_WRONG = (
    "does not exist",  # role, database
    "password authentication failed",
    "no password supplied",
    "no pg_hba.conf entry",
    "pg_hba.conf rejects",
    "invalid integer value",  # port=abc
    "bad value for",  # connect_timeout=abc (libpq 15)
    "invalid port number",
    "invalid connection option",
    "invalid sslmode",
    "could not translate host name",
    "permission denied",
)


def connect_refusal(exc: BaseException, *, kind: Kind, secret: str | None) -> RunyardError:
    """The runyard error for a connection that could not be made, carrying libpq's reason.

    A reason no retry can change (unknown role or database, failed authentication, a
    malformed DSN, an unknown host) is a ConfigurationError; anything else (a refused or
    timed-out connection: the server may be starting) is the store's retryable unavailable
    error. The DSN never appears in the message.
    """
    reason = scrub(first_line(exc), secret)
    if any(marker in reason for marker in _SETTING_WRONG):
        return ConfigurationError(
            f"PostgreSQL refused the connection: {reason}; fix settings.dsn (not retried)"
        )
    return unavailable(kind, f"could not connect to PostgreSQL: {reason}")


def connect_budget(conninfo: Mapping[str, Any], seconds: float) -> dict[str, Any]:
    """The ``connect_timeout`` keyword for a connection made to try ``conninfo`` (its
    parameters): ``seconds`` (at least 1, whole), unless the conninfo sets its own, which the
    keyword would override (hiding a bad value there, connect_timeout=abc, that then failed
    only the pool's connections)."""
    if "connect_timeout" in conninfo:
        return {}
    return {"connect_timeout": max(1, round(seconds))}


def probe_problem(exc: BaseException) -> str | None:
    """What a failed try of a pool's conninfo says about the pool, after a PoolTimeout: None
    when the server refused one more connection (53300: the pool is full at the server's
    limit), else why none can be made: libpq's first line, or for a conninfo libpq cannot
    parse a sentence that hides it (libpq quotes it, password included)."""
    if isinstance(exc, psycopg.ProgrammingError):
        return "its conninfo is not valid (details hidden: they could show the password)"
    text = str(exc)
    if getattr(exc, "sqlstate", None) == "53300" or any(w in text for w in _AT_THE_LIMIT):
        return None
    return first_line(exc)
