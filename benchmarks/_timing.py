"""Small timing helpers shared by the benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable


def ops_per_second(run: Callable[[int], None], n: int, repeats: int = 3) -> float:
    """Best of ``repeats`` runs of ``run(n)``, as operations per second."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run(n)
        best = min(best, time.perf_counter() - start)
    return n / best


def row(name: str, flavour: str, ops: float, baseline: float) -> str:
    """One aligned line: operation, flavour, ops/s, and the ratio to the baseline."""
    return f"{name:<22} {flavour:<6} {ops:>12,.0f} ops/s   {ops / baseline:6.3f} x baseline"
