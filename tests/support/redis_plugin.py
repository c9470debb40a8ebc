"""Redis fixtures for both twins: the lanes (fakeredis, the machine's Redis, a test cluster),
client factories as an ``AsyncClients``/``Clients`` pair, and per-test namespaces."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import fakeredis
import pytest
import redis
from redis.cluster import ClusterNode
from runyard.redis.executions import EXECUTION_SCRIPTS
from runyard.redis.flavours import (
    AsyncRedis,
    AsyncRedisClient,
    AsyncRedisCluster,
    AsyncRetry,
    NoBackoff,
    RedisClient,
    RedisCluster,
    Retry,
)
from runyard.redis.keys import cleanup_patterns
from runyard.redis.scripts import QUEUE_SCRIPTS, STATE_SCRIPTS

from tests.support.redis_servers import (
    RedisProcess,
    require_redis_binaries,
    start_cluster,
    start_redis,
)
from tests.support.servers import require_server

__all__ = ["AsyncClients", "Clients", "RedisTarget", "fresh_namespace", "pubsub_clients"]

LOCAL_REDIS = ("127.0.0.1", 6379)


def fresh_namespace() -> str:
    """A namespace no other test uses."""
    return f"t-{uuid.uuid4().hex[:12]}"


@dataclass
class RedisTarget:
    """Where a lane's stores connect: a fakeredis server, one Redis, or a cluster."""

    kind: Literal["fake", "server", "cluster"]
    host: str = "127.0.0.1"
    port: int = 0
    fake: fakeredis.FakeServer | None = None

    def purge(self, namespace: str) -> None:
        """Delete every key of ``namespace`` (on every node of a cluster)."""
        if self.kind == "fake":
            return
        client: redis.Redis | RedisCluster
        if self.kind == "cluster":
            client = RedisCluster(host=self.host, port=self.port)
        else:
            client = redis.Redis(host=self.host, port=self.port)
        with client:
            for pattern in cleanup_patterns(namespace):
                if isinstance(client, RedisCluster):
                    for node in client.get_primaries():  # type: ignore[no-untyped-call]
                        keys = list(client.scan_iter(match=pattern, count=500, target_nodes=node))
                        for key in keys:
                            client.delete(key)
                else:
                    keys = list(client.scan_iter(match=pattern, count=500))
                    if keys:
                        client.delete(*keys)


class AsyncClients:
    """Builds asyncio clients for a target, redis-py's retries off (the store owns them)."""

    @staticmethod
    def for_target(target: RedisTarget, **options: Any) -> AsyncRedisClient:
        """A new client for ``target`` (``options`` go to the client); the caller closes it."""
        if target.kind == "fake":
            return fakeredis.FakeAsyncRedis(server=target.fake, **options)
        if target.kind == "cluster":
            return AsyncRedisCluster(
                host=target.host, port=target.port, retry=AsyncRetry(NoBackoff(), 0), **options
            )
        return AsyncRedis(
            host=target.host, port=target.port, retry=AsyncRetry(NoBackoff(), 0), **options
        )


class Clients:
    """Builds blocking clients for a target, redis-py's retries off (the store owns them)."""

    @staticmethod
    def for_target(target: RedisTarget, **options: Any) -> RedisClient:
        """A new client for ``target`` (``options`` go to the client); the caller closes it."""
        if target.kind == "fake":
            return fakeredis.FakeRedis(server=target.fake, **options)
        if target.kind == "cluster":
            node = ClusterNode(target.host, target.port)  # type: ignore[no-untyped-call]
            return RedisCluster(startup_nodes=[node], retry=Retry(NoBackoff(), 0), **options)
        return redis.Redis(
            host=target.host, port=target.port, retry=Retry(NoBackoff(), 0), **options
        )


def pubsub_clients(target: RedisTarget, client_name: str, kill: bool = False) -> int:
    """How many pub/sub connections named ``client_name`` ``target`` holds (on every node of a
    cluster); with ``kill``, end them (CLIENT KILL) as well."""
    if target.kind == "fake":
        return 0
    addresses = [(target.host, target.port)]
    if target.kind == "cluster":
        with RedisCluster(host=target.host, port=target.port) as cluster:
            addresses = [(n.host, n.port) for n in cluster.get_nodes()]
    found = 0
    for host, port in addresses:
        with redis.Redis(host=host, port=port) as admin:
            for client in admin.client_list(_type="pubsub"):
                if client["name"] == client_name:
                    found += 1
                    if kill:
                        admin.client_kill_filter(_id=client["id"])
    return found


@pytest.fixture
def fake_redis_target() -> RedisTarget:
    """A fresh fakeredis server (Lua through lupa) for one test."""
    return RedisTarget("fake", fake=fakeredis.FakeServer())


@pytest.fixture(scope="session")
def local_redis_target() -> RedisTarget:
    """The machine's Redis on 127.0.0.1:6379 (CI: must be there; elsewhere: skip)."""
    require_server("Redis", *LOCAL_REDIS)
    return RedisTarget("server", *LOCAL_REDIS)


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[list[RedisProcess]]:
    """A 3-master Redis Cluster on free loopback ports, stopped by pid at session end."""
    require_redis_binaries()
    nodes = start_cluster(3)
    try:
        yield nodes
    finally:
        for node in nodes:
            node.stop()


@pytest.fixture(scope="session")
def cluster_redis_target(redis_cluster: list[RedisProcess]) -> RedisTarget:
    """The test cluster as a target."""
    return RedisTarget("cluster", port=redis_cluster[0].port)


@pytest.fixture(scope="session")
def dedicated_redis() -> Iterator[RedisProcess]:
    """A redis-server of this session's own (commands are counted on it), stopped by pid."""
    require_redis_binaries()
    server = start_redis()
    try:
        yield server
    finally:
        server.stop()


def load_every_script(port: int) -> None:
    """SCRIPT LOAD every runyard script on the server at ``port``, so a test's first EVALSHA of
    a script is never answered NOSCRIPT (and re-sent as EVAL) whatever ran before it: a test that
    loses the next reply loses the script's own reply, not a NOSCRIPT error's."""
    with redis.Redis(port=port) as client:
        for scripts in (STATE_SCRIPTS, QUEUE_SCRIPTS, EXECUTION_SCRIPTS):
            for script in scripts.values():
                assert client.script_load(script.text) == script.sha


@pytest.fixture
def dedicated_redis_target(dedicated_redis: RedisProcess) -> Iterator[RedisTarget]:
    """The dedicated server as a target, every runyard script loaded, flushed after each test."""
    target = RedisTarget("server", port=dedicated_redis.port)
    load_every_script(dedicated_redis.port)
    yield target
    with redis.Redis(port=dedicated_redis.port) as client:
        client.flushall()
