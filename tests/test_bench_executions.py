"""The execution benchmark still runs (a tiny cell), so it cannot rot unnoticed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from tests.support.redis_servers import RedisProcess

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_execution_benchmark_runs_and_touches_only_its_own_keys(
    dedicated_redis: RedisProcess, pg_server: None, tmp_path: Path
) -> None:
    with redis.Redis(port=dedicated_redis.port) as client:
        client.set("someone-elses-key", "kept")
        result = subprocess.run(
            [
                sys.executable,
                "benchmarks/bench_executions.py",
                "--ops",
                "20",
                "--port",
                str(dedicated_redis.port),
                "--out-dir",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        assert "full path / WATCH/MULTI/EXEC way" in result.stdout
        assert "postgres full" in result.stdout
        assert client.get("someone-elses-key") == b"kept"
        assert client.dbsize() == 1
        client.flushall()
    figures = json.loads((tmp_path / "bench-executions.json").read_text(encoding="utf-8"))
    assert figures["async"]["redis full"]["ratio"] > 0
    assert (tmp_path / "bench-executions.png").read_bytes().startswith(b"\x89PNG")
