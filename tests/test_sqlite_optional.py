"""The sync SQLite twin needs only the standard library; the async one names its extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import asyncio, sys
sys.modules["aiosqlite"] = None  # as if the sqlite extra were not installed
from runyard import ConfigurationError, RunKey
from runyard.sqlite import AsyncSqliteStateStore, SqliteStateStore
store = SqliteStateStore.open(sys.argv[1], create_schema=True)
print("sync", store.put_run(RunKey("acme", "r"), {}, expected_version=0).version)
store.close()
try:
    asyncio.run(AsyncSqliteStateStore.open(sys.argv[1]))
except ConfigurationError as exc:
    print("async", exc)
"""


def test_the_sync_twin_runs_without_aiosqlite_and_the_async_twin_names_the_extra(
    tmp_path: Path,
) -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "x.db")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "sync 1"
    assert lines[1].startswith("async ") and "pip install 'runyard[sqlite]'" in lines[1]
