"""The conformance kit against the Redis backend: fakeredis, the machine's Redis, a cluster."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterator

import pytest
from runyard import ManualClock, QueuePolicy
from runyard._async.protocols import AsyncStateStore, AsyncWorkQueue
from runyard._async.testing import AsyncStateStoreConformance, AsyncWorkQueueConformance
from runyard.redis import AsyncRedisStateStore, AsyncRedisWorkQueue, RedisStoreSettings
from runyard.testing import TwinDriver

from tests.support.redis_plugin import AsyncClients, RedisTarget, fresh_namespace, pubsub_clients
from tests.support.twins import AsyncTwins


class _Lane:
    """Gives each test a target, a fresh namespace and a manual clock; purges afterwards."""

    target_fixture = ""

    @pytest.fixture(autouse=True)
    def _lane(self, request: pytest.FixtureRequest) -> Iterator[None]:
        self.target: RedisTarget = request.getfixturevalue(self.target_fixture)
        self.settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
        self.clock = ManualClock()
        self.extra_namespaces: list[str] = []
        yield
        for namespace in [self.settings.namespace, *self.extra_namespaces]:
            self.target.purge(namespace)

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)


class _StateLane(_Lane, AsyncStateStoreConformance):
    async def make_store(self) -> AsyncStateStore:
        client = AsyncClients.for_target(self.target)
        return AsyncRedisStateStore(
            client, clock=self.clock, settings=self.settings, owns_client=True
        )

    async def make_live_store(self) -> AsyncStateStore:
        settings = self._extra_settings("-live")
        # Named, so that listener_killer finds its pub/sub connection on the server.
        self.client_name = f"ry-{uuid.uuid4().hex[:12]}"
        client = AsyncClients.for_target(self.target, client_name=self.client_name)
        return AsyncRedisStateStore(
            client, clock=self.clock, settings=settings, owns_client=True, live_updates=True
        )

    async def make_real_time_store(self) -> AsyncStateStore:
        # No clock: the scripts read the server's TIME.
        client = AsyncClients.for_target(self.target)
        settings = self._extra_settings("-time")
        return AsyncRedisStateStore(client, settings=settings, owns_client=True)

    def make_twin(self, store: AsyncStateStore) -> TwinDriver | None:
        if self.target.kind == "fake":
            return None  # a fakeredis server lives in this process and this twin's client
        assert isinstance(store, AsyncRedisStateStore)
        return AsyncTwins.redis(self.target, store.settings, store.live_updates is not None)

    def listener_killer(self, store: AsyncStateStore) -> Callable[[], Awaitable[None]] | None:
        if self.target.kind == "fake":
            return None

        async def kill() -> None:
            # One run followed: one pub/sub connection (on the node serving its slot).
            assert pubsub_clients(self.target, self.client_name, kill=True) == 1

        return kill

    def _extra_settings(self, suffix: str) -> RedisStoreSettings:
        settings = self.settings.model_copy(update={"namespace": self.settings.namespace + suffix})
        self.extra_namespaces.append(settings.namespace)
        return settings


class _QueueLane(_Lane, AsyncWorkQueueConformance):
    async def make_queue(self, policy: QueuePolicy) -> AsyncWorkQueue:
        client = AsyncClients.for_target(self.target)
        return AsyncRedisWorkQueue(
            client, policy=policy, clock=self.clock, settings=self.settings, owns_client=True
        )


class TestFakeRedisStateStore(_StateLane):
    target_fixture = "fake_redis_target"


class TestFakeRedisWorkQueue(_QueueLane):
    target_fixture = "fake_redis_target"


class TestRedisServerStateStore(_StateLane):
    target_fixture = "local_redis_target"


class TestRedisServerWorkQueue(_QueueLane):
    target_fixture = "local_redis_target"


@pytest.mark.slow
class TestRedisClusterStateStore(_StateLane):
    target_fixture = "cluster_redis_target"


@pytest.mark.slow
class TestRedisClusterWorkQueue(_QueueLane):
    target_fixture = "cluster_redis_target"
