"""AsyncPostgresWakeup: one LISTEN connection per worker process on the work table's wake
channel; enqueue's ``pg_notify`` is delivered at its commit."""

from __future__ import annotations

from typing import Any

from psycopg import sql

from runyard.postgres.flavours import AsyncConnection
from runyard.postgres.schema import StateTables
from runyard.postgres.wake import wake_channel

__all__ = ["AsyncPostgresWakeup"]


class AsyncPostgresWakeup:
    """Hints for the queue on ``tables``: notifications on ``wake_channel(tables)``.

    Every listener is woken by every notification (a wake-up per worker process).
    """

    def __init__(self, connection: AsyncConnection[Any], channel: str) -> None:
        self._connection = connection
        self.channel = channel

    @classmethod
    async def connect(cls, dsn: str, *, tables: StateTables | None = None) -> AsyncPostgresWakeup:
        """Open an autocommit connection and LISTEN on the wake channel. Raises
        ConfigurationError for a channel name past 63 bytes, psycopg.OperationalError."""
        channel = wake_channel(tables or StateTables())
        connection = await AsyncConnection.connect(dsn, autocommit=True)
        await connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        return cls(connection, channel)

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a notification on the channel."""
        woke = False
        async for _ in self._connection.notifies(timeout=timeout, stop_after=1):
            woke = True
        return woke

    async def aclose(self) -> None:
        """Close the listening connection."""
        await self._connection.close()
