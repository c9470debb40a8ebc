"""benchmarks/bench_redis.py deletes only its own keys: it may be pointed at a real server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import redis

from benchmarks import bench_redis
from tests.support.redis_plugin import RedisTarget


def test_the_benchmark_leaves_other_keys_alone_and_removes_its_own(
    dedicated_redis_target: RedisTarget,
) -> None:
    port = dedicated_redis_target.port
    with redis.Redis(port=port) as client:
        client.set("someone-else:key", "keep me")
        for tenants, batch in ((1, 1), (16, 16)):
            asyncio.run(bench_redis._async_throughput(port, tenants, batch, 256))
            bench_redis._sync_throughput(port, tenants, batch, 256)
        asyncio.run(bench_redis._async_state(port, 32))
        bench_redis._sync_state(port, 32)
        populations = {"20 items": (1, 20), "5 tenants": (5, 1)}
        latency = asyncio.run(bench_redis._async_latency(port, populations, 3, 2))
        assert [len(row["p50 ms per round"]) for row in latency.values()] == [2, 2]
        figures = bench_redis.bytes_per_item(port, items=30)
        assert figures["memory_usage"] > 100  # at least the payload
        assert client.get("someone-else:key") == b"keep me"
        assert list(client.scan_iter(match="bench-*")) == []
        assert list(client.scan_iter(match="{bench-*")) == []  # item hashes


def test_the_benchmark_writes_its_figures_and_chart(
    dedicated_redis_target: RedisTarget, tmp_path: Path
) -> None:
    port = str(dedicated_redis_target.port)
    code = bench_redis.main(
        [
            "--port",
            port,
            "--items",
            "256",
            "--samples",
            "5",
            "--rounds",
            "1",
            "--sizes",
            "10,50",
            "--tenants",
            "5,20",
            "--memory-items",
            "50",
            "--out-dir",
            str(tmp_path),
        ]
    )
    assert code == 0
    figures = json.loads((tmp_path / "redis.json").read_text(encoding="utf-8"))
    assert figures["async claim+complete c16 t16 x16"]["ratio"] > 0
    assert figures["sync claim+complete c16 t1 x1"]["ratio"] > 0
    growth = figures["claim latency growth"]["5 tenants -> 20 tenants"]["p50 growth ratio"]
    assert growth > 0
    assert figures["queue memory"]["bytes per item (MEMORY USAGE)"] > 100
    assert (tmp_path / "redis.png").read_bytes().startswith(b"\x89PNG")
