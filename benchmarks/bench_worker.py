"""The worker against the bare claim -> complete loop (``make bench-worker``).

For each backend (memory, the machine's Redis and PostgreSQL) and twin: burn down N no-op jobs
at concurrency C with the bare loop (C tasks or threads doing claim -> complete), then with the
worker unbatched and batched (batched only where the queue declares ``batched_operations``),
started on the backlog (its wake-up opened after the enqueues), and that again, ``--rounds``
times in all (default 3; each round in a rotated order); the median jobs/s and CPU per job of
each, and the median of the rounds' ratios to the bare loop of the same round (each round's
kept too: on a shared VM one burn-down's rate moves by a tenth or more from one to the next).
The printed "x bare" is that median of ratios, not the ratio of the medians. Then, with an idle
worker (default settings, woken by the queue's hint), the delay from ``enqueue`` to the
handler's start (p50/p99; measured from before the enqueue call, and split: the enqueue call
itself, its commit included; the start and the hint's arrival at the worker's wake-up counted
from the enqueue's return; the claim round trips; each enqueue sent once the worker is seen
idle: its last job settled, no queue call in flight, its wake-up waiting) and the calls the
idle worker makes per second (queue calls and wake-up waits: on Redis each is one command; a
PostgreSQL wake-up wait sends nothing, it reads its LISTEN connection). Where the queue's
enqueue does not send its wake-up hint yet, the benchmark sends it right after each enqueue
(one extra command) and says so. The idle latency's baseline, in the same run: the same path
through the bare driver (``benchmarks/worker_idle_bare.py``; ``p50_x_bare``). Writes
``worker.json`` and ``worker.png`` (the ratios) into ``--out-dir`` through
``benchmarks/_report.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from typing import Any

from runyard.worker import AsyncWorker, Job, Worker

from benchmarks._report import write_report
from benchmarks.worker_idle_bare import bare_idle
from benchmarks.worker_lanes import Counting, Lane, cuts


def _cell(n: int, wall: float, cpu: float) -> dict[str, float]:
    return {"jobs_per_s": n / wall, "cpu_us_per_job": cpu / n * 1e6}


def _declares_batched(queue: Any) -> bool:
    return bool(getattr(getattr(queue, "capabilities", None), "batched_operations", False))


async def _async_burn(lane: Lane, n: int, conc: int, mode: str) -> dict[str, float] | None:
    queue, _ = await lane.open_async(wakeup=False)
    if mode == "batched" and not _declares_batched(queue):
        await queue.aclose()
        return None
    for i in range(n):
        await queue.enqueue("bench", {"i": i})
    # The worker starts on the backlog: its wake-up listens from now on (one listening through
    # the enqueues would read their 10,000 hints during the burn-down; see docs/worker.md).
    wakeup = await lane.wakeup_async() if mode != "bare" else None
    wall, cpu = time.perf_counter(), time.process_time()
    if mode == "bare":

        async def loop() -> None:
            while (lease := await queue.claim("bare")) is not None:
                await queue.complete(lease)

        await asyncio.gather(*(loop() for _ in range(conc)))
    else:

        async def noop(job: Job) -> None:
            pass

        worker = AsyncWorker(
            queue, noop, concurrency=conc, batched=mode == "batched", wakeup=wakeup
        )
        await worker.run_until_idle()
    out = _cell(n, time.perf_counter() - wall, time.process_time() - cpu)
    await queue.aclose()
    return out


def _sync_burn(lane: Lane, n: int, conc: int, mode: str) -> dict[str, float] | None:
    queue, _ = lane.open_sync(wakeup=False)
    if mode == "batched" and not _declares_batched(queue):
        queue.close()
        return None
    for i in range(n):
        queue.enqueue("bench", {"i": i})
    wakeup = lane.wakeup_sync() if mode != "bare" else None  # listening from now on
    wall, cpu = time.perf_counter(), time.process_time()
    if mode == "bare":

        def loop() -> None:
            while (lease := queue.claim("bare")) is not None:
                queue.complete(lease)

        threads = [threading.Thread(target=loop) for _ in range(conc)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        worker = Worker(
            queue, lambda job: None, concurrency=conc, batched=mode == "batched", wakeup=wakeup
        )
        worker.run_until_idle()
    out = _cell(n, time.perf_counter() - wall, time.process_time() - cpu)
    queue.close()
    return out


def _summary(
    moments: list[tuple[float, float, float]],
    woke: list[float],
    claims: list[float],
    calls: int,
    idle_seconds: float,
) -> dict[str, Any]:
    """The enqueue -> handler start latency (from before the enqueue call), and split: the
    enqueue call itself (its commit included), the handler start counted from the enqueue's
    return, the hint read by the worker's wake-up counted from the enqueue's return (below
    zero when it was read before the producer had read the commit's reply), and the claim
    round trips of the latency phase; then the idle worker's calls per second."""
    out: dict[str, Any] = cuts([start - sent for sent, _, start in moments])
    out["enqueue call"] = cuts([done - sent for sent, done, _ in moments])
    out["start from enqueue return"] = cuts([start - done for _, done, start in moments])
    hinted = []
    for sent, done, start in moments:
        first = next((w for w in woke if sent <= w <= start), None)
        if first is not None:
            hinted.append(first - done)
    if hinted:
        out["hint from enqueue return"] = cuts(hinted)
    if claims:
        out["claim call"] = cuts(claims)
    out["idle_calls_per_s"] = calls / idle_seconds
    return out


IDLE_POLL = 0.001  # s between looks at the worker while waiting for it to go idle
IDLE_LOOKS = 3  # looks in a row that find it idle
IDLE_PATIENCE = 10.0  # s at most: a worker not idle by then is a failed run


def _quiet(
    worker: Worker | AsyncWorker, settled: int, queue: Counting, wakeup: Counting | None
) -> bool:
    """Whether the worker looks idle: its ``settled`` jobs completed, no queue call in
    flight, its wake-up listener waiting. Looked at ``IDLE_LOOKS`` times in a row (the
    loop's claim after a settle starts within microseconds of the settle's return) before
    each enqueue: one sent earlier would time the worker's own next claim, not the start of
    an idle worker woken by its hint."""
    return (
        worker.stats().completed >= settled
        and queue.busy == 0
        and (wakeup is None or wakeup.busy > 0)
    )


def _idle_sync(lane: Lane, samples: int, idle_seconds: float) -> dict[str, float]:
    """Enqueue -> handler start with an idle sync worker; then its calls per idle second."""
    queue, wakeup = lane.open_sync()
    counted, counted_wakeup = Counting(queue), Counting(wakeup) if wakeup is not None else None
    started = threading.Event()
    seen: list[float] = []

    def handler(job: Job) -> None:
        seen.append(time.perf_counter())
        started.set()

    worker = Worker(counted, handler, wakeup=counted_wakeup)  # type: ignore[arg-type]
    runner = threading.Thread(target=worker.run)
    runner.start()
    hint = lane.hint()
    producer = queue if lane.name == "memory" else lane.open_sync(wakeup=False)[0]
    moments = []
    for i in range(samples):
        started.clear()
        looks, deadline = 0, time.monotonic() + IDLE_PATIENCE
        while looks < IDLE_LOOKS and time.monotonic() < deadline:
            looks = looks + 1 if _quiet(worker, i, counted, counted_wakeup) else 0
            time.sleep(IDLE_POLL)
        if looks < IDLE_LOOKS:
            raise RuntimeError(
                f"the {lane.name} worker was not idle {IDLE_PATIENCE:g} s after job {i}"
            )
        t0 = time.perf_counter()
        producer.enqueue("bench", {"i": i})
        t1 = time.perf_counter()
        if hint is not None:
            hint()
        started.wait(10)
        moments.append((t0, t1, seen[-1]))
    time.sleep(0.05)
    woke, claims = list(counted_wakeup.woke if counted_wakeup else []), list(counted.claims)
    counted.calls = 0
    if counted_wakeup is not None:
        counted_wakeup.calls = 0
    time.sleep(idle_seconds)
    calls = counted.calls + (counted_wakeup.calls if counted_wakeup else 0)
    worker.stop()
    runner.join()
    if producer is not queue:
        producer.close()
    queue.close()
    return _summary(moments, woke, claims, calls, idle_seconds)


async def _idle_async(lane: Lane, samples: int, idle_seconds: float) -> dict[str, float]:
    """Enqueue -> handler start with an idle async worker; then its calls per idle second."""
    queue, wakeup = await lane.open_async()
    counted, counted_wakeup = Counting(queue), Counting(wakeup) if wakeup is not None else None
    started = asyncio.Event()
    seen: list[float] = []

    async def handler(job: Job) -> None:
        seen.append(time.perf_counter())
        started.set()

    worker = AsyncWorker(counted, handler, wakeup=counted_wakeup)  # type: ignore[arg-type]
    runner = asyncio.create_task(worker.run())
    hint = lane.hint()
    producer = queue if lane.name == "memory" else (await lane.open_async(wakeup=False))[0]
    moments = []
    for i in range(samples):
        started.clear()
        looks, deadline = 0, time.monotonic() + IDLE_PATIENCE
        while looks < IDLE_LOOKS and time.monotonic() < deadline:
            looks = looks + 1 if _quiet(worker, i, counted, counted_wakeup) else 0
            await asyncio.sleep(IDLE_POLL)
        if looks < IDLE_LOOKS:
            raise RuntimeError(
                f"the {lane.name} worker was not idle {IDLE_PATIENCE:g} s after job {i}"
            )
        t0 = time.perf_counter()
        await producer.enqueue("bench", {"i": i})
        t1 = time.perf_counter()
        if hint is not None:
            hint()
        await asyncio.wait_for(started.wait(), 10)
        moments.append((t0, t1, seen[-1]))
    await asyncio.sleep(0.05)
    woke, claims = list(counted_wakeup.woke if counted_wakeup else []), list(counted.claims)
    counted.calls = 0
    if counted_wakeup is not None:
        counted_wakeup.calls = 0
    await asyncio.sleep(idle_seconds)
    calls = counted.calls + (counted_wakeup.calls if counted_wakeup else 0)
    worker.stop()
    await runner
    if producer is not queue:
        await producer.aclose()
    await queue.aclose()
    return _summary(moments, woke, claims, calls, idle_seconds)


MODES = ("bare", "unbatched", "batched")


def _burns(lane: Lane, twin: str, args: argparse.Namespace) -> dict[str, Any]:
    """``args.rounds`` rounds of the three burn-downs, one after another in each round (so a
    worker's burn-down and the bare loop it is compared with run seconds, not minutes,
    apart), each round in another order (rotated: no mode is always first, after the
    process's own start-up); each mode's median jobs/s and CPU per job, and the median of
    the rounds' ratios to the bare loop of the same round (and every round's, in
    ``round_ratios``)."""
    rounds: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    for turn in range(args.rounds):
        for mode in MODES[turn % len(MODES) :] + MODES[: turn % len(MODES)]:
            lane.fresh()
            if twin == "async":
                cell = asyncio.run(_async_burn(lane, args.jobs, args.concurrency, mode))
            else:
                cell = _sync_burn(lane, args.jobs, args.concurrency, mode)
            if cell is not None:
                rounds[mode].append(cell)
    cells: dict[str, Any] = {}
    for mode in MODES:
        done = rounds[mode]
        if not done:
            cells[mode] = {"skipped": "the queue does not declare batched_operations"}
            print(f"{lane.name:<9}{twin:<6}{mode:<10}{'n/a (not declared)':>30}")
            continue
        cell: dict[str, Any] = {
            key: statistics.median(c[key] for c in done) for key in ("jobs_per_s", "cpu_us_per_job")
        }
        if mode != "bare":
            each = [
                c["jobs_per_s"] / b["jobs_per_s"] for c, b in zip(done, rounds["bare"], strict=True)
            ]
            cell["ratio"] = statistics.median(each)
            cell["round_ratios"] = [round(r, 3) for r in each]
        cells[mode] = cell
        spread = (
            f"  rounds {min(cell['round_ratios']):.2f}-{max(cell['round_ratios']):.2f}"
            if len(done) > 1 and mode != "bare"
            else ""
        )
        print(
            f"{lane.name:<9}{twin:<6}{mode:<10}{cell['jobs_per_s']:>10.0f}"
            f"{cell['cpu_us_per_job']:>12.0f}{cell.get('ratio', 1.0):>8.2f}{spread}"
        )
    return cells


def _lane(lane: Lane, args: argparse.Namespace) -> dict[str, Any]:
    figures: dict[str, Any] = {"enqueue_sends_hint": lane.enqueue_hints}
    bare = figures["bare idle"] = bare_idle(lane, args.samples)
    if bare is not None:
        print(
            f"{lane.name:<9}bare  idle driver: send -> taken p50 {bare['p50_ms']:.2f} ms, "
            f"p99 {bare['p99_ms']:.2f} ms"
        )
    for twin in ("async", "sync"):
        cells = _burns(lane, twin, args)
        if twin == "async":
            idle = asyncio.run(_idle_async(lane, args.samples, args.idle_seconds))
        else:
            idle = _idle_sync(lane, args.samples, args.idle_seconds)
        if bare is not None:
            idle["p50_x_bare"] = idle["p50_ms"] / bare["p50_ms"]
        cells["idle worker"] = idle
        hinted = "" if lane.enqueue_hints else " (hint sent by the benchmark)"
        print(
            f"{lane.name:<9}{twin:<6}idle worker: enqueue->start p50 {idle['p50_ms']:.2f} ms, "
            f"p99 {idle['p99_ms']:.2f} ms; {idle['idle_calls_per_s']:.1f} calls/s{hinted}"
            + (f"; p50 {idle['p50_x_bare']:.2f}x the bare driver's" if bare is not None else "")
        )
        for part in (
            "enqueue call",
            "start from enqueue return",
            "hint from enqueue return",
            "claim call",
        ):
            if part in idle:
                print(
                    f"{'':<15}{part}: p50 {idle[part]['p50_ms']:.2f} ms, "
                    f"p99 {idle[part]['p99_ms']:.2f} ms"
                )
        figures[twin] = cells
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", "--items", dest="jobs", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--rounds", type=int, default=3, help="burn-downs per mode, taken in turns; medians"
    )
    parser.add_argument("--samples", type=int, default=200, help="latency samples per twin")
    parser.add_argument("--idle-seconds", type=float, default=3.0)
    parser.add_argument("--backends", default="memory,redis,postgres")
    parser.add_argument("--out-dir", default="benchmarks/results")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    results: dict[str, Any] = {
        "jobs": args.jobs,
        "concurrency": args.concurrency,
        "rounds": args.rounds,
    }
    print(
        f"worker burn-down: {args.jobs} no-op jobs at concurrency {args.concurrency}, "
        f"{args.rounds} rounds (medians)"
    )
    print(f"{'backend':<9}{'twin':<6}{'mode':<10}{'jobs/s':>10}{'cpu us/job':>12}{'x bare':>8}")
    for name in args.backends.split(","):
        lane = Lane(name)
        try:
            results[name] = _lane(lane, args)
        finally:
            lane.drop()
    for path in write_report("worker", results, out_dir=args.out_dir):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
