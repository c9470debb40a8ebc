"""The wake channel of a work table: idle workers LISTEN on it; enqueue notifies it."""

from __future__ import annotations

from runyard.errors import ConfigurationError
from runyard.postgres.schema import StateTables

__all__ = ["wake_channel"]


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
