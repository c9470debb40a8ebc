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
        asyncio.run(bench_redis._async_cell(port, 2, 8))
        bench_redis._sync_cell(port, 2, 8)
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
        ["--port", port, "--ops", "512", "--items", "50", "--out-dir", str(tmp_path)]
    )
    assert code == 0
    figures = json.loads((tmp_path / "bench-redis.json").read_text(encoding="utf-8"))
    assert figures["async c32 claim+complete x16"]["ratio"] > 0
    assert figures["queue memory"]["bytes per item (MEMORY USAGE)"] > 100
    assert (tmp_path / "bench-redis.png").read_bytes().startswith(b"\x89PNG")
