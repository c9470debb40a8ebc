"""Counting round trips (writes to the socket) of a redis-py client, both flavours.

A pipeline packs all its commands into one ``send_packed_command``, so the number of those
calls is the number of round trips, whatever MONITOR shows as separate commands.
"""

from __future__ import annotations

from collections.abc import Iterable

import redis
import redis.asyncio
from redis.asyncio.connection import Connection as _AsyncConnection
from redis.asyncio.retry import Retry as _AsyncRetry
from redis.backoff import NoBackoff
from redis.connection import Connection as _Connection
from redis.retry import Retry

__all__ = ["AsyncCountingConnection", "CountingConnection", "RoundTrips"]


class RoundTrips:
    """A shared tally of the packed commands counting connections sent."""

    sent = 0

    @classmethod
    def reset(cls) -> None:
        """Start counting from zero."""
        cls.sent = 0


class AsyncCountingConnection(_AsyncConnection):
    """An asyncio connection that counts each packed send in RoundTrips."""

    async def send_packed_command(
        self, command: bytes | str | Iterable[bytes], check_health: bool = True
    ) -> None:
        RoundTrips.sent += 1
        await super().send_packed_command(command, check_health)

    @classmethod
    def client(cls, port: int) -> redis.asyncio.Redis:
        """An asyncio client on 127.0.0.1:``port`` whose connections count (retries off)."""
        pool = redis.asyncio.ConnectionPool(
            port=port, connection_class=cls, retry=_AsyncRetry(NoBackoff(), 0)
        )
        return redis.asyncio.Redis(connection_pool=pool, retry=_AsyncRetry(NoBackoff(), 0))


class CountingConnection(_Connection):
    """A blocking connection that counts each packed send in RoundTrips."""

    def send_packed_command(
        self, command: bytes | str | Iterable[bytes], check_health: bool = True
    ) -> None:
        RoundTrips.sent += 1
        super().send_packed_command(command, check_health)  # type: ignore[no-untyped-call]

    @classmethod
    def client(cls, port: int) -> redis.Redis:
        """A blocking client on 127.0.0.1:``port`` whose connections count (retries off)."""
        pool = redis.ConnectionPool(port=port, connection_class=cls, retry=Retry(NoBackoff(), 0))
        return redis.Redis(connection_pool=pool, retry=Retry(NoBackoff(), 0))
