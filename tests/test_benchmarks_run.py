"""The PostgreSQL and memory benchmarks still run (tiny settings), so they cannot rot unnoticed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.slow
def test_the_postgres_benchmark_runs(pg_server: None) -> None:
    out = _run(
        "benchmarks/bench_postgres.py", "--seconds", "0.2", "--depths", "100", "--samples", "5"
    )
    assert "| sync | claim+complete | 16 |" in out and "| 100 |" in out


def test_the_memory_benchmark_runs() -> None:
    out = _run("-m", "benchmarks.bench_memory")
    assert "enqueue+claim+complete" in out and "x baseline" in out


@pytest.mark.slow
def test_the_worker_benchmark_runs(pg_server: None, tmp_path: Path) -> None:
    out = _run(
        "benchmarks/bench_worker.py",
        "--items",
        "40",
        "--concurrency",
        "4",
        "--samples",
        "3",
        "--idle-seconds",
        "0.5",
        "--out",
        str(tmp_path / "worker.json"),
    )
    assert "memory   async batched" in out and "postgres sync  idle worker" in out
    assert (tmp_path / "worker.json").exists()
