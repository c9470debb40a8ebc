"""benchmarks/bench_redis.py deletes only its own keys: it may be pointed at a real server."""

from __future__ import annotations

import asyncio

import redis

from benchmarks import bench_redis
from tests.support.redis_plugin import RedisTarget


def test_the_benchmark_leaves_other_keys_alone_and_removes_its_own(
    dedicated_redis_target: RedisTarget,
) -> None:
    port = dedicated_redis_target.port
    with redis.Redis(port=port) as client:
        client.set("someone-else:key", "keep me")
        asyncio.run(bench_redis._async_cell(port, 2, 8))
        bench_redis._sync_cell(port, 2, 8)
        figures = bench_redis.bytes_per_item(port, items=30)
        assert figures["memory_usage"] > 100  # at least the payload
        assert client.get("someone-else:key") == b"keep me"
        assert list(client.scan_iter(match="bench-*")) == []
