"""Memory backend: ops/s of both twins beside a plain dict-under-a-lock baseline, same run.

Prints a table and writes ``bench-memory.json`` and ``bench-memory.png`` (the ratios as bars)
into ``--out-dir`` (benchmarks/results by default).
"""

from __future__ import annotations

import argparse
import asyncio
import threading
from collections.abc import Callable
from typing import Any

from runyard import (
    AsyncMemoryStateStore,
    AsyncMemoryWorkQueue,
    CounterDelta,
    MemoryStateStore,
    MemoryWorkQueue,
    RunKey,
)

from benchmarks._report import write_report
from benchmarks._timing import ops_per_second, row

N = 5_000


def baseline(n: int) -> None:
    lock, table = threading.Lock(), {}
    for i in range(n):
        with lock:
            table[("t", f"r{i}")] = {"i": i, "version": 1}


def sync_put(n: int) -> None:
    store = MemoryStateStore()
    for i in range(n):
        store.put_run(RunKey("t", f"r{i}"), {"i": i}, expected_version=0)


def sync_patch(n: int) -> None:
    store = MemoryStateStore()
    key = RunKey("t", "r")
    store.put_run(key, {}, expected_version=0)
    for _ in range(n):
        store.patch_run(key, CounterDelta(input_tokens=1))


def sync_claim_complete(n: int) -> None:
    queue = MemoryWorkQueue()
    for i in range(n):
        queue.enqueue(f"t{i % 10}", {"i": i})
    for _ in range(n):
        lease = queue.claim("w")
        assert lease is not None
        queue.complete(lease.tenant, lease.item_id, token=lease.token)


def async_put(n: int) -> None:
    async def go() -> None:
        store = AsyncMemoryStateStore()
        for i in range(n):
            await store.put_run(RunKey("t", f"r{i}"), {"i": i}, expected_version=0)

    asyncio.run(go())


def async_patch(n: int) -> None:
    async def go() -> None:
        store = AsyncMemoryStateStore()
        key = RunKey("t", "r")
        await store.put_run(key, {}, expected_version=0)
        for _ in range(n):
            await store.patch_run(key, CounterDelta(input_tokens=1))

    asyncio.run(go())


def async_claim_complete(n: int) -> None:
    async def go() -> None:
        queue = AsyncMemoryWorkQueue()
        for i in range(n):
            await queue.enqueue(f"t{i % 10}", {"i": i})
        for _ in range(n):
            lease = await queue.claim("w")
            assert lease is not None
            await queue.complete(lease.tenant, lease.item_id, token=lease.token)

    asyncio.run(go())


CASES: list[tuple[str, str, Callable[[int], None]]] = [
    ("put_run", "sync", sync_put),
    ("put_run", "async", async_put),
    ("patch_run", "sync", sync_patch),
    ("patch_run", "async", async_patch),
    ("enqueue+claim+complete", "sync", sync_claim_complete),
    ("enqueue+claim+complete", "async", async_claim_complete),
]


def main(argv: list[str] | None = None) -> None:
    """Print each operation's ops/s and its ratio to the dict-under-a-lock baseline, and write
    them as JSON and PNG."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--out-dir", default="benchmarks/results", help="where bench-memory.json/.png go"
    )
    args = parser.parse_args(argv)
    base = ops_per_second(baseline, N)
    print(f"memory backend, n={N}; baseline dict write under a lock: {base:,.0f} ops/s")
    figures: dict[str, Any] = {"n": N, "baseline ops/s": base}
    for name, flavour, run in CASES:
        ops = ops_per_second(run, N)
        print(row(name, flavour, ops, base))
        figures[f"{name} {flavour}"] = {"ops/s": ops, "ratio": ops / base}
    for path in write_report("bench-memory", figures, out_dir=args.out_dir):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
