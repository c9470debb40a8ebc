"""Mapping ``sqlite3`` errors to runyard's (no I/O)."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Literal

from runyard.errors import (
    ConfigurationError,
    QueueUnavailableError,
    RunyardError,
    StatePersistenceError,
)

if TYPE_CHECKING:
    from runyard.sqlite.schema import SqliteTables

__all__ = ["LOOP_ENDED_MESSAGE", "Kind", "StoreClosed", "closed_error", "map_error", "open_error"]

Kind = Literal["state", "queue", "executions"]


class StoreClosed(Exception):
    """Raised by a connection after its ``close()``: nothing was sent. ``loop_ended``: the
    async connection was closed by the shutdown of the event loop that opened it."""

    def __init__(self, message: str = "the connection is closed", *, loop_ended: bool = False):
        super().__init__(message)
        self.loop_ended = loop_ended


# An async store is closed with the event loop that opened it (runyard.sqlite.flavours).
LOOP_ENDED_MESSAGE = (
    "the async SQLite store's connection was closed when the event loop that opened it shut "
    "down (asyncio.run returned): open the store on the event loop that uses it"
)


def closed_error(kind: Kind, *, loop_ended: bool = False) -> RunyardError:
    """The error a call on a closed store raises, whichever twin and component: the one the
    PostgreSQL stores raise with no connection to send on (``unavailable``):
    QueueUnavailableError for a queue, else StatePersistenceError(reason="unavailable").
    ``loop_ended``: the event loop that opened an async store shut down and closed it, which
    no retry undoes: ConfigurationError."""
    if loop_ended:
        return ConfigurationError(LOOP_ENDED_MESSAGE)
    message = (
        "the SQLite store is closed (close() or aclose() closed its connection): "
        "open the store again"
    )
    if kind == "queue":
        return QueueUnavailableError(message)
    return StatePersistenceError(message, reason="unavailable")


def map_error(
    exc: BaseException,
    kind: Kind,
    busy_timeout_seconds: float,
    *,
    tables: SqliteTables | None = None,
    where: str = "the database",
) -> RunyardError | None:
    """Return the runyard error for a driver error, or None when it is not a driver error.

    A call on a closed connection (StoreClosed, or sqlite3's "closed database") is
    ``closed_error``; a write lock not obtained within the busy timeout is retryable
    ("contended" for state and executions, QueueUnavailableError for a queue); a missing table
    or column (the schema gone from under a running store) is a ConfigurationError naming the
    repair (the schema for the store's ``tables``, in the file ``where``); a full disk or an
    I/O error is "unavailable"; anything else the driver raises is not retryable ("invalid").
    """
    if isinstance(exc, StoreClosed):
        return closed_error(kind, loop_ended=exc.loop_ended)
    if not isinstance(exc, sqlite3.Error):
        return None
    text = str(exc)
    if isinstance(exc, sqlite3.ProgrammingError) and "closed database" in text:
        return closed_error(kind)  # the sqlite3 connection closed by someone else
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        message = (
            f"the SQLite write lock was not obtained within {busy_timeout_seconds} s "
            f"(busy_timeout_seconds): another writer holds it; try again ({text})"
        )
        if kind == "queue":
            return QueueUnavailableError(message)
        return StatePersistenceError(message, reason="contended")
    if isinstance(exc, sqlite3.OperationalError) and text.startswith(
        ("no such table", "no such column")
    ):
        # The schema went away under a running store (dropped, or another file swapped in):
        # a configuration error, as PostgreSQL's missing relation is.
        from runyard.sqlite.schema import missing_schema_message

        return ConfigurationError(missing_schema_message(text, where, tables))
    if isinstance(exc, sqlite3.OperationalError) and "readonly database" in text:
        # The file (or its directory, or the URI's mode=ro/immutable=1) cannot be written:
        # no retry changes that.
        return ConfigurationError(
            f"the SQLite database {where} cannot be written ({text}): make the file and its "
            "directory writable by this process (and drop mode=ro from a URI); "
            "runyard writes on every claim and settle"
        )
    if isinstance(exc, sqlite3.OperationalError) and ("disk" in text or "I/O" in text):
        if kind == "queue":
            return QueueUnavailableError(f"SQLite could not write: {text}")
        return StatePersistenceError(f"SQLite could not write: {text}", reason="unavailable")
    return StatePersistenceError(f"SQLite refused the statement: {text}", reason="invalid")


def open_error(
    exc: sqlite3.Error, path: str, busy_timeout_seconds: float, kind: Kind = "state"
) -> RunyardError:
    """The runyard error for a driver error while opening the database at ``path`` for a
    ``kind`` store (connecting, reading its catalog, creating the schema): a lock or an I/O
    error may pass (retryable, ``kind``'s class, as ``map_error`` says: QueueUnavailableError
    for a queue); anything else, a file that cannot be opened or is not a database, is a
    ConfigurationError naming the file and the repair."""
    mapped = map_error(exc, kind, busy_timeout_seconds)
    if mapped is not None and mapped.retryable:
        return mapped
    return ConfigurationError(
        f"cannot open the SQLite database {path!r}: {exc}; give a path whose directory exists "
        "and is writable, to a runyard database or a new file"
    )
