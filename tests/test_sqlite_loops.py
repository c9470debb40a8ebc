"""An async SQLite store belongs to the event loop that opened it (docs/sqlite.md): used on
another loop after that one shut down, it says so with a ConfigurationError (not the
retryable "closed" error, which no retry would undo); dropped without ``aclose()`` while its
loop runs, it is closed once collected, its thread with it (it was kept until the loop ended)."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from pathlib import Path

import pytest
from runyard import AsyncYard, RunKey
from runyard.errors import ConfigurationError

SAFETY = 30.0  # seconds: a bound on the waits below, never a measurement


def test_a_store_used_after_the_loop_that_opened_it_shut_down_names_the_cause(
    tmp_path: Path,
) -> None:
    yard = asyncio.run(AsyncYard.from_url(f"sqlite:///{tmp_path / 'a.db'}"))
    with pytest.raises(ConfigurationError, match="event loop that opened it shut down"):
        asyncio.run(yard.queue.enqueue("acme", {"n": 1}))
    with pytest.raises(ConfigurationError, match="event loop that opened it shut down"):
        asyncio.run(yard.state.put_run(RunKey("acme", "r1"), {}, expected_version=0))
    asyncio.run(yard.aclose())  # closing it again is harmless


def test_stores_dropped_without_aclose_are_closed_while_their_loop_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"

    errors: list[dict[str, object]] = []  # what asyncio reports (a task destroyed pending...)

    async def main() -> tuple[int, int, int]:
        asyncio.get_running_loop().set_exception_handler(lambda _, context: errors.append(context))
        before = threading.active_count()
        for n in range(10):
            yard = await AsyncYard.from_url(url)
            await yard.queue.enqueue("acme", {"n": n})
            del yard
            gc.collect()
        opened = threading.active_count()  # some may be closed already
        deadline = time.monotonic() + SAFETY
        while threading.active_count() > before and time.monotonic() < deadline:
            gc.collect()
            await asyncio.sleep(0.01)
        return before, opened, threading.active_count()

    with pytest.warns(ResourceWarning):  # aiosqlite's, for each connection collected unclosed
        before, opened, after = asyncio.run(main())
    assert after == before, (before, opened, after)
    gc.collect()  # a closing task left pending would be reported as it is collected
    assert errors == [], errors

    async def count() -> int:
        async with await AsyncYard.from_url(url) as yard:
            return (await yard.queue.stats()).ready

    assert asyncio.run(count()) == 10  # every enqueue committed
