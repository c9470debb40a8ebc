"""What a failed first connection means: a setting to fix, or a server to wait for; no I/O."""

from __future__ import annotations

from runyard.errors import ConfigurationError, RunyardError
from runyard.postgres.errors import Kind, scrub, unavailable

__all__ = ["connect_refusal"]

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
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    reason = scrub(lines[0] if lines else type(exc).__name__, secret)
    if any(marker in reason for marker in _SETTING_WRONG):
        return ConfigurationError(
            f"PostgreSQL refused the connection: {reason}; fix settings.dsn (not retried)"
        )
    return unavailable(kind, f"could not connect to PostgreSQL: {reason}")
