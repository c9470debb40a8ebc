"""Figures for docs/sqlite.md (a script, not a test): list_runs by status among 100,002 runs,
delete_session(cascade=True) of a large session, batch by batch, and a claim (or an idle
worker's poll) behind tenants with only delayed work.

    .venv/bin/python -m benchmarks.sqlite_bounded [list|delete|delete-no-pause|claim|poll] [count]

Rows are written with plain SQL (the setup is not what is measured); the measured calls go
through SqliteStateStore, and the statement list_runs sent before state version 4 is timed on
the same file for the "before" figure.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from runyard import RunKey
from runyard._sync.sqlite import state as state_module
from runyard.sqlite import SqliteStateStore, SqliteWorkQueue
from runyard.sqlite.statements_state import RUN_COLUMNS

from benchmarks._report import write_report

OUT_DIR = Path(os.environ.get("RUNYARD_BENCH_OUT_DIR", "benchmarks/results"))

# list_runs' statement before state version 4: the tenant's (tenant, seq) index, the status
# checked row by row.
_BEFORE = f"""
SELECT {RUN_COLUMNS} FROM runyard_runs
WHERE tenant = :tenant AND seq > :after
  AND (:status IS NULL OR status = :status)
  AND (:session_id IS NULL OR session_id = :session_id)
ORDER BY seq
LIMIT :limit"""


def _fill(path: Path, runs: int, session_id: str | None) -> None:
    SqliteStateStore.open(path, create_schema=True).close()
    with sqlite3.connect(path) as conn:
        conn.executemany(
            "INSERT INTO runyard_runs (tenant, run_id, blob, version, status, session_id, "
            "created_at, updated_at) VALUES ('t', ?, '{}', 1, ?, ?, 0, 0)",
            ((f"r{n}", "running", session_id) for n in range(runs)),
        )
        if session_id is not None:
            conn.executemany(
                "INSERT INTO runyard_run_events (tenant, run_id, seq, type, data, at) "
                "VALUES ('t', ?, 1, 'step', '{}', 0)",
                ((f"r{n}",) for n in range(0, runs, 4)),
            )


def _median_ms(call: object, rounds: int = 30) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()  # type: ignore[operator]
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def list_by_status(runs: int) -> None:
    """Also written to ``sqlite-bounded-list.json``/``.png`` in benchmarks/results, or
    ``$RUNYARD_BENCH_OUT_DIR`` (the ratio:
    the statement before state version 4 over the store call now)."""
    with tempfile.TemporaryDirectory() as where:
        path = Path(where) / "list.db"
        _fill(path, runs, None)
        store = SqliteStateStore.open(path, durable=False)
        store.put_run(RunKey("t", "match"), {}, expected_version=0, status="done")
        store.put_run(RunKey("t", "last"), {}, expected_version=0, status="running")
        params = {"tenant": "t", "after": 0, "status": "done", "session_id": None, "limit": 101}
        raw = sqlite3.connect(path)
        before = _median_ms(lambda: raw.execute(_BEFORE, params).fetchall())
        after = _median_ms(lambda: store.list_runs("t", status="done"))
        assert [r.run_id for r in store.list_runs("t", status="done").items] == ["match"]
        store.close()
        raw.close()
    print(
        f"list_runs(status=) one match among {runs + 2} runs: before {before:.2f} ms "
        f"(statement alone), after {after:.3f} ms (store call), median of 30"
    )
    figures = {
        "runs": runs + 2,
        "list_runs(status=), one match": {
            "before ms (statement alone)": before,
            "after ms (store call)": after,
            "ratio": before / after,
        },
    }
    for written in write_report("sqlite-bounded-list", figures, out_dir=OUT_DIR):
        print("wrote", written)


def _file_with_idle_tenants(where: str, tenants: int) -> Path:
    """A queue file where ``tenants`` tenants hold one item each, delayed by a day."""
    path = Path(where) / "claim.db"
    SqliteWorkQueue.open(path, create_schema=True).close()
    later = time.time() + 86_400
    with sqlite3.connect(path) as conn:
        conn.executemany(
            "INSERT INTO runyard_work_items (tenant, item_id, payload, state, available_at, "
            "enqueued_at, ready_seq) VALUES (?, 'x', '{}', 'ready', ?, ?, 1)",
            ((f"idle-{n:06d}", later, later) for n in range(tenants)),
        )
    return path


def claim_behind_idle_tenants(tenants: int) -> None:
    """claim + complete of a busy tenant's items while ``tenants`` others hold one item each,
    delayed by a day, with older turns. Queue version 4 parks 64 of them a claim: the first
    claims still probe them (tenants / 64 claims), the ones after do not."""
    parking = tenants // 64 + 1
    with tempfile.TemporaryDirectory() as where:
        queue = SqliteWorkQueue.open(_file_with_idle_tenants(where, tenants), durable=False)
        for n in range(parking + 200):
            queue.enqueue("zz-busy", {"n": n})
        times = []
        for _ in range(parking + 200):
            start = time.perf_counter()
            lease = queue.claim("w")
            assert lease is not None and lease.tenant == "zz-busy"
            queue.complete(lease)
            times.append((time.perf_counter() - start) * 1000)
        queue.close()
    print(
        f"claim+complete behind {tenants} tenants with only delayed work (durable=False): "
        f"median {statistics.median(times[-200:]):.2f} ms of the last 200; the first "
        f"{min(50, parking)}: median {statistics.median(times[:50][:parking]):.2f} ms"
    )


def idle_polls(tenants: int) -> None:
    """An idle worker's polls (claims that find nothing due) while ``tenants`` tenants hold
    one item each, delayed by a day. Queue version 4 parks 64 of them a poll."""
    parking = tenants // 64 + 1
    with tempfile.TemporaryDirectory() as where:
        queue = SqliteWorkQueue.open(_file_with_idle_tenants(where, tenants), durable=False)
        times = []
        for _ in range(parking + 200):
            start = time.perf_counter()
            assert queue.claim("w") is None
            times.append((time.perf_counter() - start) * 1000)
        queue.close()
    print(
        f"idle poll over {tenants} tenants with only delayed work (durable=False): median "
        f"{statistics.median(times[-200:]):.3f} ms of the last 200; the first "
        f"{min(50, parking)}: median {statistics.median(times[:50][:parking]):.2f} ms"
    )


def delete_session(runs: int, pause: bool = True) -> None:
    """``pause=False``: without the pause between batches (the sync twin's sleep made a no-op),
    for the figure of what it is for."""
    if not pause:
        state_module.sleep = lambda seconds: None  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as where:
        path = Path(where) / "delete.db"
        _fill(path, runs, "s")
        store = SqliteStateStore.open(path)
        store.put_session("t", "s", {}, expected_version=0)
        other = SqliteStateStore.open(path, busy_timeout_seconds=30)
        raw = store.connection.raw
        commits: list[float] = [time.perf_counter()]
        raw.set_trace_callback(
            lambda sql: commits.append(time.perf_counter()) if sql.startswith("COMMIT") else None
        )
        done = threading.Event()
        waits: list[float] = []

        def write_beside() -> None:  # another connection's writes while the cascade runs
            n = 0
            while not done.is_set():
                start = time.perf_counter()
                other.put_run(RunKey("w", f"w{n}"), {}, expected_version=0)
                waits.append((time.perf_counter() - start) * 1000)
                n += 1
                time.sleep(0.002)

        writer = threading.Thread(target=write_beside)
        writer.start()
        start = time.perf_counter()
        try:
            store.delete_session("t", "s", cascade=True)
        finally:
            total = (time.perf_counter() - start) * 1000
            done.set()
            writer.join()
        raw.set_trace_callback(None)
        store.close()
        other.close()
    gaps = [(b - a) * 1000 for a, b in itertools.pairwise(commits)]
    print(
        f"delete_session of {runs} runs ({runs // 4} events): {total:.0f} ms in {len(gaps)} "
        f"transactions, commit to commit median {statistics.median(gaps):.1f} ms; "
        f"{'' if pause else 'no pause, '}{len(waits)} put_run beside it (2 ms apart): "
        f"median {statistics.median(waits):.1f} ms, "
        f"longest {max(waits):.1f} ms"
    )


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "list"
    count = int(sys.argv[2]) if len(sys.argv) > 2 else (100_000 if which == "list" else 200_001)
    if which == "list":
        list_by_status(count)
    elif which in ("claim", "poll"):
        tenants = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000
        (claim_behind_idle_tenants if which == "claim" else idle_polls)(tenants)
    else:
        delete_session(count, pause=which != "delete-no-pause")
