"""Driver errors to runyard errors, decided once for both PostgreSQL twins (SQLSTATE first)."""

from __future__ import annotations

from typing import Literal

import psycopg
import psycopg_pool

from runyard.errors import (
    ConfigurationError,
    PersistenceReason,
    PoolExhaustedError,
    QueueUnavailableError,
    RunyardError,
    StatePersistenceError,
    StoreOutcomeUnknown,
)

__all__ = [
    "FIX_SCHEMA",
    "Kind",
    "NotSent",
    "first_line",
    "map_error",
    "scrub",
    "unavailable",
    "verify_refusal",
]

Kind = Literal["state", "queue", "executions"]

FIX_SCHEMA = (
    "apply runyard.postgres.EXPECTED_SCHEMA with your migration tool (see docs/postgres.md)"
)

_CONTENDED = {"40001", "40P01"}  # serialization failure, deadlock detected
_TOO_MANY_CONNECTIONS = {"53300"}
_MISSING = {"42P01": "table", "42703": "column", "42883": "function", "3F000": "schema"}
_STATEMENT_TIMEOUT = {"57014"}
# The server reported the statement failed as it shut the session down: nothing was applied.
_SERVER_GOING_AWAY = {"57P01", "57P02", "57P03"}
# The server refused the statement for a passing shortage: out of disk, memory or shared memory,
# or a lock it could not take at once (lock_timeout, NOWAIT). The statement was rolled back.
_RESOURCES = {"53000", "53100", "53200"}
_LOCK_NOT_AVAILABLE = {"55P03"}
_INSUFFICIENT_PRIVILEGE = {"42501"}
# Class 08 (connection exception) where the connection was never made: nothing was sent.
_NEVER_CONNECTED = {"08001", "08004"}


class NotSent(Exception):
    """Raised by an executor when it could not get a connection: the statement never left."""


def verify_refusal(
    table: str,
    kind: str,
    found: int | None,
    expected: int,
    invalid: list[str],
    timeout: object,
) -> ConfigurationError | None:
    """What verify() refuses once its tables exist, in order (None: nothing): no row in the
    schema table ``table`` for component ``kind``, a schema version ``found`` other than
    ``expected``, an INVALID runyard index (the first of ``invalid``), a connection whose
    ``statement_timeout`` is 0."""
    if found is None:
        return ConfigurationError(f"{table} has no row for component {kind!r}: {FIX_SCHEMA}")
    if found != expected:
        return ConfigurationError(
            f"{table} says component {kind!r} is at schema version {found}, but this "
            f"runyard was written for version {expected}: migrate the schema "
            "(runyard.postgres.EXPECTED_SCHEMA, see docs/postgres.md) or install the matching "
            "runyard"
        )
    if invalid:
        return ConfigurationError(
            f"index {invalid[0]} is INVALID (a CREATE INDEX CONCURRENTLY or REINDEX "
            "CONCURRENTLY that failed, or is still running): the planner ignores it, so the "
            "statements it serves would read whole tables; wait for a running build to end, "
            "or remove what made it fail and rebuild it with REINDEX INDEX CONCURRENTLY "
            f"{invalid[0]} (see docs/postgres.md)"
        )
    if str(timeout).strip() in ("0", "0ms", "0s"):
        return ConfigurationError(
            "statement_timeout is 0 (no limit) on this connection: a stuck statement would "
            "hold its locks forever; set one, e.g. options='-c statement_timeout=5s' in the "
            "DSN or ALTER ROLE ... SET statement_timeout = '5s'"
        )
    return None


def scrub(message: str, secret: str | None) -> str:
    """Return ``message`` with ``secret`` (a DSN or password) masked."""
    if secret:
        message = message.replace(secret, "**********")
    return message


def unavailable(kind: Kind, message: str) -> RunyardError:
    """The retryable error a store of ``kind`` raises when PostgreSQL cannot be reached."""
    if kind == "queue":
        return QueueUnavailableError(message)
    return StatePersistenceError(message, reason="unavailable")


def _passing(kind: Kind, message: str, reason: PersistenceReason) -> RunyardError:
    """A retryable error that passes (contention, a timeout): for a queue call the queue's
    error, as every backend's queue raises (QueueUnavailableError); else
    StatePersistenceError with ``reason``."""
    if kind == "queue":
        return QueueUnavailableError(message)
    return StatePersistenceError(message, reason=reason)


def first_line(exc: BaseException) -> str:
    """The first non-blank line of ``exc``'s message (libpq's reason), or its type's name."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def map_error(
    exc: BaseException, *, kind: Kind, idempotent: bool, secret: str | None = None
) -> RunyardError | None:
    """Return the runyard error for a driver error, or None when it is not a database error.

    - 40001/40P01 -> StatePersistenceError(reason="contended"), retryable (for a queue
      call, as the other retryable ones below: QueueUnavailableError);
    - 53300 and psycopg_pool.PoolTimeout -> PoolExhaustedError;
    - 42P01/42703 (and a missing function or schema) -> ConfigurationError naming the object;
    - 57014 (statement timeout) -> StatePersistenceError(reason="unavailable"), retryable;
    - 53000/53100/53200 (out of resources, disk full, out of memory) -> unavailable, retryable;
    - 55P03 (lock not available: lock_timeout, NOWAIT) -> contended, retryable;
    - 42501 (insufficient privilege) -> ConfigurationError naming the object;
    - no connection (08001/08004, NotSent), or the server shutting the session down (57P01,
      57P02, 57P03) -> unavailable, retryable;
    - the connection lost while a statement was in flight (any other class 08 SQLSTATE, as
      asyncpg reports it, or a driver error without one, as psycopg reports it) ->
      StoreOutcomeUnknown, unless the statement is ``idempotent`` (then unavailable: running
      it again is safe);
    - data the server refuses (class 22, 23, 54) -> StatePersistenceError(reason="invalid");
    - any other SQLSTATE -> StatePersistenceError(reason="invalid"), permanent.
    """
    if isinstance(exc, RunyardError):
        return exc
    if isinstance(exc, psycopg_pool.PoolTimeout):
        return PoolExhaustedError(
            "every connection of the pool is in use (psycopg_pool.PoolTimeout): "
            "raise max_size or lower concurrency"
        )
    if isinstance(exc, NotSent):
        cause = exc.__cause__ or exc
        return unavailable(kind, scrub(f"no connection to PostgreSQL: {first_line(cause)}", secret))
    message = scrub(first_line(exc), secret)
    sqlstate = getattr(exc, "sqlstate", None)
    if isinstance(sqlstate, str):
        if sqlstate in _CONTENDED:
            return _passing(kind, f"contended, try again: {message}", "contended")
        if sqlstate in _TOO_MANY_CONNECTIONS:
            return PoolExhaustedError(f"the server refuses more connections: {message}")
        if sqlstate in _MISSING:
            return ConfigurationError(f"{message}: {FIX_SCHEMA}")
        if sqlstate in _STATEMENT_TIMEOUT:
            return _passing(
                kind,
                f"the statement timed out (statement_timeout) and was rolled back: {message}",
                "unavailable",
            )
        if sqlstate in _RESOURCES:
            return unavailable(kind, f"PostgreSQL is short of resources, try again: {message}")
        if sqlstate in _LOCK_NOT_AVAILABLE:
            return _passing(kind, f"a lock was not available, try again: {message}", "contended")
        if sqlstate in _INSUFFICIENT_PRIVILEGE:
            return ConfigurationError(
                f"{message}: grant the role runyard connects as SELECT, INSERT, UPDATE and DELETE "
                f"on runyard's tables and USAGE on its sequences and schema (see docs/postgres.md)"
            )
        if sqlstate in _NEVER_CONNECTED:
            return unavailable(kind, f"no connection to PostgreSQL: {message}")
        if sqlstate in _SERVER_GOING_AWAY:
            return unavailable(kind, f"PostgreSQL closed the session: {message}")
        if sqlstate.startswith("08"):
            return _lost(kind, idempotent, message)
        if sqlstate[:2] in ("22", "23", "54"):
            return StatePersistenceError(
                f"PostgreSQL refused the value: {message}", reason="invalid"
            )
        return StatePersistenceError(f"PostgreSQL error {sqlstate}: {message}", reason="invalid")
    if isinstance(exc, (psycopg.OperationalError, ConnectionError, OSError)):
        return _lost(kind, idempotent, message)
    return None


def _lost(kind: Kind, idempotent: bool, message: str) -> RunyardError:
    """The connection went away with a statement in flight: was it applied? Unknown."""
    if idempotent:
        return unavailable(kind, f"connection to PostgreSQL lost: {message}")
    return StoreOutcomeUnknown(
        f"connection to PostgreSQL lost before the reply to a write: it may or may not have "
        f"been applied ({message})"
    )
