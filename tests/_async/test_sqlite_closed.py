"""A call on a closed SQLite store: one runyard error whichever twin, component or call, the
one the PostgreSQL stores raise with no connection to send on (``unavailable``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from runyard import QueueUnavailableError, RunKey, StatePersistenceError
from runyard._async.sqlite import connect, create_schema
from runyard.executions import Execution
from runyard.sqlite import AsyncSqliteStateStore, AsyncSqliteStore, AsyncSqliteWorkQueue

KEY = RunKey("acme", "run-1")


def _calls(store: Any) -> list[Callable[[], Awaitable[Any]]]:
    if isinstance(store, AsyncSqliteStateStore):
        return [
            lambda: store.put_run(KEY, {}, expected_version=0),
            lambda: store.get_run(KEY),
            lambda: store.acquire_lease(KEY, "me", ttl_seconds=30),
            lambda: store.verify(),
        ]
    if isinstance(store, AsyncSqliteWorkQueue):
        return [
            lambda: store.enqueue("acme", {}),
            lambda: store.claim("w1"),
            lambda: store.stats(),
            lambda: store.verify(),
        ]
    return [
        lambda: store.save(Execution(id="e", definition_id="d")),
        lambda: store.load("e"),
        lambda: store.verify(),
    ]


async def _assert_closed_error(store: Any) -> None:
    for call in _calls(store):
        if isinstance(store, AsyncSqliteWorkQueue):
            with pytest.raises(QueueUnavailableError, match="SQLite store is closed"):
                await call()
        else:
            with pytest.raises(StatePersistenceError, match="SQLite store is closed") as caught:
                await call()
            assert caught.value.reason == "unavailable"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "store_class", [AsyncSqliteStateStore, AsyncSqliteWorkQueue, AsyncSqliteStore]
)
async def test_a_call_on_a_closed_store_raises_the_closed_error(
    tmp_path: Path, store_class: Any
) -> None:
    store = await store_class.open(tmp_path / "closed.db", create_schema=True)
    await store.aclose()
    await _assert_closed_error(store)


@pytest.mark.asyncio
async def test_a_store_whose_shared_connection_was_closed_raises_the_closed_error(
    tmp_path: Path,
) -> None:
    connection = await connect(tmp_path / "shared.db")
    await create_schema(connection)
    stores = [
        await AsyncSqliteStateStore.open(connection),
        await AsyncSqliteWorkQueue.open(connection),
        await AsyncSqliteStore.open(connection),
    ]
    await connection.close()
    for store in stores:
        await _assert_closed_error(store)
