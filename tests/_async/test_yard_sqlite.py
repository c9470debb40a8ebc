"""AsyncYard.from_url on the embedded default: SQLite files, in-memory databases, the URL."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from runyard import AsyncYard, ConfigurationError, RunKey
from runyard._async.memory import AsyncMemoryWorkQueue
from runyard.executions import Execution
from runyard.sqlite import AsyncSqliteWorkQueue, SqliteTables


@pytest.mark.asyncio
async def test_a_new_sqlite_file_gets_the_schema_and_keeps_what_was_written(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'yard.db'}"
    yard = await AsyncYard.from_url(url)
    await yard.state.put_run(RunKey("acme", "r"), {"kept": True}, expected_version=0)
    await yard.queue.enqueue("acme", {"job": 1}, item_id="job-1")
    await yard.executions.save(Execution(id="e", definition_id="d"))
    assert yard.queue.capabilities.deployment == "single_host"
    await yard.aclose()

    again = await AsyncYard.from_url(url)
    try:
        run = await again.state.get_run(RunKey("acme", "r"))
        assert run is not None and run.blob == {"kept": True}
        assert (await again.queue.get_item("acme", "job-1")) is not None
        assert (await again.executions.load("e")) is not None
    finally:
        await again.aclose()


@pytest.mark.asyncio
async def test_an_existing_file_without_the_schema_is_refused_naming_the_repair(
    tmp_path: Path,
) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE someone_elses (x)")
    with pytest.raises(ConfigurationError, match="create_schema"):
        await AsyncYard.from_url(f"sqlite:///{path}")


@pytest.mark.asyncio
async def test_another_applications_database_is_refused_without_a_byte_written(
    tmp_path: Path,
) -> None:
    # It was switched to WAL (its header rewritten, -wal and -shm files made) and only then
    # refused, by the yard and by a store's open.
    path = tmp_path / "theirs.db"
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE someone_elses (x)")
        conn.commit()
    before = path.read_bytes()
    with pytest.raises(ConfigurationError, match="runyard_schema does not exist"):
        await AsyncYard.from_url(f"sqlite:///{path}")
    with pytest.raises(ConfigurationError, match="runyard_schema does not exist"):
        await AsyncSqliteWorkQueue.open(path)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["theirs.db"]
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)


@pytest.mark.asyncio
async def test_without_a_url_the_yard_opens_runyard_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNYARD_URL", f"sqlite:///{tmp_path / 'env.db'}")
    yard = await AsyncYard.from_url()
    try:
        assert isinstance(yard.queue, AsyncSqliteWorkQueue)
        assert (tmp_path / "env.db").exists()
    finally:
        await yard.aclose()


@pytest.mark.asyncio
async def test_without_a_url_or_runyard_url_the_yard_opens_runyard_db_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RUNYARD_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    yard = await AsyncYard.from_url()
    try:
        assert (tmp_path / "runyard.db").exists()
    finally:
        await yard.aclose()


@pytest.mark.asyncio
@pytest.mark.parametrize("url", ["memory://", "sqlite://", "sqlite:///:memory:"])
async def test_in_process_urls_need_no_file(url: str) -> None:
    yard = await AsyncYard.from_url(url)
    try:
        await yard.queue.enqueue("acme", {})
        assert (await yard.queue.stats()).ready == 1
        assert yard.queue.capabilities.deployment == "single_process"
        assert isinstance(yard.queue, AsyncMemoryWorkQueue) == (url == "memory://")
    finally:
        await yard.aclose()


@pytest.mark.asyncio
async def test_a_sqlite_url_sets_durable_and_live_updates(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'opts.db'}?durable=false&live_updates=true"
    async with await AsyncYard.from_url(url) as yard:
        state: Any = yard.state
        assert state.live_updates is not None
        (synchronous,) = (await state.connection.fetch("PRAGMA synchronous"))[0]
        assert synchronous == 1  # NORMAL (FULL is 2)
    async with await AsyncYard.from_url(f"sqlite:///{tmp_path / 'opts.db'}") as yard:
        state = yard.state
        assert state.live_updates is None
        (synchronous,) = (await state.connection.fetch("PRAGMA synchronous"))[0]
        assert synchronous == 2


@pytest.mark.asyncio
@pytest.mark.parametrize("url", ["sqlite:runyard.db", "sqlite:/runyard.db", "sqlite:///"])
async def test_a_sqlite_url_out_of_form_is_refused_before_anything_is_opened(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """These opened a private in-memory database (sqlite:runyard.db, sqlite:///) or a path
    relative to the working directory (sqlite:/runyard.db): writes then went nowhere."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match="absolute/path"):
        await AsyncYard.from_url(url)
    assert os.listdir(tmp_path) == []


def _tables_in(path: Path) -> set[str]:
    """The tables of the file at ``path``, SQLite's own (sqlite_sequence) left out."""
    query = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'"
    with closing(sqlite3.connect(path)) as conn:
        return {row[0] for row in conn.execute(query)}


@pytest.mark.asyncio
async def test_a_file_made_with_a_table_prefix_is_served_through_the_url(tmp_path: Path) -> None:
    path = tmp_path / "prefixed.db"
    tables = SqliteTables.with_prefix("app_")
    queue = await AsyncSqliteWorkQueue.open(path, create_schema=True, tables=tables)
    try:
        item = await queue.enqueue("acme", {"job": 1})
    finally:
        await queue.aclose()
    async with await AsyncYard.from_url(f"sqlite:///{path}?table_prefix=app_") as yard:
        lease = await yard.queue.claim("worker-1")
        assert lease is not None and lease.item_id == item.item_id
        await yard.queue.complete(lease)
        await yard.state.put_run(RunKey("acme", "r"), {"n": 1}, expected_version=0)
        await yard.executions.save(Execution(id="e", definition_id="d"))
    assert _tables_in(path) == set(tables.names().values())  # no runyard_ table was made


@pytest.mark.asyncio
async def test_a_new_file_opened_with_a_table_prefix_gets_that_prefix_only(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    async with await AsyncYard.from_url(f"sqlite:///{path}?table_prefix=b_") as yard:
        await yard.queue.enqueue("acme", {}, item_id="kept")
    assert _tables_in(path) == set(SqliteTables.with_prefix("b_").names().values())
    again = await AsyncSqliteWorkQueue.open(path, tables=SqliteTables.with_prefix("b_"))
    try:
        assert (await again.get_item("acme", "kept")) is not None
    finally:
        await again.aclose()
    with pytest.raises(ConfigurationError, match="runyard_schema does not exist"):
        await AsyncYard.from_url(f"sqlite:///{path}")  # the default names are not there


@pytest.mark.asyncio
@pytest.mark.parametrize("prefix", ["App_", "1_", "sqlite_", "a;b", ""])
async def test_a_bad_table_prefix_is_refused_before_anything_is_opened(
    prefix: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError, match="table_prefix"):
        await AsyncYard.from_url(f"sqlite:///{tmp_path / 'x.db'}?table_prefix={prefix}")
    assert os.listdir(tmp_path) == []


@pytest.mark.asyncio
async def test_a_bad_store_option_is_refused_before_the_file_is_made(tmp_path: Path) -> None:
    # The yard made the file (in WAL, with all its tables), then the queue refused the policy.
    with pytest.raises(ConfigurationError, match=r"policy must be a runyard\.QueuePolicy"):
        await AsyncYard.from_url(f"sqlite:///{tmp_path / 'new.db'}", policy="fast")  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == []
