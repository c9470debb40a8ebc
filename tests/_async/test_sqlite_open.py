"""Opening a SQLite store on a path it cannot use: runyard errors naming the file or the
argument, raised before anything is written; no driver error gets out."""

from __future__ import annotations

import math
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from runyard import (
    ConfigurationError,
    QueueUnavailableError,
    RunyardError,
    StatePersistenceError,
)
from runyard._async.sqlite import connect
from runyard._async.sqlite import create_schema as create_schema_on
from runyard.sqlite import (
    AsyncSqliteStateStore,
    AsyncSqliteStore,
    AsyncSqliteWorkQueue,
    SqliteStoreSettings,
    create_schema,
    schema_sql,
)

STORES: list[Any] = [AsyncSqliteStateStore, AsyncSqliteWorkQueue, AsyncSqliteStore]


def _junk(tmp_path: Path) -> Path:
    path = tmp_path / "junk.db"
    path.write_bytes(b"not a database" * 100)
    return path


@pytest.mark.asyncio
@pytest.mark.parametrize("store_class", STORES)
async def test_a_file_that_is_not_a_database_is_a_configuration_error_naming_it(
    tmp_path: Path, store_class: Any
) -> None:
    junk = _junk(tmp_path)
    for create in (False, True):
        with pytest.raises(ConfigurationError, match="is not a database") as caught:
            await store_class.open(junk, create_schema=create)
        assert str(junk) in str(caught.value)
    settings = SqliteStoreSettings(path=str(junk), create_schema=True)
    with pytest.raises(ConfigurationError, match="is not a database"):
        await store_class.from_settings(settings)


@pytest.mark.asyncio
@pytest.mark.parametrize("store_class", STORES)
async def test_a_missing_directory_is_a_configuration_error_naming_the_file(
    tmp_path: Path, store_class: Any
) -> None:
    missing = tmp_path / "no" / "such" / "dir.db"
    with pytest.raises(ConfigurationError, match="cannot open the SQLite database") as caught:
        await store_class.open(missing, create_schema=True)
    assert str(missing) in str(caught.value)
    settings = SqliteStoreSettings(path=str(missing), create_schema=True)
    with pytest.raises(ConfigurationError, match="cannot open the SQLite database"):
        await store_class.from_settings(settings)
    assert not (tmp_path / "no").exists()


@pytest.fixture
def locked_file(tmp_path: Path) -> Iterator[Path]:
    """A runyard file whose write lock another connection holds (``BEGIN IMMEDIATE``)."""
    path = tmp_path / "busy.db"
    create_schema(path)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process is writing
    try:
        yield path
    finally:
        other.execute("ROLLBACK")
        other.close()


@pytest.mark.asyncio
async def test_a_queue_opened_on_a_locked_file_raises_the_queues_retryable_error(
    locked_file: Path,
) -> None:
    """It raised the state store's StatePersistenceError("contended"), the one class no other
    queue call raises for a lock."""
    with pytest.raises(QueueUnavailableError, match="busy_timeout_seconds") as caught:
        await AsyncSqliteWorkQueue.open(locked_file, create_schema=True, busy_timeout_seconds=0.05)
    assert caught.value.retryable
    connection = await connect(locked_file, busy_timeout_seconds=0.05)
    try:  # on a shared connection too
        with pytest.raises(QueueUnavailableError, match="busy_timeout_seconds"):
            await AsyncSqliteWorkQueue.open(connection, create_schema=True)
    finally:
        await connection.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("store_class", [AsyncSqliteStateStore, AsyncSqliteStore])
async def test_state_and_executions_opened_on_a_locked_file_raise_a_contended_error(
    locked_file: Path, store_class: Any
) -> None:
    with pytest.raises(StatePersistenceError) as caught:
        await store_class.open(locked_file, create_schema=True, busy_timeout_seconds=0.05)
    assert caught.value.reason == "contended" and caught.value.retryable
    connection = await connect(locked_file, busy_timeout_seconds=0.05)
    try:
        with pytest.raises(StatePersistenceError) as shared:
            await store_class.open(connection, create_schema=True)
        assert shared.value.reason == "contended"
        with pytest.raises(StatePersistenceError) as bare:  # the store-less create_schema
            await create_schema_on(connection)
        assert bare.value.reason == "contended"
    finally:
        await connection.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("bad", [math.inf, math.nan, 1e7, 3600.5, 10**400, "5", True, None])
async def test_a_busy_timeout_that_is_not_seconds_up_to_an_hour_is_refused_before_opening(
    tmp_path: Path, bad: Any
) -> None:
    """inf and 1e7 reached SQLite as busy_timeout 0 (no wait at all), "5" was a TypeError and
    True was taken for 1 s. open()'s None is "not given" (the default, 5 s)."""
    path = tmp_path / "never.db"
    if bad is not None:
        with pytest.raises(ConfigurationError, match="busy_timeout_seconds") as caught:
            await AsyncSqliteStateStore.open(path, create_schema=True, busy_timeout_seconds=bad)
        assert "3600" in str(caught.value)
    with pytest.raises(ConfigurationError, match="busy_timeout_seconds"):
        await connect(path, busy_timeout_seconds=bad)
    assert not path.exists()


@pytest.mark.asyncio
async def test_a_busy_timeout_of_an_hour_reaches_sqlite(tmp_path: Path) -> None:
    store = await AsyncSqliteStateStore.open(
        tmp_path / "hour.db", create_schema=True, busy_timeout_seconds=3600
    )
    try:
        assert (await store.connection.fetch("PRAGMA busy_timeout"))[0][0] == 3_600_000
    finally:
        await store.aclose()


@pytest.mark.asyncio
async def test_an_empty_path_is_refused(tmp_path: Path) -> None:
    """sqlite3 opens "" as a private temporary database (journal_mode delete), which was
    reported as a single_host file."""
    for store_class in STORES:
        with pytest.raises(ConfigurationError, match="the SQLite path is empty"):
            await store_class.open("", create_schema=True)
    with pytest.raises(ConfigurationError, match="the SQLite path is empty"):
        await connect("")


@pytest.mark.asyncio
async def test_a_mode_memory_uri_is_single_process(tmp_path: Path) -> None:
    queue = await AsyncSqliteWorkQueue.open(
        "file:runyard-open-test?mode=memory&cache=shared", create_schema=True
    )
    try:
        assert queue.capabilities.deployment == "single_process"
        await queue.enqueue("acme", {})
        assert (await queue.stats()).ready == 1
    finally:
        await queue.aclose()


@pytest.mark.asyncio
async def test_a_file_that_does_not_take_wal_is_refused_naming_it_and_the_mode(
    tmp_path: Path,
) -> None:
    path = tmp_path / "frozen.db"
    with sqlite3.connect(path) as conn:  # a rollback-journal file, opened immutable below
        conn.executescript(schema_sql())  # runyard's schema: a file without it is refused first
    conn.close()
    with pytest.raises(ConfigurationError, match="did not switch to WAL") as caught:
        await AsyncSqliteStateStore.open(f"file:{path}?immutable=1")
    assert str(path) in str(caught.value) and "'delete'" in str(caught.value)


@pytest.mark.asyncio
@pytest.mark.parametrize("store_class", STORES)
async def test_opening_a_missing_file_without_create_schema_makes_no_file(
    tmp_path: Path, store_class: Any
) -> None:
    path = tmp_path / "typo.db"
    with pytest.raises(ConfigurationError) as caught:
        await store_class.open(path)
    assert str(caught.value).startswith(f"table runyard_schema does not exist in {path}:")
    assert "create_schema=True" in str(caught.value)
    with pytest.raises(ConfigurationError, match="runyard_schema does not exist"):
        await store_class.from_settings(SqliteStoreSettings(path=str(path)))
    assert os.listdir(tmp_path) == []


@pytest.mark.asyncio
@pytest.mark.parametrize("store_class", STORES)
async def test_opening_a_missing_file_by_uri_without_create_schema_makes_no_file(
    tmp_path: Path, store_class: Any
) -> None:
    # A URI went to SQLite as it was, and SQLite made the file (an empty one was left).
    uri = f"file:{tmp_path / 'typo.db'}?cache=private"
    with pytest.raises(ConfigurationError, match="unable to open database file"):
        await store_class.open(uri)
    assert os.listdir(tmp_path) == []
    store = await store_class.open(uri, create_schema=True)  # made when asked to
    await store.aclose()
    assert "typo.db" in os.listdir(tmp_path)


@pytest.mark.asyncio
@pytest.mark.parametrize("store_class", STORES)
async def test_options_a_shared_connection_sets_are_refused_unless_they_are_its_own(
    tmp_path: Path, store_class: Any
) -> None:
    # durable= and busy_timeout_seconds= given to open() with a shared connection were
    # ignored without a word: the connection's pragmas and driver wait were kept.
    path = tmp_path / "shared.db"
    await (await store_class.open(path, create_schema=True)).aclose()
    relaxed = await connect(path, durable=False, busy_timeout_seconds=0.5)
    try:
        assert (await relaxed.fetch("PRAGMA synchronous"))[0][0] == 1  # NORMAL
        with pytest.raises(ConfigurationError, match=r"durable=True .* durable=False") as caught:
            await store_class.open(relaxed, durable=True)
        assert caught.value.fields == ("durable",)
        other_wait = r"busy_timeout_seconds=30 .* busy_timeout_seconds=0\.5"
        with pytest.raises(ConfigurationError, match=other_wait):
            await store_class.open(relaxed, busy_timeout_seconds=30)
        with pytest.raises(ConfigurationError, match=other_wait):
            store_class(relaxed, busy_timeout_seconds=30)
        # Its own values, or none given, are taken; the store reports the connection's.
        store = await store_class.open(relaxed, durable=False, busy_timeout_seconds=0.5)
        assert store.busy_timeout_seconds == 0.5
        await store.aclose()
        store = await store_class.open(relaxed)
        assert store.busy_timeout_seconds == 0.5
        await store.aclose()
    finally:
        await relaxed.close()
    durable = await connect(path)
    try:
        with pytest.raises(ConfigurationError, match=r"durable=False .* durable=True"):
            await store_class.open(durable, durable=False)
        assert (await durable.fetch("PRAGMA synchronous"))[0][0] == 2  # FULL, unchanged
    finally:
        await durable.close()


@pytest.mark.asyncio
async def test_a_store_built_on_a_connection_checks_its_busy_timeout(tmp_path: Path) -> None:
    connection = await connect(tmp_path / "shared.db")
    try:
        with pytest.raises(ConfigurationError, match="busy_timeout_seconds"):
            AsyncSqliteStateStore(connection, busy_timeout_seconds=math.inf)
        with pytest.raises(ConfigurationError, match="busy_timeout_seconds"):
            await AsyncSqliteWorkQueue.open(connection, busy_timeout_seconds=True)
    finally:
        await connection.close()


COMMON_BAD: list[tuple[dict[str, Any], str]] = [
    ({"max_value_bytes": 0}, "max_value_bytes"),
    ({"max_value_bytes": True}, "max_value_bytes"),
    ({"tables": "app_"}, "tables"),
    ({"bogus": 1}, "bogus"),
    ({"durable": "no"}, "durable"),
    ({"create_schema": "no"}, "create_schema"),
]
OWN_BAD: list[tuple[Any, dict[str, Any], str]] = [
    (AsyncSqliteWorkQueue, {"policy": "fast"}, "policy"),
    (AsyncSqliteStateStore, {"live_updates": "yes"}, "live_updates"),
    (AsyncSqliteStore, {"trace_max": 0}, "trace_max"),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("store_class", "options", "named"),
    [(c, o, n) for c in STORES for o, n in COMMON_BAD] + OWN_BAD,
)
async def test_a_bad_option_is_refused_naming_it_before_the_file_is_made(
    tmp_path: Path, store_class: Any, options: dict[str, Any], named: str
) -> None:
    """open() made the file (and switched it to WAL) before its options were checked: a
    refused call left a database behind; ``tables="app_"`` gave an AttributeError, and
    ``durable="no"`` silently opened with synchronous=FULL."""
    options = {"create_schema": True, **options}
    with pytest.raises(RunyardError) as caught:
        await store_class.open(tmp_path / "new.db", **options)
    assert named in str(caught.value)
    assert os.listdir(tmp_path) == []


@pytest.mark.asyncio
@pytest.mark.parametrize("path", [b"bytes.db", None, 7])
async def test_a_path_that_is_not_a_str_or_pathlike_is_refused_naming_path(path: Any) -> None:
    with pytest.raises(ConfigurationError, match="path must be a str") as caught:
        await AsyncSqliteStateStore.open(path, create_schema=True)
    assert caught.value.fields == ("path",)
    with pytest.raises(ConfigurationError, match="path must be a str"):
        await connect(path)


@pytest.mark.asyncio
async def test_open_given_durable_none_opens_durable(tmp_path: Path) -> None:
    # open()'s None is "not given": synchronous = FULL, as by default (it once meant NORMAL).
    store = await AsyncSqliteStateStore.open(tmp_path / "d.db", create_schema=True, durable=None)
    try:
        assert (await store.connection.fetch("PRAGMA synchronous"))[0][0] == 2
        assert store.connection.durable is True
    finally:
        await store.aclose()


@pytest.mark.asyncio
async def test_durable_must_be_a_bool_when_connecting(tmp_path: Path) -> None:
    bad: Any
    for bad in (None, "no", 0):
        with pytest.raises(ConfigurationError, match="durable must be True or False"):
            await connect(tmp_path / "c.db", durable=bad)
    assert os.listdir(tmp_path) == []


class _LabelledQueue(AsyncSqliteWorkQueue):
    """A store subclass with an option of its own, as an application may write."""

    def __init__(self, *args: Any, label: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.label = label


@pytest.mark.asyncio
async def test_a_subclass_option_goes_through_open(tmp_path: Path) -> None:
    # open() refused every option but its class's own list: a subclass's own was unknown.
    store = await _LabelledQueue.open(tmp_path / "q.db", create_schema=True, label="jobs")
    try:
        assert store.label == "jobs"
    finally:
        await store.aclose()
    with pytest.raises(ConfigurationError, match="takes no option 'labl'") as caught:
        await _LabelledQueue.open(tmp_path / "q.db", labl="jobs")
    assert "label" in str(caught.value) and caught.value.fields == ("labl",)


@pytest.mark.asyncio
async def test_create_schema_refuses_tables_that_are_not_sqlite_tables(tmp_path: Path) -> None:
    # A prefix string in their place failed as an AttributeError, after the file was made.
    with pytest.raises(ConfigurationError, match=r"tables must be a runyard\.sqlite\.SqliteTables"):
        create_schema(tmp_path / "a.db", "app_")  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == []
    connection = await connect(tmp_path / "b.db")
    try:
        with pytest.raises(ConfigurationError, match="tables must be"):
            await create_schema_on(connection, "app_")  # type: ignore[arg-type]
    finally:
        await connection.close()
