"""The redis-py driver classes as flavour pairs: the async source names the ``Async`` member.

``AsyncRedisClient`` becomes ``RedisClient`` in the generated sync twin, the way
``AsyncLock`` becomes ``Lock`` (see runyard/_flavours.py). Importing this module needs redis-py.
"""

from __future__ import annotations

from typing import Any

from redis import BlockingConnectionPool, ConnectionPool, Redis
from redis.asyncio import BlockingConnectionPool as AsyncBlockingConnectionPool
from redis.asyncio import ConnectionPool as AsyncConnectionPool
from redis.asyncio import Redis as AsyncRedis
from redis.asyncio.client import PubSub as AsyncPubSub
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.client import PubSub
from redis.cluster import RedisCluster
from redis.exceptions import (
    AuthenticationError,
    AuthenticationWrongNumberOfArgsError,
    AuthorizationError,
    BusyLoadingError,
    ClusterDownError,
    MaxConnectionsError,
    NoPermissionError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

__all__ = [
    "AsyncBlockingConnectionPool",
    "AsyncClientStartup",
    "AsyncConnectionPool",
    "AsyncDedicatedPubSub",
    "AsyncRedis",
    "AsyncRedisClient",
    "AsyncRedisCluster",
    "AsyncRetry",
    "AuthenticationError",
    "AuthenticationWrongNumberOfArgsError",
    "AuthorizationError",
    "BlockingConnectionPool",
    "BusyLoadingError",
    "ClientStartup",
    "ClusterDownError",
    "ConnectionPool",
    "DedicatedPubSub",
    "MaxConnectionsError",
    "NoBackoff",
    "NoPermissionError",
    "NoScriptError",
    "OutOfMemoryError",
    "ReadOnlyError",
    "Redis",
    "RedisClient",
    "RedisCluster",
    "RedisClusterException",
    "RedisConnectionError",
    "RedisError",
    "RedisTimeoutError",
    "ResponseError",
    "Retry",
    "TryAgainError",
    "client_kwargs",
]

AsyncRedisClient = AsyncRedis | AsyncRedisCluster
RedisClient = Redis | RedisCluster


def client_kwargs(socket_timeout: float, max_connections: int) -> dict[str, Any]:
    """Keyword arguments for ``from_url`` of any client class (add the flavour's ``retry``)."""
    return {
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": socket_timeout,
        "max_connections": max_connections,
    }


class AsyncClientStartup:
    """Readies an asyncio client before its first command.

    An asyncio RedisCluster discovers its nodes on first use, and concurrent first commands
    race inside redis-py (AttributeError, ConnectionError); discovering them once, under
    redis-py's own lock, avoids that.
    """

    @staticmethod
    async def ready(client: AsyncRedisClient) -> None:
        """Discover the cluster's nodes now (nothing to do for a single server)."""
        if isinstance(client, AsyncRedisCluster):
            await client.initialize()


class ClientStartup:
    """Readies a blocking client before its first command (the sync member of the pair)."""

    @staticmethod
    def ready(client: RedisClient) -> None:
        """Nothing to do: a blocking RedisCluster discovers its nodes when it is built."""


class AsyncDedicatedPubSub:
    """A pub/sub connection of its own (never one of the client's pool) to the server that
    serves a channel: the client's server, or on a cluster the primary of the channel's slot."""

    def __init__(self, client: AsyncRedisClient, channel: str) -> None:
        source: Any = client.connection_pool if isinstance(client, AsyncRedis) else None
        self.node = ""
        if isinstance(client, AsyncRedisCluster):
            source = client.nodes_manager.get_node_from_slot(client.keyslot(channel))
            self.node = source.name
        self._pool: Any = AsyncConnectionPool(
            connection_class=source.connection_class, max_connections=1, **source.connection_kwargs
        )
        self.pubsub: Any = AsyncPubSub(self._pool)

    @staticmethod
    def node_of(client: AsyncRedisClient, channel: str) -> str:
        """The name of the cluster node that serves ``channel`` ("" for a single server)."""
        if isinstance(client, AsyncRedisCluster):
            return str(client.nodes_manager.get_node_from_slot(client.keyslot(channel)).name)
        return ""

    async def aclose(self) -> None:
        """Close the connection."""
        try:
            await self.pubsub.aclose()
        finally:
            await self._pool.disconnect()


class DedicatedPubSub:
    """A pub/sub connection of its own (never one of the client's pool) to the server that
    serves a channel: the client's server, or on a cluster the primary of the channel's slot."""

    def __init__(self, client: RedisClient, channel: str) -> None:
        source: Any = client.connection_pool if isinstance(client, Redis) else None
        self.node = ""
        if isinstance(client, RedisCluster):
            slot = client.keyslot(channel)  # type: ignore[no-untyped-call]
            node = client.nodes_manager.get_node_from_slot(slot)
            source, self.node = node.redis_connection.connection_pool, node.name
        self._pool: Any = ConnectionPool(
            connection_class=source.connection_class, max_connections=1, **source.connection_kwargs
        )
        self.pubsub: Any = PubSub(self._pool)

    @staticmethod
    def node_of(client: RedisClient, channel: str) -> str:
        """The name of the cluster node that serves ``channel`` ("" for a single server)."""
        if isinstance(client, RedisCluster):
            slot = client.keyslot(channel)  # type: ignore[no-untyped-call]
            return str(client.nodes_manager.get_node_from_slot(slot).name)
        return ""

    def close(self) -> None:
        """Close the connection."""
        try:
            self.pubsub.close()
        finally:
            self._pool.disconnect()
