"""AsyncRedisUpdates: live updates over Redis pub/sub (sharded pub/sub on a cluster).

The writing script publishes the run's new seq on the run's channel, in the tenant's slot.
Each follower holds its own subscription; a broken connection is reported as ``lost`` and
the follower polls from then on.
"""

from __future__ import annotations

from typing import Any

from runyard.keys import validate_identifier
from runyard.models import RunKey
from runyard.redis.events import EventKeys
from runyard.redis.flavours import AsyncRedisClient, AsyncRedisCluster, RedisError
from runyard.redis.keys import validate_namespace

__all__ = ["AsyncRedisSubscription", "AsyncRedisUpdates"]


class AsyncRedisSubscription:
    """One follower's subscription to one run's channel."""

    def __init__(self, pubsub: Any, sharded: bool) -> None:
        self._pubsub = pubsub
        self._sharded = sharded
        self.lost: str | None = None

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a hint; return whether one came (False at once
        once the connection is lost)."""
        if self.lost is not None:
            return False
        try:
            if self._sharded:
                message = await self._pubsub.get_sharded_message(
                    ignore_subscribe_messages=True, timeout=timeout
                )
            else:
                message = await self._pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=timeout
                )
        except (RedisError, OSError) as exc:
            self.lost = f"{type(exc).__name__}: {exc}"
            return False
        return message is not None

    async def aclose(self) -> None:
        """Unsubscribe and return the connection (errors of a dead connection are ignored)."""
        try:
            await self._pubsub.aclose()
        except (RedisError, OSError):
            self.lost = self.lost or "closed"


class AsyncRedisUpdates:
    """Hints for the runs of one namespace, over ``client``'s pub/sub."""

    def __init__(self, client: AsyncRedisClient, namespace: str) -> None:
        self._client = client
        self.namespace = validate_namespace(namespace)
        self.sharded = isinstance(client, AsyncRedisCluster)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(namespace={self.namespace!r}, sharded={self.sharded})"

    @property
    def publish_command(self) -> str:
        """The command the writing scripts publish with."""
        return "SPUBLISH" if self.sharded else "PUBLISH"

    async def subscribe(self, key: RunKey) -> AsyncRedisSubscription:
        """Subscribe to ``key``'s channel (a connection of its own)."""
        validate_identifier(key.tenant, "tenant")
        channel = EventKeys(self.namespace, key.tenant, key.run_id).channel
        pubsub: Any = self._client.pubsub()  # type: ignore[no-untyped-call,unused-ignore]
        if self.sharded:
            await pubsub.ssubscribe(channel)
        else:
            await pubsub.subscribe(channel)
        return AsyncRedisSubscription(pubsub, self.sharded)

    async def aclose(self) -> None:
        """Nothing of its own to release: each subscription closes its connection."""
