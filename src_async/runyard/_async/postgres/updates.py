"""AsyncPostgresUpdates: live updates over LISTEN/NOTIFY, one listening connection per instance.

The writing statements call ``pg_notify`` on the events table's name with ``[tenant, run_id,
seq]``; PostgreSQL delivers it at commit. One connection LISTENs for the whole process (per
instance); a waiting follower reads what arrived and wakes the followers it concerns. When that
connection breaks, every subscription reports ``lost`` and its follower polls from then on; the
next ``subscribe`` opens a new connection.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from runyard._flavours import AsyncEvent, AsyncLock
from runyard.errors import ConfigurationError
from runyard.models import RunKey
from runyard.postgres.events import decode_hint
from runyard.postgres.flavours import AsyncConnection, AsyncConnectionPool
from runyard.postgres.schema import StateTables

__all__ = ["AsyncPostgresSubscription", "AsyncPostgresUpdates", "own_updates"]


class AsyncPostgresSubscription:
    """One follower's interest in one run, fed by its updates instance's connection."""

    def __init__(self, hub: AsyncPostgresUpdates, key: RunKey) -> None:
        self._hub, self._key = hub, key
        self.event = AsyncEvent()
        self.lost: str | None = None

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a hint; return whether one came (False at once
        once the listening connection is lost)."""
        if self.lost is None and not self.event.is_set():
            await self._hub.pump(self, timeout)
        woke = self.event.is_set()
        # Cleared before the follower reads the log: a hint sent after this is not lost.
        self.event.clear()
        return woke and self.lost is None

    async def aclose(self) -> None:
        """Stop listening."""
        self._hub.unsubscribe(self)


class AsyncPostgresUpdates:
    """Hints for the runs stored in ``tables``, read from one LISTEN connection.

    ``connect`` opens that connection (autocommit); ``from_conninfo`` builds one from a DSN.
    """

    def __init__(self, connect: Callable[[], Any], tables: StateTables | None = None) -> None:
        self._connect = connect
        self.channel = (tables or StateTables()).events
        self._connection: AsyncConnection[Any] | None = None
        self._subscribers: dict[tuple[str, str], set[AsyncPostgresSubscription]] = {}
        # Held only around dictionary updates (never across a suspension point): in the sync
        # twin, followers are threads.
        self._guard = threading.Lock()
        # One reader of the connection at a time; the others find their flag set after it.
        self._reading = AsyncLock()

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
        return self._connection.info.backend_pid if self._connection is not None else None

    async def subscribe(self, key: RunKey) -> AsyncPostgresSubscription:
        """Start listening for hints about ``key``'s log (opening the connection if needed)."""
        async with self._reading:
            if self._connection is None:
                connection = await self._connect()
                await connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                self._connection = connection
        subscription = AsyncPostgresSubscription(self, key)
        with self._guard:
            self._subscribers.setdefault((key.tenant, key.run_id), set()).add(subscription)
        return subscription

    def unsubscribe(self, subscription: AsyncPostgresSubscription) -> None:
        """Forget ``subscription``."""
        name = (subscription._key.tenant, subscription._key.run_id)
        with self._guard:
            subscribers = self._subscribers.get(name)
            if subscribers is not None:
                subscribers.discard(subscription)
                if not subscribers:
                    del self._subscribers[name]

    async def pump(self, waiter: AsyncPostgresSubscription, timeout: float) -> None:
        """Read hints for up to ``timeout`` seconds, or until one wakes ``waiter``, and wake
        the subscriptions they concern."""
        async with self._reading:
            connection = self._connection
            if waiter.event.is_set() or waiter.lost is not None or connection is None:
                return
            try:
                async for notify in connection.notifies(timeout=timeout, stop_after=1):
                    self._dispatch(notify.payload)
            except psycopg.Error as exc:
                self._lose(f"{type(exc).__name__}: {exc}")
                await connection.close()

    def _dispatch(self, payload: str) -> None:
        try:
            hint = decode_hint(payload)
        except (ValueError, TypeError):
            return  # not a runyard payload (someone else's NOTIFY on this channel): no hint
        with self._guard:
            woken = list(self._subscribers.get(hint, ()))
        for subscription in woken:
            subscription.event.set()

    def _lose(self, reason: str) -> None:
        # The broken connection is dropped; the next subscribe opens another.
        self._connection = None
        with self._guard:
            everyone = [s for subscribers in self._subscribers.values() for s in subscribers]
        for subscription in everyone:
            subscription.lost = reason
            subscription.event.set()

    async def aclose(self) -> None:
        """Close the listening connection."""
        async with self._reading:
            connection, self._connection = self._connection, None
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
