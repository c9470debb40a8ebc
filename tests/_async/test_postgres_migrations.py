"""PostgreSQL state version 6: a database at state version 5 (the session index on (tenant,
session_id), no tombstones table) is refused until docs/postgres.md's migration has run, stores
of version 5 keep listing through it, and afterwards sessions list as before, on the new index,
and deletes leave tombstones."""

from __future__ import annotations

import pytest
from runyard import ConfigurationError, RunKey
from runyard.postgres import AsyncPostgresStateStore, StateTables

from tests._async.postgres_support import open_store
from tests.support.postgres_migrations import migration_statements, undo_state_6
from tests.support.postgres_plugin import admin_connection


async def _session_runs(
    store: AsyncPostgresStateStore, session_id: str, status: str | None = None
) -> list[str]:
    """Every run of the session (with that status), read in pages of three."""
    ids: list[str] = []
    cursor = None
    while True:
        page = await store.list_runs(
            "acme", session_id=session_id, status=status, limit=3, cursor=cursor
        )
        ids += [run.run_id for run in page.items]
        cursor = page.next_cursor
        if cursor is None:
            return ids


@pytest.mark.asyncio
async def test_a_state_5_database_migrated_as_documented_lists_sessions(
    pg_tables: StateTables,
) -> None:
    t = pg_tables
    store = await open_store(t)
    try:
        for n in range(10):
            session, status = ("a" if n % 2 else "b"), ("failed" if n % 3 else "done")
            key = RunKey("acme", f"r{n}")
            await store.put_run(
                key, {"n": n}, expected_version=0, status=status, session_id=session
            )
        await store.put_run(RunKey("acme", "alone"), {}, expected_version=0)
    finally:
        await store.aclose()
    # A store opened before the migration (its listing statements are version 5's: only the
    # index they use changes) keeps listing through it; one opened after it is refused.
    old = await open_store(t)
    with admin_connection() as conn:
        undo_state_6(conn, t)
        conn.execute(
            f"UPDATE {t.qualified(t.schema_table)} SET version = 5 WHERE component = 'state'"
        )
    try:
        with pytest.raises(ConfigurationError) as refused:
            await open_store(t)
        assert "'state' is at schema version 5" in str(refused.value)
        assert "written for version 6: migrate the schema" in str(refused.value)
        with admin_connection() as conn:
            conn.execute(f'SET search_path TO "{t.schema}"')
            for statement in migration_statements("State version 6"):
                conn.execute(statement)
            indexes = conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s"
                " AND indexname LIKE %s",
                (t.schema, f"{t.runs}_by_session%"),
            ).fetchall()
        assert await _session_runs(old, "a") == ["r1", "r3", "r5", "r7", "r9"]
    finally:
        await old.aclose()
    assert [name for name, _ in indexes] == [f"{t.runs}_by_session"]
    assert "(tenant, session_id, seq) WHERE (session_id IS NOT NULL)" in str(indexes[0][1])
    with pytest.raises(ConfigurationError) as too_new:
        await open_store(t, schema_version=5)
    assert "'state' is at schema version 6" in str(too_new.value)
    assert "written for version 5: migrate the schema" in str(too_new.value)
    store = await open_store(t)
    try:
        assert await _session_runs(store, "a") == ["r1", "r3", "r5", "r7", "r9"]
        assert await _session_runs(store, "b") == ["r0", "r2", "r4", "r6", "r8"]
        assert await _session_runs(store, "b", "failed") == ["r2", "r4", "r8"]
        assert await _session_runs(store, "none") == []
        await store.delete_run(RunKey("acme", "r1"))  # its tombstone goes to the new table
    finally:
        await store.aclose()
    with admin_connection() as conn:
        tombstones = conn.execute(
            f"SELECT kind, record_id FROM {t.qualified(t.tombstones)}"
        ).fetchall()
    assert tombstones == [("run", "r1")]
