"""Opening a SQLite store: the schema, the pragmas, the busy timeout and the deployment."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from runyard import ConfigurationError, RunKey, StatePersistenceError
from runyard._async.sqlite import connect, create_schema
from runyard.sqlite import (
    SCHEMA_VERSIONS,
    SQLITE_SCHEMA,
    AsyncSqliteStateStore,
    AsyncSqliteStore,
    AsyncSqliteWorkQueue,
    SqliteStoreSettings,
    SqliteTables,
)


def _tables_in(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


@pytest.mark.asyncio
async def test_opening_a_file_without_the_schema_names_the_table_and_the_repair(
    tmp_path: Path,
) -> None:
    path = tmp_path / "new.db"
    for store_class in (AsyncSqliteStateStore, AsyncSqliteWorkQueue, AsyncSqliteStore):
        with pytest.raises(ConfigurationError) as caught:
            await store_class.open(path)
        message = str(caught.value)
        assert "runyard_schema does not exist" in message
        assert "create_schema=True" in message and "SQLITE_SCHEMA" in message
    assert _tables_in(path) == set()


@pytest.mark.asyncio
async def test_a_table_dropped_under_an_open_queue_is_a_configuration_error(
    tmp_path: Path,
) -> None:
    # The schema gone from under a running store (dropped, a file swapped in) is a
    # ConfigurationError naming the repair, as a missing relation is on PostgreSQL: a worker
    # then exits as for a configuration error, not with a driver error's traceback.
    path = tmp_path / "gone.db"
    queue = await AsyncSqliteWorkQueue.open(path, create_schema=True)
    try:
        await queue.enqueue("acme", {})
        with sqlite3.connect(path) as conn:
            conn.execute("DROP TABLE runyard_work_items")
        with pytest.raises(ConfigurationError) as caught:
            await queue.claim("w")
        message = str(caught.value)
        assert "no such table: runyard_work_items" in message
        assert "create runyard's schema first" in message
    finally:
        await queue.aclose()


@pytest.mark.asyncio
async def test_a_table_dropped_under_a_store_with_its_own_names_names_their_schema(
    tmp_path: Path,
) -> None:
    # SQLITE_SCHEMA holds the default names: applied as the repair for tables named otherwise,
    # it would make a second set of runyard_* tables. The message named it (and "the
    # database") for every store until the mapped error was given the store's tables and file.
    path = tmp_path / "own.db"
    tables = SqliteTables.with_prefix("app_")
    queue = await AsyncSqliteWorkQueue.open(path, create_schema=True, tables=tables)
    try:
        await queue.enqueue("acme", {})
        with sqlite3.connect(path) as conn:
            conn.execute("DROP TABLE app_work_items")
        with pytest.raises(ConfigurationError) as caught:
            await queue.claim("w")
        message = str(caught.value)
        assert f"no such table: app_work_items in {path}" in message
        assert "runyard.sqlite.schema_sql(tables) for these table names" in message
        assert "SQLITE_SCHEMA with" not in message
    finally:
        await queue.aclose()


@pytest.mark.asyncio
async def test_a_database_sqlite_cannot_write_is_refused_at_open_naming_the_repair(
    tmp_path: Path,
) -> None:
    # A file in WAL answers "wal" even when it cannot be written: it was opened, and every
    # write then failed as a non-retryable "invalid" StatePersistenceError. query_only makes
    # SQLite refuse writes as it does on a read-only or immutable file.
    path = tmp_path / "ro.db"
    await (await AsyncSqliteWorkQueue.open(path, create_schema=True)).aclose()
    connection = await connect(path)
    try:
        await connection.fetch("PRAGMA query_only = ON")
        for store_class in (AsyncSqliteStateStore, AsyncSqliteWorkQueue, AsyncSqliteStore):
            with pytest.raises(ConfigurationError) as caught:
                await store_class.open(connection)
            message = str(caught.value)
            assert f"{path} cannot be written" in message, message
            assert "attempt to write a readonly database" in message
    finally:
        await connection.close()


@pytest.mark.asyncio
async def test_a_reader_opened_read_only_on_purpose_reads_and_its_writes_name_the_repair(
    tmp_path: Path,
) -> None:
    path = tmp_path / "shared.db"
    writer = await AsyncSqliteWorkQueue.open(path, create_schema=True)
    try:
        await writer.enqueue("acme", {}, item_id="i")
        reader = await AsyncSqliteWorkQueue.open(f"file:{path}?mode=ro")
        try:
            assert (await reader.stats()).ready == 1
            with pytest.raises(ConfigurationError, match=r"cannot be written.*drop mode=ro"):
                await reader.enqueue("acme", {}, item_id="j")
        finally:
            await reader.aclose()
    finally:
        await writer.aclose()


@pytest.mark.asyncio
async def test_opening_a_store_does_not_wait_for_another_writers_lock(tmp_path: Path) -> None:
    # The write that tells a read-only file at open took the write lock: an open behind
    # another writer waited its busy timeout and failed.
    path = tmp_path / "busy.db"
    await (await AsyncSqliteWorkQueue.open(path, create_schema=True)).aclose()
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        for store_class in (AsyncSqliteStateStore, AsyncSqliteWorkQueue, AsyncSqliteStore):
            store = await store_class.open(path, busy_timeout_seconds=0.5)
            await store.aclose()
    finally:
        holder.close()


@pytest.mark.asyncio
async def test_a_store_built_on_a_bare_connection_refuses_its_first_operation(
    tmp_path: Path,
) -> None:
    connection = await connect(tmp_path / "bare.db")
    try:
        store = AsyncSqliteStateStore(connection)
        with pytest.raises(ConfigurationError, match="create_schema=True"):
            await store.put_run(RunKey("acme", "r"), {}, expected_version=0)
        await create_schema(connection)
        record = await store.put_run(RunKey("acme", "r"), {}, expected_version=0)
        assert record.version == 1
    finally:
        await connection.close()


@pytest.mark.asyncio
async def test_create_schema_is_idempotent_and_keeps_the_data(tmp_path: Path) -> None:
    path = tmp_path / "runyard.db"
    first = await AsyncSqliteStateStore.open(path, create_schema=True)
    await first.put_run(RunKey("acme", "r"), {"kept": True}, expected_version=0)
    await first.aclose()
    second = await AsyncSqliteStateStore.open(path, create_schema=True)
    try:
        stored = await second.get_run(RunKey("acme", "r"))
        assert stored is not None and stored.blob == {"kept": True}
    finally:
        await second.aclose()


@pytest.mark.asyncio
async def test_a_schema_at_another_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    await (await AsyncSqliteWorkQueue.open(path, create_schema=True)).aclose()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE runyard_schema SET version = 99 WHERE component = 'queue'")
    with pytest.raises(ConfigurationError, match="schema version 99"):
        await AsyncSqliteWorkQueue.open(path)


def _make_version_one_state(path: Path) -> None:
    """Turn a new file into one written by a runyard before the event log (state version 1)."""
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE runyard_run_events")
        conn.execute("UPDATE runyard_schema SET version = 1 WHERE component = 'state'")


@pytest.mark.asyncio
async def test_a_file_from_before_the_event_log_is_refused_with_the_repair(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v1.db"
    await (await AsyncSqliteStateStore.open(path, create_schema=True)).aclose()
    _make_version_one_state(path)
    # Refused for its version first (the migration's first step adds the missing table), with
    # or without create_schema: creating the missing tables does not make it current.
    wanted = SCHEMA_VERSIONS["state"]
    for creating in (False, True):
        with pytest.raises(ConfigurationError) as caught:
            await AsyncSqliteStateStore.open(path, create_schema=creating)
        message = str(caught.value)
        assert "schema version 1" in message and f"version {wanted}" in message
        assert "migrate the file: apply runyard.sqlite.SQLITE_SCHEMA" in message
    # The queue's component is unchanged, so a queue still opens the file.
    await (await AsyncSqliteWorkQueue.open(path)).aclose()
    # The migration docs/sqlite.md gives: apply the schema, then raise the version.
    with sqlite3.connect(path) as conn:
        conn.executescript(SQLITE_SCHEMA)
        conn.execute("UPDATE runyard_schema SET version = ? WHERE component = 'state'", (wanted,))
    store = await AsyncSqliteStateStore.open(path)
    try:
        await store.put_run(RunKey("acme", "r"), {}, expected_version=0)
        assert (await store.append_event(RunKey("acme", "r"), "step", {})).seq == 1
    finally:
        await store.aclose()


@pytest.mark.asyncio
async def test_custom_table_names_are_used(tmp_path: Path) -> None:
    path = tmp_path / "custom.db"
    tables = SqliteTables.with_prefix("app_")
    store = await AsyncSqliteStateStore.open(path, create_schema=True, tables=tables)
    try:
        await store.put_run(RunKey("acme", "r"), {}, expected_version=0)
    finally:
        await store.aclose()
    assert {"app_runs", "app_schema", "app_work_items"} <= _tables_in(path)
    assert "runyard_runs" not in _tables_in(path)


@pytest.mark.asyncio
async def test_a_file_is_single_host_and_memory_is_single_process(tmp_path: Path) -> None:
    on_file = await AsyncSqliteWorkQueue.open(tmp_path / "f.db", create_schema=True)
    in_memory = await AsyncSqliteWorkQueue.open(":memory:", create_schema=True)
    try:
        assert on_file.capabilities.deployment == "single_host"
        assert in_memory.capabilities.deployment == "single_process"
        assert AsyncSqliteWorkQueue.capabilities.deployment == "single_host"
    finally:
        await on_file.aclose()
        await in_memory.aclose()


@pytest.mark.asyncio
@pytest.mark.parametrize(("durable", "level"), [(True, 2), (False, 1)])
async def test_a_file_is_in_wal_mode_and_synchronous_follows_durable(
    tmp_path: Path, durable: bool, level: int
) -> None:
    store = await AsyncSqliteStateStore.open(tmp_path / "w.db", create_schema=True, durable=durable)
    try:
        assert await store.connection.fetch("PRAGMA journal_mode") == [("wal",)]
        assert await store.connection.fetch("PRAGMA synchronous") == [(level,)]
    finally:
        await store.aclose()


@pytest.mark.asyncio
async def test_a_write_blocked_past_the_busy_timeout_is_a_retryable_contended_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "busy.db"
    store = await AsyncSqliteStateStore.open(path, create_schema=True, busy_timeout_seconds=0.05)
    blocker = sqlite3.connect(path, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        with pytest.raises(StatePersistenceError) as caught:
            await store.put_run(RunKey("acme", "r"), {}, expected_version=0)
        assert caught.value.reason == "contended" and caught.value.retryable
        assert "busy_timeout_seconds" in str(caught.value)
        blocker.execute("ROLLBACK")
        record = await store.put_run(RunKey("acme", "r"), {}, expected_version=0)
        assert record.version == 1
    finally:
        blocker.close()
        await store.aclose()


@pytest.mark.asyncio
@pytest.mark.parametrize("bad", [0, -1.0])
async def test_a_bad_busy_timeout_is_refused_before_opening(tmp_path: Path, bad: float) -> None:
    path = tmp_path / "never.db"
    with pytest.raises(ConfigurationError, match="busy_timeout_seconds"):
        await AsyncSqliteStateStore.open(path, create_schema=True, busy_timeout_seconds=bad)
    assert not path.exists()


@pytest.mark.asyncio
async def test_a_store_needs_a_connection_not_a_path() -> None:
    with pytest.raises(ConfigurationError, match="open"):
        not_a_connection: Any = "runyard.db"
        AsyncSqliteStateStore(not_a_connection)


@pytest.mark.asyncio
async def test_a_store_on_a_shared_connection_leaves_it_open(tmp_path: Path) -> None:
    connection = await connect(tmp_path / "shared.db")
    try:
        await create_schema(connection)
        state = await AsyncSqliteStateStore.open(connection)
        queue = await AsyncSqliteWorkQueue.open(connection)
        await state.aclose()
        await queue.enqueue("acme", {"after": "close"})
        assert (await queue.stats()).ready == 1
    finally:
        await connection.close()


@pytest.mark.asyncio
async def test_from_settings_opens_the_file_with_its_prefix_and_pragmas(tmp_path: Path) -> None:
    settings = SqliteStoreSettings(
        path=str(tmp_path / "s.db"), create_schema=True, durable=False, table_prefix="app_"
    )
    queue = await AsyncSqliteWorkQueue.from_settings(settings)
    try:
        await queue.enqueue("acme", {})
        assert queue.tables == SqliteTables.with_prefix("app_")
        assert await queue.connection.fetch("PRAGMA synchronous") == [(1,)]
    finally:
        await queue.aclose()
    assert "app_work_items" in _tables_in(tmp_path / "s.db")


@pytest.mark.asyncio
async def test_without_a_clock_the_database_time_stamps_every_write(tmp_path: Path) -> None:
    queue = await AsyncSqliteWorkQueue.open(tmp_path / "t.db", create_schema=True)
    try:
        item = await queue.enqueue("acme", {}, delay_seconds=0)
        lease = await queue.claim("w1")
        assert lease is not None
        [(database_now,)] = await queue.connection.fetch(
            "SELECT (julianday('now') - 2440587.5) * 86400.0"
        )
        assert item.enqueued_at <= lease.claimed_at <= database_now
        assert database_now - item.enqueued_at < 60  # the same clock, not another epoch
        assert lease.expires_at == pytest.approx(lease.claimed_at + queue.policy.lease_seconds)
    finally:
        await queue.aclose()
