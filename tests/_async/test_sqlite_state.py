"""The SQLite state store's run writes: one trip to the driver, the run read back whole."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pytest
from runyard import CounterDelta, RunKey
from runyard.sqlite import AsyncSqliteStateStore


@pytest.mark.asyncio
async def test_every_run_write_is_one_trip_that_returns_the_stored_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A run write returns nothing and the run is read back before the commit, in the same
    # trip to the driver (aiosqlite's thread).
    state = await AsyncSqliteStateStore.open(tmp_path / "s.db", create_schema=True)
    trips: list[str] = []
    inside: list[str] = []  # a method that calls another (call) is one trip
    connection = state.connection
    for name in ("call", "fetch", "fetch_then_commit", "change_then_read", "script"):
        original = getattr(connection, name)

        async def counted(*args: object, _original: Any = original, _name: str = name) -> Any:
            if not inside:
                trips.append(_name)
            inside.append(_name)
            try:
                return await _original(*args)
            finally:
                inside.pop()

        monkeypatch.setattr(connection, name, counted)
    try:
        await state.verify()  # the schema check is done once, before counting
        key = RunKey("acme", "r1")
        written = []
        for write in (
            partial(state.put_run, key, {"n": 1}, expected_version=0, status="running"),
            partial(state.put_run, key, {"n": 2}, expected_version=1),
            partial(state.put_run, key, [3], expected_version=2, session_id="s1", status="done"),
            partial(state.patch_run, key, CounterDelta(input_tokens=5, cursor=2)),
        ):
            trips.clear()
            written.append(await write())
            assert trips == ["change_then_read"]
        assert [(r.version, r.status, r.session_id) for r in written] == [
            (1, "running", None),
            (2, "running", None),
            (3, "done", "s1"),
            (4, "done", "s1"),
        ]
        assert (written[-1].blob, written[-1].input_tokens, written[-1].cursor) == ([3], 5, 2)
        assert await state.get_run(key) == written[-1]
    finally:
        await state.aclose()
