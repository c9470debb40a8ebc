"""The wake channel of a work table: idle workers LISTEN on it; enqueue notifies it."""

from __future__ import annotations

from typing import Any

from psycopg.conninfo import make_conninfo

from runyard.errors import ConfigurationError
from runyard.postgres.schema import StateTables

__all__ = ["listen_dsn", "wake_channel"]

# Keywords psycopg's connect() takes as the connection's own settings, not as conninfo.
_CONNECTION_SETTINGS = frozenset(
    {"autocommit", "prepare_threshold", "context", "row_factory", "cursor_factory"}
)


def listen_dsn(secret: str | None, source: Any) -> str | None:
    """Where a queue's wake-up connects: the DSN the queue was opened with (``secret``), else
    its pool's conninfo with the pool's connection keywords (dbname, password, ...; those
    psycopg takes as the connection's own settings are not conninfo); None for any other
    source (a connection, an executor) or a pool whose conninfo or keywords are functions.
    Raises psycopg.ProgrammingError for keywords that make no conninfo."""
    if secret is not None:
        return secret
    conninfo, keywords = getattr(source, "conninfo", None), getattr(source, "kwargs", None)
    if not isinstance(conninfo, str) or not isinstance(keywords, dict | None):
        return None
    settings = {
        key: value
        for key, value in (keywords or {}).items()
        if key not in _CONNECTION_SETTINGS and value is not None
    }
    return make_conninfo(conninfo, **settings)


def wake_channel(tables: StateTables) -> str:
    """``<work table>_wake``, prefixed by ``<schema>.`` when the tables name a schema.

    Raises ConfigurationError past PostgreSQL's 63-byte limit on channel names.
    """
    name = f"{tables.work}_wake"
    if tables.schema is not None:
        name = f"{tables.schema}.{name}"
    if len(name.encode()) > 63:
        raise ConfigurationError(
            f"wake channel {name!r} is longer than PostgreSQL's 63 bytes: "
            "use a shorter schema or work table name"
        )
    return name
