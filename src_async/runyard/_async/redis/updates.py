"""AsyncRedisUpdates: live updates over Redis pub/sub (sharded pub/sub on a cluster).

The writing script publishes the run's new seq on the run's channel, in the tenant's slot.
One pub/sub connection of the instance's own (one per cluster node that serves a followed
run), never one of the store's pool, carries every follower's channel: many followers cannot
exhaust the pool that writes use. A reader of its own reads each connection and wakes the
followers a hint concerns; a broken connection is reported as ``lost`` to the followers of
its channels, which poll from then on, and the next ``subscribe`` opens a new one.
"""

from __future__ import annotations

import contextlib
from functools import partial
from typing import Any

from runyard._async.hint_hub import READ_SLICE, AsyncHintHub, AsyncHubSubscription
from runyard._flavours import AsyncBackground, AsyncEvent, AsyncLock
from runyard.errors import ConfigurationError
from runyard.keys import validate_identifier
from runyard.models import RunKey
from runyard.redis.events import EventKeys
from runyard.redis.flavours import (
    AsyncClientStartup,
    AsyncDedicatedPubSub,
    AsyncRedisClient,
    AsyncRedisCluster,
)
from runyard.redis.keys import validate_namespace

__all__ = ["AsyncRedisSubscription", "AsyncRedisUpdates", "own_updates"]

# How long a subscribe waits for the server to confirm it (then the follower goes on: its
# polling covers a hint missed meanwhile).
CONFIRM_SECONDS = 10.0


class AsyncRedisSubscription(AsyncHubSubscription):
    """One follower's interest in one run, fed by its updates instance's connection."""


class _Listener:
    """One pub/sub connection and the channels subscribed on it."""

    def __init__(self, connection: AsyncDedicatedPubSub) -> None:
        self.connection = connection
        self.channels: dict[str, tuple[str, str]] = {}
        self.confirmed: dict[str, AsyncEvent] = {}
        self.leaving: set[str] = set()
        self.reader: AsyncBackground | None = None
        self.broken = False


class AsyncRedisUpdates(AsyncHintHub):
    """Hints for the runs of one namespace, over pub/sub connections of its own to ``client``'s
    server (or cluster nodes)."""

    subscription_class = AsyncRedisSubscription

    def __init__(self, client: AsyncRedisClient, namespace: str) -> None:
        super().__init__()
        self._client = client
        self.namespace = validate_namespace(namespace)
        self.sharded = isinstance(client, AsyncRedisCluster)
        self._listeners: dict[str, _Listener] = {}
        # Held around sending (un)subscribe commands and opening connections, never while
        # a connection is read.
        self._commands = AsyncLock()
        self._closed = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}(namespace={self.namespace!r}, sharded={self.sharded})"

    @property
    def publish_command(self) -> str:
        """The command the writing scripts publish with."""
        return "SPUBLISH" if self.sharded else "PUBLISH"

    @property
    def connections(self) -> int:
        """How many pub/sub connections the instance holds now."""
        return len(self._listeners)

    async def subscribe(self, key: RunKey) -> AsyncRedisSubscription:
        """Subscribe to ``key``'s channel on the instance's own connection (opened if needed).

        Raises redis-py's error when the connection or the command fails (follow then polls).
        """
        validate_identifier(key.tenant, "tenant")
        channel = EventKeys(self.namespace, key.tenant, key.run_id).channel
        subscription = self._register(key)
        try:
            confirmed = await self._listen(channel, (key.tenant, key.run_id))
        except BaseException:
            self._forget(subscription)
            raise
        if confirmed is not None:
            await confirmed.wait(CONFIRM_SECONDS)
        assert isinstance(subscription, AsyncRedisSubscription)
        return subscription

    async def _listen(self, channel: str, name: tuple[str, str]) -> AsyncEvent | None:
        """Subscribe to ``channel`` unless already; the flag its confirmation sets, or None."""
        async with self._commands:
            self._closed = False
            await AsyncClientStartup.ready(self._client)
            node = AsyncDedicatedPubSub.node_of(self._client, channel)
            listener = self._listeners.get(node)
            if listener is None:
                listener = _Listener(AsyncDedicatedPubSub(self._client, channel))
                self._listeners[node] = listener
            if channel in listener.channels:
                return None
            listener.leaving.discard(channel)
            listener.channels[channel] = name
            confirmed = listener.confirmed[channel] = AsyncEvent()
            pubsub = listener.connection.pubsub
            try:
                if self.sharded:
                    await pubsub.ssubscribe(channel)
                else:
                    await pubsub.subscribe(channel)
            except BaseException:
                del listener.channels[channel]
                listener.confirmed.pop(channel, None)
                raise
            if listener.reader is None:
                listener.reader = AsyncBackground(
                    partial(self._read, listener), "runyard-subscriber"
                )
            return confirmed

    async def unsubscribe(self, subscription: AsyncHubSubscription) -> None:
        """Forget ``subscription``; the run's last one also unsubscribes its channel."""
        if not self._forget(subscription):
            return
        key = subscription.key
        channel = EventKeys(self.namespace, key.tenant, key.run_id).channel
        async with self._commands:
            for listener in self._listeners.values():
                if listener.channels.pop(channel, None) is None or listener.broken:
                    continue
                listener.confirmed.pop(channel, None)
                listener.leaving.add(channel)
                # A broken connection is its reader's to report.
                with contextlib.suppress(Exception):
                    if self.sharded:
                        await listener.connection.pubsub.sunsubscribe(channel)
                    else:
                        await listener.connection.pubsub.unsubscribe(channel)

    async def _read(self, listener: _Listener) -> None:
        """Read ``listener``'s messages until its connection breaks or the instance closes."""
        pubsub = listener.connection.pubsub
        try:
            while not self._closed and not listener.broken:
                message = await pubsub.get_message(timeout=READ_SLICE)
                if message is not None:
                    self._handle(listener, message)
        except Exception as exc:  # redis-py's, or anything else: the connection is unusable
            if not self._closed:
                self._drop(listener, f"{type(exc).__name__}: {exc}")
                with contextlib.suppress(Exception):  # dropped: no one else closes it
                    await listener.connection.aclose()

    def _handle(self, listener: _Listener, message: dict[str, Any]) -> None:
        kind = message.get("type")
        channel = message.get("channel")
        if isinstance(channel, bytes):
            channel = channel.decode()
        if not isinstance(channel, str):
            return
        if kind in ("unsubscribe", "sunsubscribe") and channel in listener.leaving:
            listener.leaving.discard(channel)  # the confirmation of this instance's own
            return
        name = listener.channels.get(channel)
        if name is None:
            return
        if kind in ("message", "smessage"):
            self._wake(name)
        elif kind in ("subscribe", "ssubscribe"):
            confirmed = listener.confirmed.pop(channel, None)
            if confirmed is not None:
                confirmed.set()
        elif kind == "sunsubscribe":
            # The server ended a subscription it still holds (the slot moved): lost.
            self._lose(f"the server unsubscribed {channel!r} (its slot moved)", {name})

    def _drop(self, listener: _Listener, reason: str) -> None:
        def detach() -> None:
            listener.broken = True
            for node, held in list(self._listeners.items()):
                if held is listener:
                    del self._listeners[node]

        self._lose(reason, set(listener.channels.values()), detach=detach)
        for confirmed in list(listener.confirmed.values()):
            confirmed.set()

    async def aclose(self) -> None:
        """Stop the readers and close the pub/sub connections."""
        async with self._commands:
            self._closed = True
            listeners, self._listeners = list(self._listeners.values()), {}
        for listener in listeners:
            listener.broken = True
            if listener.reader is not None:
                await listener.reader.stop(READ_SLICE * 8)
            with contextlib.suppress(Exception):  # a dead connection: nothing to report
                await listener.connection.aclose()


def own_updates(
    live_updates: bool | AsyncRedisUpdates | None, client: AsyncRedisClient, namespace: str
) -> AsyncRedisUpdates | None:
    """The updates a state store uses: None for None/False, a new instance on ``client`` for
    True, ``live_updates`` itself for an instance of the store's namespace and cluster kind.

    Raises ConfigurationError, naming both sides, for an instance of another namespace (its
    followers would listen on channels the store never publishes to) or of the other kind
    (PUBLISH vs sharded SPUBLISH).
    """
    if live_updates is True:
        return AsyncRedisUpdates(client, namespace)
    if not live_updates:
        return None
    sharded = isinstance(client, AsyncRedisCluster)
    if live_updates.namespace != namespace or live_updates.sharded != sharded:
        kinds = {True: "Redis Cluster (sharded pub/sub)", False: "a single Redis server"}
        raise ConfigurationError(
            f"live_updates={live_updates!r} does not match the store: the updates listen in "
            f"namespace {live_updates.namespace!r} on {kinds[live_updates.sharded]}, the store "
            f"writes in namespace {namespace!r} on {kinds[sharded]}; build the updates with "
            "the store's client and namespace (or pass live_updates=True)"
        )
    return live_updates
