"""The benchmarks still run (tiny settings), so they cannot rot unnoticed; the shared report
writes its JSON and PNG."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks._report import ratios, write_report

ROOT = Path(__file__).resolve().parents[1]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _run(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.slow
def test_the_postgres_benchmark_runs(pg_server: None, tmp_path: Path) -> None:
    out = _run(
        "-m",
        "benchmarks.bench_postgres",
        "--seconds",
        "0.2",
        "--cases",
        "100:1,100:10",
        "--samples",
        "5",
        "--out-dir",
        str(tmp_path),
    )
    assert "| sync | claim+complete 1 tenant | 16 |" in out
    assert "| sync | claim+complete 16 tenants | 16 |" in out
    assert "| async | claim_many+complete_many n=16 1 tenant | 16 |" in out
    assert "| 100 | 10 | never |" in out and "| 100 | 10 | yes |" in out
    # part 5, the SQL through pgbench (the server's PostgreSQL package ships pgbench)
    assert "| queue claim+complete statements, 1 tenant | 16 |" in out
    figures = json.loads((tmp_path / "bench-postgres.json").read_text(encoding="utf-8"))
    server_side = figures["server side (pgbench)"]
    for case in (
        "lean SKIP LOCKED claim+delete",
        "queue table: bare SKIP LOCKED claim+delete",
        "queue claim+complete statements, 1 tenant",
        "queue claim+complete statements, 16 tenants",
    ):
        assert server_side[case]["jobs/s"] > 0 and server_side[case]["ratio"] > 0
    assert figures["operations"]["sync claim+complete 1 tenant"]["c=16"]["ratio"] > 0
    for twin in ("async", "sync"):
        assert (
            figures["operations"][f"{twin} floor: lean SKIP LOCKED claim+delete"]["c=16"]["ratio"]
            > 0
        )
    assert (tmp_path / "bench-postgres.png").read_bytes().startswith(PNG_SIGNATURE)


def test_the_session_pages_script_runs_and_writes_its_report(
    pg_server: None, tmp_path: Path
) -> None:
    out = _run(
        "-m",
        "benchmarks.postgres_session_pages",
        "--runs",
        "300",
        "--pages",
        "2",
        "--out-dir",
        str(tmp_path),
    )
    rows = [
        line for line in out.splitlines() if line.startswith("| 5 |") or line.startswith("| 6 |")
    ]
    # both indexes, never analyzed and analyzed, each status case
    assert len(rows) == 12, out
    assert "| 6 | yes | None | 2 |" in out and "| 5 | no | failed | 1 |" in out
    figures = json.loads((tmp_path / "postgres-session-pages.json").read_text())
    assert len(figures["cases"]) == 6
    assert all(case["ratio"] > 0 for case in figures["cases"].values())
    assert (tmp_path / "postgres-session-pages.png").read_bytes().startswith(PNG_SIGNATURE)


def test_the_delayed_tenants_script_runs_and_writes_its_report(
    pg_server: None, tmp_path: Path
) -> None:
    out = _run(
        "-m",
        "benchmarks.postgres_delayed_tenants",
        "--tenants",
        "0,20",
        "--claims",
        "60",
        "--first",
        "10",
        "--steady-after",
        "30",
        "--out-dir",
        str(tmp_path),
    )
    rows = [line.split(" | ")[0] for line in out.splitlines() if line.startswith("| ")]
    assert rows[2:] == ["| 0", "| 20"], out  # after the header and its rule: N=0, N=20
    figures = json.loads((tmp_path / "postgres_delayed_tenants.json").read_text())
    assert figures["settings"]["claims"] == 60
    cases = {name: case for name, case in figures.items() if name != "settings"}
    assert sorted(case["tenants"] for case in cases.values()) == [0, 20]
    for case in cases.values():
        assert case["load seconds"] > 0
        for part in ("first 10", "after 30"):
            assert case[part]["p99_ms"] >= case[part]["p50_ms"] > 0 and case[part]["ratio"] > 0
    assert cases["N=0"]["first 10"]["ratio"] == cases["N=0"]["after 30"]["ratio"] == 1.0
    assert (tmp_path / "postgres_delayed_tenants.png").read_bytes().startswith(PNG_SIGNATURE)


def test_the_sqlite_bounded_list_script_runs_and_writes_its_report(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "benchmarks.sqlite_bounded", "list", "2000"]
    env = {**os.environ, "RUNYARD_BENCH_OUT_DIR": str(tmp_path)}
    result = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads((tmp_path / "sqlite-bounded-list.json").read_text())
    assert figures["runs"] == 2002
    assert figures["list_runs(status=), one match"]["ratio"] > 0
    assert (tmp_path / "sqlite-bounded-list.png").read_bytes().startswith(PNG_SIGNATURE)


def test_the_memory_benchmark_runs_and_writes_its_report(tmp_path: Path) -> None:
    out = _run("-m", "benchmarks.bench_memory", "--out-dir", str(tmp_path))
    assert "enqueue+claim+complete" in out and "x baseline" in out
    figures = json.loads((tmp_path / "bench-memory.json").read_text(encoding="utf-8"))
    assert figures["put_run sync"]["ratio"] > 0
    assert (tmp_path / "bench-memory.png").read_bytes().startswith(PNG_SIGNATURE)


@pytest.mark.slow
def test_the_events_benchmark_runs(
    pg_server: None, local_redis_target: object, tmp_path: Path
) -> None:
    out = _run(
        "-m",
        "benchmarks.bench_events",
        "--appends",
        "20",
        "--samples",
        "5",
        "--poll",
        "0.02",
        "--poll-samples",
        "5",
        "--out-dir",
        str(tmp_path),
    )
    assert "| redis | append" in out and "| postgres | append" in out
    assert "follow live p50" in out and "follow polling p50" in out
    figures = json.loads((tmp_path / "bench-events.json").read_text(encoding="utf-8"))
    assert set(figures) == {"redis", "postgres"}
    assert all(figures[name]["ratio"] > 0 for name in figures)
    assert all(figures[name]["follow speed-up"]["ratio"] > 0 for name in figures)
    assert all(set(figures[name]["follow polling"]) == {"p50_ms", "p99_ms"} for name in figures)
    parts = {"append call", "from append return", "hint delivery from append return"}
    for name in figures:
        live = figures[name]["follow live"]
        assert live["p50_ms"] > 0 and live["p99_ms"] >= live["p50_ms"]
        assert parts <= set(live) and live["samples with a hint"] >= 1
        assert live["append call"]["p50_ms"] > 0
    assert "live append call: p50" in out and "live from append return: p50" in out
    assert (tmp_path / "bench-events.png").read_bytes().startswith(PNG_SIGNATURE)


def test_write_report_writes_the_figures_and_a_chart_of_the_ratios(tmp_path: Path) -> None:
    figures = {
        "redis": {"append ops/s": 900.0, "raw ops/s": 2000.0, "ratio": 0.45},
        "postgres": {"claim": {"ratio": 0.8}, "depth ratio": 1.5, "p50_ms": 3.0},
    }
    assert list(ratios(figures)) == [
        ("redis", 0.45),
        ("postgres / claim", 0.8),
        ("postgres / depth ratio", 1.5),
    ]
    json_path, png_path = write_report("bench-x", figures, out_dir=tmp_path / "out")
    assert (json_path, png_path) == (tmp_path / "out/bench-x.json", tmp_path / "out/bench-x.png")
    assert json.loads(json_path.read_text(encoding="utf-8")) == figures
    assert png_path.read_bytes().startswith(PNG_SIGNATURE)


def test_write_report_refuses_figures_without_a_ratio(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no '\\*ratio' figure"):
        write_report("bench-x", {"redis": {"ops/s": 1.0}}, out_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_the_sqlite_benchmark_runs(tmp_path: Path) -> None:
    out = _run(
        "-m",
        "benchmarks.bench_sqlite",
        "--ops",
        "5",
        "--processes",
        "1",
        "--out-dir",
        str(tmp_path),
    )
    assert "| sync | put_run | 1 |" in out and "| async | execution commit | 1 |" in out
    cells = json.loads((tmp_path / "sqlite.json").read_text())["1 process"]
    operations = {"put_run", "patch_run", "enqueue", "claim+complete", "execution commit"}
    operations |= {"enqueue_many (16)", "claim_many+complete_many (16)"}
    assert set(cells) == {"sync", "async"}
    assert all(set(cells[twin]) == operations for twin in cells)
    assert all(cell["ratio"] > 0 for twin in cells for cell in cells[twin].values())
    assert all("aiosqlite_ratio" in cell for cell in cells["async"].values())
    assert all(cell["raw_aiosqlite_floor_ratio"] > 0 for cell in cells["async"].values())
    assert not any("aiosqlite_ratio" in cell for cell in cells["sync"].values())
    floors = {op for op, cell in cells["sync"].items() if cell.get("sql_only_ratio", 0) > 0}
    assert floors == {"put_run", "patch_run", "enqueue"} and "| enqueue | " in out
    assert not any("sql_only_ratio" in cell for cell in cells["async"].values())
    assert (tmp_path / "sqlite.png").read_bytes().startswith(PNG_SIGNATURE)


def test_the_worker_benchmark_runs(pg_server: None, tmp_path: Path) -> None:
    out = _run(
        "-m",
        "benchmarks.bench_worker",
        "--jobs",
        "40",
        "--concurrency",
        "4",
        "--samples",
        "3",
        "--idle-seconds",
        "0.5",
        "--rounds",
        "2",
        "--out-dir",
        str(tmp_path),
    )
    assert "memory   async batched" in out and "postgres sync  idle worker" in out
    figures = json.loads((tmp_path / "worker.json").read_text())
    for backend in ("memory", "redis", "postgres"):
        for twin in ("async", "sync"):
            cells = figures[backend][twin]
            assert cells["unbatched"]["ratio"] > 0 and cells["idle worker"]["p99_ms"] > 0
            assert len(cells["unbatched"]["round_ratios"]) == figures["rounds"] == 2
            idle = cells["idle worker"]
            assert {"enqueue call", "start from enqueue return", "claim call"} <= set(idle)
            if backend != "memory":  # the memory queue's own wake-up is not counted
                assert "hint from enqueue return" in idle
                bare = figures[backend]["bare idle"]
                assert idle["p50_x_bare"] == pytest.approx(idle["p50_ms"] / bare["p50_ms"])
            else:
                assert figures[backend]["bare idle"] is None and "p50_x_bare" not in idle
    assert "start from enqueue return: p50" in out
    assert (tmp_path / "worker.png").read_bytes().startswith(PNG_SIGNATURE)
