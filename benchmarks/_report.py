"""The benchmarks' report: the figures as JSON and their ratios against the baseline as a PNG.

Every benchmark calls ``write_report(name, figures, out_dir=...)`` once, at the end, with all
it measured. ``figures`` is a JSON-able mapping, nested as the benchmark likes; each number
stored under a key named ``ratio`` (or ending in ``ratio``) is one bar of the chart, labelled
with the keys leading to it, e.g. ``{"redis": {"append ops/s": 9000.0, "raw ops/s": 20000.0,
"ratio": 0.45}}`` draws the bar ``redis`` at 0.45. The chart marks the baseline (1.0).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display, no GUI toolkit

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["ratios", "write_report"]


def ratios(figures: Mapping[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[str, float]]:
    """Yield ``(label, ratio)`` for each number under a ``*ratio`` key, in the figures' order."""
    for key, value in figures.items():
        if isinstance(value, Mapping):
            yield from ratios(value, (*path, key))
        elif key.endswith("ratio") and isinstance(value, int | float):
            label = path if key == "ratio" else (*path, key)
            yield " / ".join(label) or key, float(value)


def write_report(
    name: str, figures: Mapping[str, Any], *, out_dir: str | Path
) -> tuple[Path, Path]:
    """Write ``<name>.json`` (the figures) and ``<name>.png`` (the ratios as bars, with the
    baseline at 1.0) into ``out_dir``, made if missing; return both paths.

    Raises ValueError when ``figures`` holds no ratio: a benchmark reports against a baseline.
    """
    bars = list(ratios(figures))
    if not bars:
        raise ValueError(f"{name}: no '*ratio' figure to chart (ratios against the baseline)")
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    json_path, png_path = folder / f"{name}.json", folder / f"{name}.png"
    json_path.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")

    figure = Figure(figsize=(max(4.0, 1.2 * len(bars) + 2), 4), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    labels, values = [label for label, _ in bars], [value for _, value in bars]
    drawn = axes.bar(labels, values, color="tab:blue")
    axes.bar_label(drawn, fmt="%.2f")
    axes.axhline(1.0, color="tab:red", linestyle="--", label="baseline")
    axes.set_ylabel("ratio to the baseline")
    axes.set_title(name)
    axes.legend()
    axes.tick_params(axis="x", labelrotation=20)
    figure.savefig(png_path, format="png", dpi=100)
    return json_path, png_path
