"""SQLite retention: prune's bounded statements, the retention cutoff, and the schema versions
that introduced them (state 3, executions 2)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from runyard import ConfigurationError, ManualClock
from runyard.sqlite import AsyncSqliteStateStore, AsyncSqliteStore, SqliteTables
from runyard.sqlite.statements_executions import execution_statements
from runyard.sqlite.statements_state import state_statements

from tests._async.retention_support import (
    marks_are_pruned_by_age_not_by_id,
    marks_inside_the_retention_are_kept,
)


@pytest.mark.asyncio
async def test_prune_processed_keeps_marks_inside_the_retention(tmp_path: Path) -> None:
    clock = ManualClock(1_000.0)
    path = tmp_path / "x.db"
    async with await AsyncSqliteStore.open(path, create_schema=True, clock=clock) as store:
        await marks_inside_the_retention_are_kept(store, clock)


@pytest.mark.asyncio
async def test_prune_processed_takes_marks_by_age_not_by_id(tmp_path: Path) -> None:
    clock = ManualClock(1_000.0)
    path = tmp_path / "x.db"
    async with await AsyncSqliteStore.open(path, create_schema=True, clock=clock) as store:
        await marks_are_pruned_by_age_not_by_id(store, clock)


@pytest.mark.asyncio
async def test_lease_and_mark_pruning_read_through_their_indexes(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    await (await AsyncSqliteStateStore.open(path, create_schema=True)).aclose()
    tables = SqliteTables()
    cases = {
        "prunable_leases": (state_statements(tables), {"now": 5.0, "limit": 10}),
        "prune_processed": (execution_statements(tables), {"cutoff": 5.0, "limit": 10}),
    }
    with sqlite3.connect(path) as conn:
        for name, (statements, params) in cases.items():
            plan = [
                str(row[3])
                for row in conn.execute(f"EXPLAIN QUERY PLAN {statements[name]}", params)
            ]
            scans = [step for step in plan if step.startswith("SCAN") and "USING" not in step]
            assert not [s for s in scans if "runyard_" in s], (name, plan)
            assert any("USING" in step and "INDEX" in step for step in plan), (name, plan)


@pytest.mark.asyncio
async def test_a_file_from_before_pruning_is_refused_naming_both_versions(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    await (await AsyncSqliteStore.open(path, create_schema=True)).aclose()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE runyard_schema SET version = 2 WHERE component = 'state'")
        conn.execute("UPDATE runyard_schema SET version = 1 WHERE component = 'executions'")
    with pytest.raises(ConfigurationError) as state:
        await AsyncSqliteStateStore.open(path)
    assert "schema version 2" in str(state.value) and "version 4" in str(state.value)
    with pytest.raises(ConfigurationError) as executions:
        await AsyncSqliteStore.open(path)
    assert "schema version 1" in str(executions.value) and "version 2" in str(executions.value)
