"""AsyncPostgresWakeup: one LISTEN connection per worker process on the work table's wake
channel; enqueue's ``pg_notify`` is delivered at its commit."""

from __future__ import annotations

import contextlib
import logging
import random
import time
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from typing_extensions import Self

from runyard._flavours import AsyncLock, async_sleep
from runyard.postgres.flavours import AsyncConnection
from runyard.postgres.schema import StateTables
from runyard.postgres.wake import wake_channel

__all__ = ["AsyncPostgresWakeup"]

log = logging.getLogger("runyard.worker")

RECONNECT_BASE = 0.1
RECONNECT_CAP = 5.0
CONNECT_TIMEOUT = 5
"""Seconds a (re)connect may take when the DSN sets no ``connect_timeout``: an unreachable
host fails then, not after the system's TCP timeout."""


class AsyncPostgresWakeup:
    """Hints for the queue on ``tables``: notifications on ``wake_channel(tables)``.

    Every listener is woken by every notification (a wake-up per worker process), so the
    worker reads them busy or idle: a listener that stopped reading would hold the cluster's
    notification queue. When the listening connection is lost, ``wait`` connects and LISTENs
    again (given the DSN, as ``connect`` keeps it), with jittered backoff, and reports a wake
    once live again, for the hints sent meanwhile; until then the worker's backstop polls.
    The loss is logged once at WARNING, the recovery once at INFO. A connection a reconnect
    makes after ``aclose`` is closed at once.
    """

    consumes_hints = False

    def __init__(
        self, connection: AsyncConnection[Any], channel: str, *, dsn: str | None = None
    ) -> None:
        self._connection: AsyncConnection[Any] | None = connection
        self.channel = channel
        self._dsn = dsn
        self._failures = 0
        self._retry_at = 0.0  # time.monotonic() of the next reconnect
        self._closed = False
        self._lock = AsyncLock()  # close() against a reconnect (the sync twin's threads)

    @classmethod
    async def connect(cls, dsn: str, *, tables: StateTables | None = None) -> Self:
        """Open an autocommit connection and LISTEN on the wake channel. Raises
        ConfigurationError for a channel name past 63 bytes, psycopg.OperationalError."""
        channel = wake_channel(tables or StateTables())
        return cls(await _listen(dsn, channel), channel, dsn=dsn)

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a notification on the channel; True too when
        the connection was lost and is live again (hints may have been missed meanwhile).
        False at once after ``aclose``. Without a DSN to reconnect with, a lost connection
        raises psycopg.OperationalError."""
        if self._closed:
            return False
        if self._connection is None:
            return await self._reconnect(timeout)
        woke = False
        try:
            async for _ in self._connection.notifies(timeout=timeout, stop_after=1):
                woke = True
        except psycopg.OperationalError as exc:
            if self._closed:
                return False  # closed while waiting (the worker stopping): nothing was lost
            if self._dsn is None:
                raise
            log.warning(
                "wake-up connection on %s lost (%s): polling at the worker's backstop until "
                "it is back",
                self.channel,
                exc,
                extra={"channel": self.channel},
            )
            await self._drop()
            self._back_off()
        return woke

    async def _reconnect(self, timeout: float) -> bool:
        """Once the backoff since the last failure has passed (waiting at most ``timeout``
        for it), connect and LISTEN again; whether it is live."""
        assert self._dsn is not None
        pause = self._retry_at - time.monotonic()
        if pause > 0:
            await async_sleep(min(timeout, pause))
            if self._closed or time.monotonic() < self._retry_at:
                return False
        try:
            connection = await _listen(self._dsn, self.channel)
        except psycopg.OperationalError as exc:
            self._failures += 1
            self._back_off()
            log.debug("wake-up connection on %s: reconnect failed (%s)", self.channel, exc)
            return False
        async with self._lock:
            closed = self._closed
            if not closed:
                self._connection = connection
        if closed:  # closed while connecting: nobody would close this one
            with contextlib.suppress(psycopg.Error):
                await connection.close()
            return False
        self._failures = 0
        log.info(
            "wake-up connection on %s is live again", self.channel, extra={"channel": self.channel}
        )
        return True

    def _back_off(self) -> None:
        """Set the next reconnect after a jittered backoff: 0.1 s doubling per failed one,
        at most ``RECONNECT_CAP``."""
        backoff = min(RECONNECT_CAP, RECONNECT_BASE * 2**self._failures)
        self._retry_at = time.monotonic() + backoff * random.uniform(0.5, 1.0)

    async def _drop(self, *, close: bool = False) -> None:
        async with self._lock:
            self._closed = self._closed or close
            connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(psycopg.Error):
                await connection.close()

    async def give_back(self) -> None:
        """Nothing to give back: every listener gets every notification."""

    async def aclose(self) -> None:
        """Close the listening connection; a reconnect under way closes the one it makes."""
        await self._drop(close=True)


async def _listen(dsn: str, channel: str) -> AsyncConnection[Any]:
    if "connect_timeout" not in conninfo_to_dict(dsn):
        dsn = make_conninfo(dsn, connect_timeout=CONNECT_TIMEOUT)
    connection = await AsyncConnection.connect(dsn, autocommit=True)
    try:
        await connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
    except BaseException:
        await connection.close()
        raise
    return connection
