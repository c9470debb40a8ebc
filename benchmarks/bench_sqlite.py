"""SQLite benchmark (`make bench-sqlite`): ops/s of both twins beside a raw sqlite3 write.

Every cell runs on a fresh file in a temporary directory (WAL, ``synchronous=FULL``: the
stores' durable default) and is compared with a baseline measured right before it, at the same
process count, on a file with the same pragmas: a raw ``sqlite3`` single-row UPDATE followed
by COMMIT. Operations: put_run (CAS update), patch_run, enqueue, claim+complete (two writes)
and an execution commit (CAS plus one outbox entry), each for the sync and the async twin, in
1 and 4 processes on one file (4 processes: total ops / wall time). Prints a Markdown table;
``--json`` also writes the figures there.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sqlite3
import sys
import tempfile
import time
from multiprocessing.connection import Connection as Pipe
from pathlib import Path
from typing import Any

from runyard import CounterDelta, RunKey
from runyard.execution_models import Event, Execution
from runyard.sqlite import (
    AsyncSqliteStateStore,
    AsyncSqliteStore,
    AsyncSqliteWorkQueue,
    SqliteStateStore,
    SqliteStore,
    SqliteWorkQueue,
    create_schema,
)

OPERATIONS = ("put_run", "patch_run", "enqueue", "claim+complete", "execution commit")
SINGLE_STATEMENT = ("put_run", "patch_run", "enqueue")
SPAWN = multiprocessing.get_context("spawn")


def _raw(path: str, me: int, n: int) -> None:
    conn = sqlite3.connect(path, timeout=30)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    for _ in range(n):
        conn.execute("UPDATE bench SET n = n + 1 WHERE id = ?", (me,))
        conn.commit()
    conn.close()


def _prepare(path: str, operation: str, workers: int, n: int) -> None:
    """Fill the file with what ``operation`` needs before the clock starts."""
    if operation == "raw":
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE bench (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
        conn.executemany("INSERT INTO bench VALUES (?, 0)", [(i,) for i in range(workers)])
        conn.commit()
        conn.close()
        return
    create_schema(path)
    if operation in ("put_run", "patch_run"):
        state = SqliteStateStore.open(path)
        for me in range(workers):
            state.put_run(RunKey("bench", f"run-{me}"), {"step": 0}, expected_version=0)
        state.close()
    elif operation == "claim+complete":
        queue = SqliteWorkQueue.open(path)
        for i in range(workers * n):
            queue.enqueue(f"tenant-{i % 16}", {"i": i})
        queue.close()


def _sync_ops(path: str, operation: str, me: int, n: int) -> None:
    key = RunKey("bench", f"run-{me}")
    if operation in ("put_run", "patch_run"):
        state = SqliteStateStore.open(path)
        for version in range(1, n + 1):
            if operation == "put_run":
                state.put_run(key, {"step": version}, expected_version=version)
            else:
                state.patch_run(key, CounterDelta(input_tokens=1, iterations=1))
        state.close()
    elif operation in ("enqueue", "claim+complete"):
        queue = SqliteWorkQueue.open(path)
        for i in range(n):
            if operation == "enqueue":
                queue.enqueue(f"tenant-{i % 16}", {"i": i})
            else:
                lease = queue.claim(f"w{me}")
                assert lease is not None
                queue.complete(lease.tenant, lease.item_id, token=lease.token)
        queue.close()
    else:
        store = SqliteStore.open(path)
        exe = Execution(id=f"exe-{me}", definition_id="bench")
        for i in range(n):
            exe.context["i"] = i
            store.commit(exe, emits=[("target", Event(id=f"e-{me}-{i}", name="tick"))])
        store.close()


async def _async_ops(path: str, operation: str, me: int, n: int) -> None:
    key = RunKey("bench", f"run-{me}")
    if operation in ("put_run", "patch_run"):
        state = await AsyncSqliteStateStore.open(path)
        for version in range(1, n + 1):
            if operation == "put_run":
                await state.put_run(key, {"step": version}, expected_version=version)
            else:
                await state.patch_run(key, CounterDelta(input_tokens=1, iterations=1))
        await state.aclose()
    elif operation in ("enqueue", "claim+complete"):
        queue = await AsyncSqliteWorkQueue.open(path)
        for i in range(n):
            if operation == "enqueue":
                await queue.enqueue(f"tenant-{i % 16}", {"i": i})
            else:
                lease = await queue.claim(f"w{me}")
                assert lease is not None
                await queue.complete(lease.tenant, lease.item_id, token=lease.token)
        await queue.aclose()
    else:
        store = await AsyncSqliteStore.open(path)
        exe = Execution(id=f"exe-{me}", definition_id="bench")
        for i in range(n):
            exe.context["i"] = i
            await store.commit(exe, emits=[("target", Event(id=f"e-{me}-{i}", name="tick"))])
        await store.aclose()


def _run(path: str, operation: str, twin: str, me: int, n: int) -> None:
    if operation == "raw":
        _raw(path, me, n)
    elif twin == "sync":
        _sync_ops(path, operation, me, n)
    else:
        asyncio.run(_async_ops(path, operation, me, n))


def _child(path: str, operation: str, twin: str, me: int, n: int, pipe: Pipe) -> None:
    pipe.send("ready")  # imports done: the clock starts when every child is ready
    pipe.recv()
    start = time.perf_counter()
    _run(path, operation, twin, me, n)
    pipe.send(time.perf_counter() - start)


def measure(operation: str, twin: str, workers: int, n: int) -> float:
    """Ops/s of ``operation`` in ``workers`` processes on one new file (1: this process)."""
    with tempfile.TemporaryDirectory(prefix="runyard-bench-") as tmp:
        path = str(Path(tmp) / "bench.db")
        _prepare(path, operation, workers, n)
        if workers == 1:
            start = time.perf_counter()
            _run(path, operation, twin, 0, n)
            return n / (time.perf_counter() - start)
        pipes = [SPAWN.Pipe() for _ in range(workers)]
        children = [
            SPAWN.Process(target=_child, args=(path, operation, twin, me, n, pipes[me][1]))
            for me in range(workers)
        ]
        for child in children:
            child.start()
        for parent, _ in pipes:
            parent.recv()
        start = time.perf_counter()
        for parent, _ in pipes:
            parent.send("go")
        for parent, _ in pipes:
            parent.recv()
        elapsed = time.perf_counter() - start
        for child in children:
            child.join()
        return workers * n / elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=400, help="operations per process per cell")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    print(
        f"runyard SQLite benchmark: {args.ops} ops per process per cell, {os.cpu_count()} CPUs, "
        f"Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}, "
        "WAL + synchronous=FULL, temp dir "
        f"{tempfile.gettempdir()}"
    )
    print("\n| twin | operation | processes | ops/s | raw UPDATE+COMMIT ops/s | ratio |")
    print("| --- | --- | --- | --- | --- | --- |")
    figures: list[dict[str, Any]] = []
    for workers in args.processes:
        for twin in ("sync", "async"):
            for operation in OPERATIONS:
                # The baseline is measured right before each cell: the disk's fsync time drifts.
                raw = measure("raw", "sync", workers, args.ops)
                rate = measure(operation, twin, workers, args.ops)
                figures.append(
                    {
                        "twin": twin,
                        "operation": operation,
                        "processes": workers,
                        "ops_per_second": round(rate, 1),
                        "raw_ops_per_second": round(raw, 1),
                        "ratio": round(rate / raw, 3),
                        "single_statement": operation in SINGLE_STATEMENT,
                    }
                )
                print(
                    f"| {twin} | {operation} | {workers} | {rate:,.0f} | {raw:,.0f} "
                    f"| {rate / raw:.2f} |"
                )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"figures": figures}, indent=2) + "\n")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
