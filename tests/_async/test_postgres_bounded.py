"""Statements whose work does not grow with the data: session deletes in batches."""

from __future__ import annotations

import pytest
from runyard import RunKey
from runyard._async.postgres.state import DELETE_BATCH
from runyard.postgres import StateTables

from tests._async.postgres_support import open_store
from tests.support.postgres_plugin import admin_connection


def _add_runs(tables: StateTables, session_id: str, count: int) -> None:
    runs = tables.qualified(tables.runs)
    with admin_connection() as conn:
        conn.execute(
            f"""INSERT INTO {runs} (tenant, run_id, blob, version, status, session_id,
                                    created_at, updated_at)
                SELECT 'acme', '{session_id}-' || g, '{{}}'::jsonb, 1, 'running',
                       '{session_id}', 0, 0
                FROM generate_series(1, {count}) AS g"""
        )


@pytest.mark.asyncio
async def test_a_cascading_session_delete_removes_runs_beyond_one_batch(
    pg_tables: StateTables,
) -> None:
    store = await open_store(pg_tables)
    async with store:
        await store.put_session("acme", "big", {}, expected_version=0)
        await store.put_session("acme", "other", {}, expected_version=0)
        _add_runs(pg_tables, "big", 2 * DELETE_BATCH + 1)
        _add_runs(pg_tables, "other", 1)
        assert await store.delete_session("acme", "big", cascade=True) is True
        assert await store.get_session("acme", "big") is None
        page = await store.list_runs("acme", session_id="big")
        assert page.items == []
        assert await store.get_run(RunKey("acme", "other-1")) is not None
        assert await store.get_session("acme", "other") is not None


@pytest.mark.asyncio
async def test_list_runs_with_a_status_pages_in_creation_order(pg_tables: StateTables) -> None:
    store = await open_store(pg_tables)
    async with store:
        for n in range(7):
            status = "running" if n % 3 else "done"
            await store.put_run(RunKey("acme", f"r{n}"), {}, expected_version=0, status=status)
        first = await store.list_runs("acme", status="running", limit=2)
        second = await store.list_runs("acme", status="running", limit=10, cursor=first.next_cursor)
        assert [r.run_id for r in first.items + second.items] == ["r1", "r2", "r4", "r5"]
        done = await store.list_runs("acme", status="done")
        assert [r.run_id for r in done.items] == ["r0", "r3", "r6"]
