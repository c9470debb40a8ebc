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
        "benchmarks/bench_postgres.py",
        "--seconds",
        "0.2",
        "--cases",
        "100:1,100:10",
        "--samples",
        "5",
    )
    assert "| sync | claim+complete 1 tenant | 16 |" in out
    assert "| sync | claim+complete 16 tenants | 16 |" in out
    assert "| 100 | 10 | never |" in out and "| 100 | 10 | yes |" in out


def test_the_memory_benchmark_runs() -> None:
    out = _run("-m", "benchmarks.bench_memory")
    assert "enqueue+claim+complete" in out and "x baseline" in out
