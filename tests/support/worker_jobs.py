"""Handlers the worker subprocess tests run: each notes its start and end in a log file and
waits at a gate (a file) the test opens, so the test decides when jobs may finish; the
stubborn ones never finish, whatever the worker does."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from runyard.worker import Job, PermanentFailure

__all__ = ["gated", "gated_sync", "notes", "picky", "picky_sync", "stubborn", "stubborn_sync"]


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


async def stubborn(job: Job) -> None:
    """Note the start, then never end: every cancellation is caught and ignored."""
    _note(f"start {job.item_id}")
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            _note(f"ignored-cancel {job.item_id}")


def stubborn_sync(job: Job) -> None:
    """The thread twin of ``stubborn``: never returns, whatever ``job.cancelled`` says."""
    _note(f"start {job.item_id}")
    while True:
        time.sleep(0.05)


def picky_sync(job: Job) -> None:
    """Dead-letters an item whose payload says ``permanent``; fails any other on its first
    attempt (a retry), then completes it."""
    if job.payload.get("permanent"):
        raise PermanentFailure(f"refused {job.item_id}")
    if job.attempt == 1:
        raise RuntimeError(f"first attempt of {job.item_id}")
    _note(f"done {job.item_id}")


async def picky(job: Job) -> None:
    """The async twin of ``picky_sync``."""
    picky_sync(job)
