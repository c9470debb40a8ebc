"""SQLite benchmark (`make bench-sqlite`): ops/s of both twins beside a raw sqlite3 write.

Every cell runs on a fresh file in a temporary directory and is compared with a baseline
measured in the same run, on the same file, in the same processes, with the stores' durable
settings (WAL, ``synchronous=FULL``, every write in ``BEGIN IMMEDIATE``): a raw ``sqlite3``
single-row UPDATE followed by COMMIT (and, for the async twin, the same sent to aiosqlite's
thread in one trip: the floor of any store built on aiosqlite, its ratio to the raw sqlite3
write reported as ``raw_aiosqlite_floor_ratio``). The
twin and the raw write take turns of 20 operations, so both see the same disk (a VM's fsync time
drifts by several times within a minute). Operations: put_run (CAS update), patch_run, enqueue,
claim+complete (two writes), an execution commit (CAS plus one outbox entry), and the batched
enqueue_many and claim_many+complete_many (16 items a call; their figures count items), each for
the sync and the async twin, in 1 and 4 processes on one file (4 processes: all on the same side
at once, a barrier between turns; a side's rate is all operations over the wall time of its
turns). Each cell also keeps the median of the per-turn ratios and, in 1 process, the WAL pages
one operation of the sync twin appends beside the raw write's (what a commit costs the disk,
whatever the load), and, for put_run, patch_run and enqueue, the floor: the same SQL sent
through bare ``sqlite3`` (no runyard Python) against the raw write, in turns on a new file.
Prints Markdown tables and writes ``sqlite.json`` and ``sqlite.png`` (the ratios) through
``benchmarks/_report.py`` into ``--out-dir``.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection as Pipe
from pathlib import Path
from typing import Any

import aiosqlite
from runyard import RunKey
from runyard.sqlite import (
    SqliteStateStore,
    SqliteWorkQueue,
    create_schema,
)

from benchmarks._report import write_report
from benchmarks.sqlite_operations import (
    CLAIM_MANY,
    OPERATIONS,
    SQL_ONLY,
    AsyncOperations,
    SqlOnly,
    SyncOperations,
)

SINGLE_STATEMENT = ("put_run", "patch_run", "enqueue")
SPAWN = multiprocessing.get_context("spawn")


CHUNK = 20  # ops per turn: the store and the raw write take turns, so both see the same disk


def _prepare(path: str, operation: str, workers: int, n: int) -> None:
    """Create the schema, the raw write's table and what ``operation`` needs, untimed."""
    create_schema(path)
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE bench (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
    conn.executemany("INSERT INTO bench VALUES (?, 0)", [(i,) for i in range(workers)])
    conn.commit()
    conn.close()
    if operation in ("put_run", "patch_run"):
        state = SqliteStateStore.open(path)
        for me in range(workers):
            state.put_run(RunKey("bench", f"run-{me}"), {"step": 0}, expected_version=0)
        state.close()
    elif operation in ("claim+complete", CLAIM_MANY):
        queue = SqliteWorkQueue.open(path)
        for i in range(workers * n):
            queue.enqueue(f"tenant-{i % 16}", {"i": i})
        queue.close()


# The stores' durable settings, for the baseline too: WAL, synchronous=FULL, BEGIN IMMEDIATE.
PRAGMAS = ("PRAGMA journal_mode = WAL", "PRAGMA synchronous = FULL")


class _Raw:
    """The baseline: one single-row UPDATE and COMMIT on the same file, with the stores'
    settings (the driver opens ``BEGIN IMMEDIATE`` before the UPDATE)."""

    def __init__(self, path: str, me: int) -> None:
        self.conn = sqlite3.connect(path, timeout=30, isolation_level="IMMEDIATE")
        for pragma in PRAGMAS:
            self.conn.execute(pragma)
        self.me = me

    def run(self, k: int) -> None:
        for _ in range(k):
            self.conn.execute("UPDATE bench SET n = n + 1 WHERE id = ?", (self.me,))
            self.conn.commit()


def _raw_write(conn: sqlite3.Connection, me: int) -> None:
    conn.execute("UPDATE bench SET n = n + 1 WHERE id = ?", (me,))
    conn.commit()


class _RawAsync:
    """The async baseline: the same UPDATE and COMMIT on aiosqlite's thread, sent in one trip
    (one call of a function there, as the async twin sends a whole transaction): the least
    any store built on aiosqlite can do per write. Its rate over the raw sqlite3 write
    (``raw_aiosqlite_floor_ratio``) bounds the async twin's ratio."""

    def __init__(self, me: int) -> None:
        self.me = me

    async def open(self, path: str) -> None:
        self.conn = await aiosqlite.connect(path, timeout=30, isolation_level="IMMEDIATE")
        for pragma in PRAGMAS:
            await self.conn.execute(pragma)

    async def run(self, k: int) -> None:
        # aiosqlite has no public call for running a function on its thread; _execute is
        # what its own methods use (and what runyard's async twin uses).
        for _ in range(k):
            await self.conn._execute(_raw_write, self.conn._conn, self.me)  # type: ignore[no-untyped-call]

    async def close(self) -> None:
        await self.conn.close()


Turn = tuple[float, float, float]  # seconds of one turn: raw sqlite3, twin, raw aiosqlite


class _Phases:
    """Every process starts each turn together; a turn's time runs to the last one's end."""

    def __init__(self, barrier: Any) -> None:
        self.barrier = barrier

    def mark(self) -> float:
        if self.barrier is not None:
            self.barrier.wait()
        return time.perf_counter()


def _sync_turns(path: str, operation: str, me: int, n: int, phases: _Phases) -> list[Turn]:
    raw, twin = _Raw(path, me), SyncOperations(path, operation, me)
    turns = []
    for start in range(0, n, CHUNK):
        k = min(CHUNK, n - start)
        t0 = phases.mark()
        raw.run(k)
        t1 = phases.mark()
        twin.run(k)
        t2 = phases.mark()
        turns.append((t1 - t0, t2 - t1, 0.0))
    twin.close()
    return turns


async def _async_turns(path: str, operation: str, me: int, n: int, phases: _Phases) -> list[Turn]:
    raw, twin, raw_async = _Raw(path, me), AsyncOperations(operation, me), _RawAsync(me)
    await twin.open(path)
    await raw_async.open(path)
    turns = []
    for start in range(0, n, CHUNK):
        k = min(CHUNK, n - start)
        t0 = phases.mark()
        raw.run(k)
        t1 = phases.mark()
        await twin.run(k)
        t2 = phases.mark()
        await raw_async.run(k)
        t3 = phases.mark()
        turns.append((t1 - t0, t2 - t1, t3 - t2))
    await twin.close()
    await raw_async.close()
    return turns


def _turns(path: str, operation: str, twin: str, me: int, n: int, barrier: Any) -> list[Turn]:
    phases = _Phases(barrier)
    if twin == "sync":
        return _sync_turns(path, operation, me, n, phases)
    return asyncio.run(_async_turns(path, operation, me, n, phases))


def _child(path: str, operation: str, twin: str, me: int, n: int, barrier: Any, pipe: Pipe) -> None:
    pipe.send(_turns(path, operation, twin, me, n, barrier))


@dataclass(frozen=True)
class Cell:
    """One cell's figures: ops/s of each side, and the median over turns of raw/twin time."""

    twin: float
    raw: float
    raw_async: float | None
    turn_ratio_median: float


def measure(operation: str, twin: str, workers: int, n: int) -> Cell:
    """Ops/s of ``operation`` (twin, raw sqlite3, raw aiosqlite: the async twin only) in
    ``workers`` processes on one new file.

    The processes take turns of CHUNK operations between the raw write and the twin, all
    processes on the same side at once (a barrier between turns); a side's rate is all
    processes' operations over the wall time of its turns. The median of the per-turn ratios
    (raw time / twin time of adjacent turns) is also kept: it is less moved by a burst of
    other work on a shared machine than the ratio of the totals.
    """
    with tempfile.TemporaryDirectory(prefix="runyard-bench-") as tmp:
        path = str(Path(tmp) / "bench.db")
        _prepare(path, operation, workers, n)
        if workers == 1:
            times = [_turns(path, operation, twin, 0, n, None)]
        else:
            barrier = SPAWN.Barrier(workers)
            pipes = [SPAWN.Pipe(duplex=False) for _ in range(workers)]
            children = [
                SPAWN.Process(
                    target=_child, args=(path, operation, twin, me, n, barrier, pipes[me][1])
                )
                for me in range(workers)
            ]
            for child in children:
                child.start()
            times = [receiver.recv() for receiver, _ in pipes]
            for child in children:
                child.join()
        # Every process measured the same turns (barriers): a turn's wall time is the longest.
        turns = [
            tuple(max(side) for side in zip(*same, strict=True))
            for same in zip(*times, strict=True)
        ]
        raw, twin_, raw_async = (sum(turn[i] for turn in turns) for i in range(3))
        return Cell(
            twin=workers * n / twin_,
            raw=workers * n / raw,
            raw_async=workers * n / raw_async if raw_async else None,
            turn_ratio_median=statistics.median(turn[0] / turn[1] for turn in turns),
        )


def wal_pages(operation: str, n: int) -> tuple[float, float]:
    """WAL pages one ``operation`` of the sync twin appends, and one raw write (a commit appends
    every page it changed once): what a commit costs the disk, whatever the load on the machine."""
    with tempfile.TemporaryDirectory(prefix="runyard-bench-") as tmp:
        path = str(Path(tmp) / "bench.db")
        _prepare(path, operation, 1, n)
        raw, twin = _Raw(path, 0), SyncOperations(path, operation, 0)
        stores = (twin.state, twin.queue, twin.store)
        for conn in (raw.conn, *(store.connection.raw for store in stores)):
            conn.execute("PRAGMA wal_autocheckpoint = 0")
        frame = raw.conn.execute("PRAGMA page_size").fetchone()[0] + 24
        pages = []
        for side in (twin, raw):
            raw.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            side.run(n)
            pages.append((os.path.getsize(path + "-wal") - 32) / frame / n)
        twin.close()
        raw.conn.close()
        return pages[0], pages[1]


def sql_floor(operation: str, n: int) -> tuple[float, float]:
    """The store's own SQL for ``operation`` through bare ``sqlite3`` (SqlOnly: no runyard
    Python) against the raw write, in turns of CHUNK on one new file: its rate over the raw
    write's (all turns), and the median of the per-turn ratios. What the SQL costs, whatever
    the Python around it: a twin's ratio cannot pass this one."""
    with tempfile.TemporaryDirectory(prefix="runyard-bench-") as tmp:
        path = str(Path(tmp) / "bench.db")
        _prepare(path, operation, 1, n)
        raw, sql = _Raw(path, 0), SqlOnly(path, operation, 0)
        turns = []
        for start in range(0, n, CHUNK):
            k = min(CHUNK, n - start)
            t0 = time.perf_counter()
            raw.run(k)
            t1 = time.perf_counter()
            sql.run(k)
            turns.append((t1 - t0, time.perf_counter() - t1))
        sql.close()
        raw.conn.close()
        total = sum(t[0] for t in turns) / sum(t[1] for t in turns)
        return total, statistics.median(t[0] / t[1] for t in turns)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=400, help="operations per process per cell")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--twins", nargs="+", default=["sync", "async"], choices=["sync", "async"])
    parser.add_argument("--operations", nargs="+", default=list(OPERATIONS), choices=OPERATIONS)
    parser.add_argument(
        "--out-dir", type=Path, default=Path("benchmarks/results"), help="sqlite.json/.png go here"
    )
    args = parser.parse_args(argv)
    settings = {
        "ops_per_process": args.ops,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "durability": "WAL, synchronous=FULL, BEGIN IMMEDIATE (stores and baseline)",
        "baseline": "raw single-row UPDATE + COMMIT on the same file, in turns of "
        f"{CHUNK} operations",
        "temp_dir": tempfile.gettempdir(),
    }
    print(
        f"runyard SQLite benchmark: {args.ops} ops per process per cell, {settings['cpus']} "
        f"CPUs, Python {settings['python']}, SQLite {settings['sqlite']}, "
        f"{settings['durability']}, temp dir {settings['temp_dir']}"
    )
    print(
        "\n| twin | operation | processes | ops/s | raw sqlite3 UPDATE+COMMIT ops/s | ratio "
        "| median turn ratio | raw aiosqlite ops/s (one trip) | ratio "
        "| raw aiosqlite / raw sqlite3 |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    figures: dict[str, Any] = {"settings": settings}
    floors: dict[str, tuple[float, float]] = {}
    for workers in args.processes:
        cells = figures[f"{workers} process{'es' if workers > 1 else ''}"] = {}
        for twin in args.twins:
            for operation in args.operations:
                got = measure(operation, twin, workers, args.ops)
                rate, raw, raw_async = got.twin, got.raw, got.raw_async
                cell = {
                    "ops_per_second": round(rate, 1),
                    "raw_ops_per_second": round(raw, 1),
                    "ratio": round(rate / raw, 3),
                    "turn_ratio_median": round(got.turn_ratio_median, 3),
                    "single_statement": operation in SINGLE_STATEMENT,
                }
                if workers == 1:
                    cell["wal_pages_per_op"], cell["raw_wal_pages_per_op"] = (
                        round(pages, 2) for pages in wal_pages(operation, min(args.ops, 100))
                    )
                if workers == 1 and twin == "sync" and operation in SQL_ONLY:
                    floors[operation] = sql_floor(operation, args.ops)
                    cell["sql_only_ratio"], cell["sql_only_turn_ratio_median"] = (
                        round(ratio, 3) for ratio in floors[operation]
                    )
                if raw_async is not None:
                    cell["raw_aiosqlite_ops_per_second"] = round(raw_async, 1)
                    cell["aiosqlite_ratio"] = round(rate / raw_async, 3)
                    cell["raw_aiosqlite_floor_ratio"] = round(raw_async / raw, 3)
                cells.setdefault(twin, {})[operation] = cell
                versus_async = (
                    "| - | - | - |"
                    if raw_async is None
                    else f"| {raw_async:,.0f} | {rate / raw_async:.2f} | {raw_async / raw:.2f} |"
                )
                print(
                    f"| {twin} | {operation} | {workers} | {rate:,.0f} | {raw:,.0f} "
                    f"| {rate / raw:.2f} | {got.turn_ratio_median:.2f} {versus_async}"
                )
    if floors:
        print(
            "\nThe floor: each operation's own SQL through bare sqlite3 (same statement, "
            "parameters and transaction, no runyard Python), 1 process, against the raw write"
        )
        print("\n| operation | SQL-only ratio | median turn ratio |\n| --- | --- | --- |")
        for operation, (total, median) in floors.items():
            print(f"| {operation} | {total:.2f} | {median:.2f} |")
    for path in write_report("sqlite", figures, out_dir=args.out_dir):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
