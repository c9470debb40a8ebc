"""AsyncRedisWakeup: an idle worker blocks on its queue's wake key (BLPOP) until an enqueue
pushes a hint, or its block time passes."""

from __future__ import annotations

from runyard._async.redis.scripts import client_from_url
from runyard.redis.flavours import (
    AsyncConnectionPool,
    AsyncRedis,
    AsyncRedisClient,
    AsyncRedisCluster,
)
from runyard.redis.settings import RedisStoreSettings
from runyard.redis.wake import WAKE_LIST_MAX, wake_key

__all__ = ["AsyncRedisWakeup"]


def block_seconds_for(settings: RedisStoreSettings) -> float:
    """How long one ``BLPOP`` blocks: at most 4 s, and 1 s under the client's socket timeout
    (a block past it would read as a lost connection)."""
    return max(0.1, min(4.0, settings.socket_timeout - 1.0))


class AsyncRedisWakeup:
    """Hints for the queue of ``namespace``: ``BLPOP <wake key>``, one command per wait.

    Each hint wakes one of the workers blocked on the key (BLPOP pops it), whichever blocked
    first; a worker blocks only while it has a free slot, and a hint that a block returns
    after the worker's slots filled (by a claim of its own) is given back, pushed to the head
    of the key, so a busy worker does not keep the hint an idle one needs. ``block_seconds``
    caps one wait and must stay below the client's socket timeout.
    """

    consumes_hints = True

    def __init__(
        self,
        client: AsyncRedisClient,
        *,
        namespace: str,
        block_seconds: float = 4.0,
        owns_client: bool = False,
    ) -> None:
        self._client = client
        self.key = wake_key(namespace)
        self.block_seconds = block_seconds
        self._owns_client = owns_client

    @classmethod
    def from_url(
        cls, url: str | None = None, *, settings: RedisStoreSettings | None = None
    ) -> AsyncRedisWakeup:
        """A wake-up on a client of its own (the block needs a connection to itself)."""
        settings = settings or RedisStoreSettings()
        client = client_from_url(url, settings)
        return cls(
            client,
            namespace=settings.namespace,
            block_seconds=block_seconds_for(settings),
            owns_client=True,
        )

    @classmethod
    def beside(
        cls, client: AsyncRedisClient, settings: RedisStoreSettings
    ) -> AsyncRedisWakeup | None:
        """A wake-up for the queue on ``client``, on a client of its own made with the same
        connection settings (closed with the wake-up, which ends a wait blocked on it): a
        ``BLPOP`` holds its connection while it blocks, and on the queue's pool it took a
        connection the queue's own calls wait for (with ``max_connections=1`` a worker never
        claimed again). None for a cluster client: every key of a queue is on one node,
        whose pool the queue's calls share (capped by ``max_connections`` too); give a worker
        on Redis Cluster ``AsyncRedisWakeup.from_url(url, settings=...)``."""
        if isinstance(client, AsyncRedisCluster):
            return None
        pool = client.connection_pool
        own = AsyncRedis(
            connection_pool=AsyncConnectionPool(
                connection_class=pool.connection_class,
                max_connections=2,
                **pool.connection_kwargs,
            )
        )
        own.auto_close_connection_pool = True  # closing the client closes its connection
        block = block_seconds_for(settings)
        return cls(own, namespace=settings.namespace, block_seconds=block, owns_client=True)

    async def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds (at most ``block_seconds``) for a hint."""
        seconds = max(0.01, min(timeout, self.block_seconds))
        return await self._client.blpop([self.key], timeout=seconds) is not None

    async def give_back(self) -> None:
        """Push a hint back to the head of the wake key (the next block pops it), keeping the
        key's bound as the enqueue script does."""
        await self._client.lpush(self.key, "1")
        await self._client.ltrim(self.key, 0, WAKE_LIST_MAX - 1)

    async def aclose(self) -> None:
        """Close the client if this wake-up owns it."""
        if self._owns_client:
            await self._client.aclose()
