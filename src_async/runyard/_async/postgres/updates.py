"""AsyncPostgresUpdates: live updates over LISTEN/NOTIFY, one listening connection per instance.

The writing statements call ``pg_notify`` on the events table's name with ``[tenant, run_id,
seq]``; PostgreSQL delivers it at commit. One connection LISTENs for every follower of the
instance (one per process, when the process shares it); a reader of its own reads it and wakes
the followers each hint concerns, so a follower waits only for its own ``poll_seconds`` and a
new subscription waits for no read. When that connection breaks, every subscription reports
``lost`` and its follower polls from then on; the next ``subscribe`` opens a new connection.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from psycopg import sql

from runyard._async.hint_hub import READ_SLICE, AsyncHintHub, AsyncHubSubscription
from runyard._flavours import AsyncBackground, AsyncLock
from runyard.errors import ConfigurationError
from runyard.models import RunKey
from runyard.postgres.events import decode_hint
from runyard.postgres.flavours import AsyncConnection, AsyncConnectionPool
from runyard.postgres.schema import StateTables

__all__ = ["AsyncPostgresSubscription", "AsyncPostgresUpdates", "own_updates"]


class AsyncPostgresSubscription(AsyncHubSubscription):
    """One follower's interest in one run, fed by its updates instance's connection."""


class AsyncPostgresUpdates(AsyncHintHub):
    """Hints for the runs stored in ``tables``, read from one LISTEN connection.

    ``connect`` opens that connection (autocommit); ``from_conninfo`` builds one from a DSN.
    """

    subscription_class = AsyncPostgresSubscription

    def __init__(self, connect: Callable[[], Any], tables: StateTables | None = None) -> None:
        super().__init__()
        self._connect = connect
        self.channel = (tables or StateTables()).events
        self._connection: AsyncConnection[Any] | None = None
        self._reader: AsyncBackground | None = None
        # Held while the connection is opened (never while it is read).
        self._opening = AsyncLock()
        self._closed = False

    @classmethod
    def from_conninfo(
        cls, conninfo: str, tables: StateTables | None = None, **kwargs: Any
    ) -> AsyncPostgresUpdates:
        """Listen on connections opened from ``conninfo`` (and psycopg ``kwargs``)."""

        async def connect() -> AsyncConnection[Any]:
            return await AsyncConnection.connect(conninfo, autocommit=True, **kwargs)

        return cls(connect, tables)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(channel={self.channel!r})"

    @property
    def backend_pid(self) -> int | None:
        """The server process id of the listening connection, or None when there is none."""
        connection = self._connection
        return connection.info.backend_pid if connection is not None else None

    async def subscribe(self, key: RunKey) -> AsyncPostgresSubscription:
        """Start listening for hints about ``key``'s log (opening the connection if needed).

        Raises psycopg's error when the connection cannot be opened (follow then polls).
        """
        subscription = self._register(key)
        try:
            if self._connection is None:
                async with self._opening:
                    if self._connection is None:
                        await self._open()
        except BaseException:
            self._forget(subscription)
            raise
        assert isinstance(subscription, AsyncPostgresSubscription)
        return subscription

    async def _open(self) -> None:
        """Open and LISTEN on a connection, and start its reader."""
        connection = await self._connect()
        try:
            await connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
        except BaseException:
            await connection.close()
            raise
        self._connection, self._closed = connection, False
        self._reader = AsyncBackground(partial(self._read, connection), "runyard-listen")

    async def _read(self, connection: AsyncConnection[Any]) -> None:
        """Read ``connection``'s notifications until it breaks or the instance closes."""
        try:
            while not self._closed and self._connection is connection:
                async for notify in connection.notifies(timeout=READ_SLICE):
                    self._dispatch(notify.payload)
        except Exception as exc:  # psycopg's, or anything else: the connection is unusable
            if not self._closed:
                self._lose(f"{type(exc).__name__}: {exc}", detach=partial(self._detach, connection))
        finally:
            await connection.close()

    def _detach(self, connection: AsyncConnection[Any]) -> None:
        # The broken connection is dropped; the next subscribe opens another.
        if self._connection is connection:
            self._connection = None

    def _dispatch(self, payload: str) -> None:
        try:
            hint = decode_hint(payload)
        except (ValueError, TypeError):
            return  # not a runyard payload (someone else's NOTIFY on this channel): no hint
        self._wake(hint)

    async def aclose(self) -> None:
        """Stop the reader and close the listening connection."""
        self._closed = True
        async with self._opening:
            reader, self._reader = self._reader, None
            connection, self._connection = self._connection, None
        if reader is not None:
            await reader.stop(READ_SLICE * 8)
        if connection is not None:
            await connection.close()


def own_updates(
    live_updates: bool | AsyncPostgresUpdates | None, source: object, tables: StateTables
) -> AsyncPostgresUpdates | None:
    """The updates a state store uses: None for None/False, ``live_updates`` itself for an
    instance, and for True a new one connecting as ``source`` (a psycopg pool) does.

    Raises ConfigurationError for True on a source whose connection settings are not known.
    """
    if live_updates is True:
        conninfo = getattr(source, "conninfo", None)
        kwargs = getattr(source, "kwargs", None) or {}
        if not isinstance(source, AsyncConnectionPool) or not isinstance(conninfo, str):
            raise ConfigurationError(
                "live_updates=True needs a store built on a psycopg pool with a conninfo string "
                f"(or from_settings), not on {type(source).__name__}: pass live_updates="
                + AsyncPostgresUpdates.__name__
                + ".from_conninfo(dsn, tables) instead"
            )
        return AsyncPostgresUpdates.from_conninfo(conninfo, tables, **dict(kwargs))
    return live_updates or None
