"""Handlers the worker subprocess tests run: each notes its start and end in a log file and
waits at a gate (a file) the test opens, so the test decides when jobs may finish."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from runyard.worker import Job

__all__ = ["gated", "gated_sync", "notes"]


def _dir() -> Path:
    return Path(os.environ["RUNYARD_TEST_WORKER_DIR"])


def _note(line: str) -> None:
    with open(_dir() / "log", "a") as log:  # one short append: atomic between processes
        log.write(line + "\n")


def notes(directory: Path) -> list[tuple[str, str]]:
    """The (event, item id) lines written so far."""
    path = directory / "log"
    if not path.exists():
        return []
    return [tuple(line.split(" ", 1)) for line in path.read_text().splitlines()]  # type: ignore[misc]


async def gated(job: Job) -> None:
    """Note the start, wait for the gate, note the end."""
    _note(f"start {job.item_id}")
    while not (_dir() / "release").exists():
        await asyncio.sleep(0.01)
    _note(f"done {job.item_id}")


def gated_sync(job: Job) -> None:
    """The thread twin of ``gated``; returns early once the worker gives the job up."""
    _note(f"start {job.item_id}")
    while not (_dir() / "release").exists():
        if job.cancelled:
            return
        time.sleep(0.01)
    _note(f"done {job.item_id}")
