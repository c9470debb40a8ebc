"""PostgreSQL retention: the retention cutoff of prune_processed, lease epochs from their
sequence across a pruned row, and the schema versions that introduced them (state 4,
executions 2)."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from runyard import ConfigurationError, ManualClock, RunKey
from runyard._flavours import async_gather
from runyard.postgres import AsyncPostgresExecutionStore, StateTables

from tests._async.postgres_support import open_executions, open_pool, open_store
from tests._async.retention_support import (
    marks_are_pruned_by_age_not_by_id,
    marks_inside_the_retention_are_kept,
)
from tests.support.postgres_migrations import (
    migration_sql,
    migration_statements,
    undo_executions_3,
    undo_state_6,
)
from tests.support.postgres_plugin import admin_connection


@pytest.mark.asyncio
async def test_prune_processed_keeps_marks_inside_the_retention(pg_tables: StateTables) -> None:
    clock = ManualClock(1_000.0)
    async with await open_executions(pg_tables, clock) as store:
        await marks_inside_the_retention_are_kept(store, clock)


@pytest.mark.asyncio
async def test_prune_processed_takes_marks_by_age_not_by_id(pg_tables: StateTables) -> None:
    clock = ManualClock(1_000.0)
    async with await open_executions(pg_tables, clock) as store:
        await marks_are_pruned_by_age_not_by_id(store, clock)


@pytest.mark.asyncio
async def test_a_pruned_run_gets_an_epoch_from_the_sequence(pg_tables: StateTables) -> None:
    clock = ManualClock()
    store = await open_store(pg_tables, clock)
    try:
        first = await store.acquire_lease(RunKey("acme", "r"), "w", ttl_seconds=10)
        other = await store.acquire_lease(RunKey("acme", "other"), "w", ttl_seconds=10)
        await store.release_lease(first)
        assert await store.prune() == 1
        again = await store.acquire_lease(RunKey("acme", "r"), "w", ttl_seconds=10)
        assert again.epoch > other.epoch > first.epoch
        with admin_connection() as conn:
            rows = conn.execute(
                f"SELECT count(*) FROM {pg_tables.qualified(pg_tables.run_leases)}"
            ).fetchone()
        assert rows == (2,)
    finally:
        await store.aclose()


@pytest.mark.asyncio
async def test_a_schema_from_before_pruning_is_refused_naming_both_versions(
    pg_tables: StateTables,
) -> None:
    table = pg_tables.qualified(pg_tables.schema_table)
    with admin_connection() as conn:
        conn.execute(f"UPDATE {table} SET version = 3 WHERE component = 'state'")
        conn.execute(f"UPDATE {table} SET version = 1 WHERE component = 'executions'")
    with pytest.raises(ConfigurationError) as state:
        await open_store(pg_tables)
    assert "schema version 3, but this runyard was written for version 6" in str(state.value)
    pool = await open_pool()
    try:
        with pytest.raises(ConfigurationError) as executions:
            await AsyncPostgresExecutionStore.open(pool, tables=pg_tables)
    finally:
        await pool.close()
    text = str(executions.value)
    assert "schema version 1, but this runyard was written for version 3" in text


@pytest.mark.asyncio
async def test_a_schema_without_the_epoch_sequence_is_refused(pg_tables: StateTables) -> None:
    with admin_connection() as conn:
        conn.execute(f"DROP SEQUENCE {pg_tables.sequence('lease_epoch')}")
    with pytest.raises(ConfigurationError) as caught:
        await open_store(pg_tables)
    assert 'runyard_run_leases_epoch_seq" does not exist' in str(caught.value)


@pytest.mark.asyncio
async def test_prune_racing_acquires_never_removes_a_live_lease(pg_tables: StateTables) -> None:
    clock = ManualClock()
    store = await open_store(pg_tables, clock, max_size=12)
    try:
        keys = [RunKey("acme", f"r{n}") for n in range(40)]
        old = {k: await store.acquire_lease(k, "a", ttl_seconds=10) for k in keys}
        clock.advance(11)
        taken, left = keys[1::2], keys[::2]
        calls: list[Any] = [partial(store.acquire_lease, k, "b", ttl_seconds=60) for k in taken]
        calls += [partial(store.prune, limit=5) for _ in range(10)]
        await async_gather(calls)
        await store.prune(limit=100)
        for k in taken:
            # Acquired by "b" while prunes ran: live after every prune, above the old epoch.
            current = await store.get_lease(k)
            assert current is not None and current.holder == "b"
            assert current.epoch > old[k].epoch
        assert [await store.get_lease(k) for k in left] == [None] * len(left)
    finally:
        await store.aclose()


@pytest.mark.asyncio
async def test_the_documented_migrations_bring_a_state_3_schema_to_the_current_version(
    pg_tables: StateTables,
) -> None:
    t = pg_tables
    with admin_connection() as conn:
        # Undo what versions 4, 5 and 6 added, as a database written by an older runyard has it.
        undo_state_6(conn, t)
        conn.execute(f"ALTER TABLE {t.qualified(t.runs)} DROP COLUMN write_id")
        conn.execute(f"ALTER TABLE {t.qualified(t.sessions)} DROP COLUMN write_id")
        conn.execute(f"DROP SEQUENCE {t.sequence('lease_epoch')}")
        conn.execute(f'DROP INDEX "{t.schema}"."{t.run_leases}_by_expiry"')
        conn.execute(f'DROP INDEX "{t.schema}"."{t.processed}_by_age"')
        conn.execute(f"INSERT INTO {t.qualified(t.run_leases)} VALUES ('acme', 'r', NULL, 7, NULL)")
        table = t.qualified(t.schema_table)
        conn.execute(f"UPDATE {table} SET version = 3 WHERE component = 'state'")
        undo_executions_3(conn, t)  # then back to executions version 1
        conn.execute(f"UPDATE {table} SET version = 1 WHERE component = 'executions'")
        conn.execute(f'SET search_path TO "{t.schema}"')
        with conn.transaction():
            conn.execute(migration_sql("State version 4, executions version 2"))
            conn.execute(migration_sql("State version 5"))
            conn.execute(migration_sql("Executions version 3"))
        for statement in migration_statements("State version 6"):  # CONCURRENTLY: one by one
            conn.execute(statement)
    store = await open_store(t, ManualClock())
    try:
        lease = await store.acquire_lease(RunKey("acme", "other"), "w", ttl_seconds=10)
        assert lease.epoch > 7  # above every epoch handed out before the migration
        assert await store.prune() == 1
    finally:
        await store.aclose()
    pool = await open_pool()
    try:
        await (await AsyncPostgresExecutionStore.open(pool, tables=t)).aclose()
    finally:
        await pool.close()
