"""The benchmarks still run (tiny settings), so they cannot rot unnoticed."""

from __future__ import annotations

import json
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


def test_the_sqlite_benchmark_runs(tmp_path: Path) -> None:
    figures = tmp_path / "sqlite.json"
    out = _run(
        "benchmarks/bench_sqlite.py", "--ops", "5", "--processes", "1", "--json", str(figures)
    )
    assert "| sync | put_run | 1 |" in out and "| async | execution commit | 1 |" in out
    rows = json.loads(figures.read_text())["figures"]
    assert {(r["twin"], r["operation"]) for r in rows} == {
        (twin, op)
        for twin in ("sync", "async")
        for op in ("put_run", "patch_run", "enqueue", "claim+complete", "execution commit")
    }
    assert all(r["ratio"] > 0 for r in rows)
    assert all((r["ratio_to_aiosqlite"] is None) == (r["twin"] == "sync") for r in rows)
