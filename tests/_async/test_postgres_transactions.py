"""bound(): state and work commit together in the caller's transaction, or neither does."""

from __future__ import annotations

from typing import Any

import pytest
from psycopg import AsyncConnection
from runyard import ConfigurationError, RunKey
from runyard.postgres import StateTables

from tests._async.postgres_support import open_queue, open_store
from tests.support.postgres_plugin import PG_DSN


class Boom(Exception):
    pass


async def _connect(**kwargs: Any) -> AsyncConnection[Any]:
    return await AsyncConnection.connect(PG_DSN, **kwargs)


@pytest.mark.asyncio
async def test_a_committed_transaction_leaves_the_run_and_its_work(
    pg_tables: StateTables,
) -> None:
    store, queue = await open_store(pg_tables), await open_queue(pg_tables)
    async with store, queue, await _connect() as conn:
        async with conn.transaction():
            await store.bound(conn).put_run(RunKey("acme", "r1"), {"step": 1}, expected_version=0)
            await queue.bound(conn).enqueue("acme", {"run": "r1"}, item_id="job-1")
        run = await store.get_run(RunKey("acme", "r1"))
        item = await queue.get_item("acme", "job-1")
        assert run is not None and run.blob == {"step": 1}
        assert item is not None and item.payload == {"run": "r1"}


@pytest.mark.asyncio
async def test_a_failed_transaction_leaves_neither(pg_tables: StateTables) -> None:
    store, queue = await open_store(pg_tables), await open_queue(pg_tables)
    async with store, queue, await _connect() as conn:

        async def write_both_then_fail() -> None:
            async with conn.transaction():
                await store.bound(conn).put_run(RunKey("acme", "r1"), {}, expected_version=0)
                await queue.bound(conn).enqueue("acme", {"run": "r1"}, item_id="job-1")
                raise Boom

        with pytest.raises(Boom):
            await write_both_then_fail()
        assert await store.get_run(RunKey("acme", "r1")) is None
        assert await queue.get_item("acme", "job-1") is None
        assert await queue.claim("w1") is None


@pytest.mark.asyncio
async def test_bound_writes_are_invisible_until_the_caller_commits(
    pg_tables: StateTables,
) -> None:
    store, queue = await open_store(pg_tables), await open_queue(pg_tables)
    async with store, queue, await _connect() as conn:
        await queue.bound(conn).enqueue("acme", {}, item_id="job-1")
        assert await queue.get_item("acme", "job-1") is None
        await conn.commit()
        assert await queue.get_item("acme", "job-1") is not None


@pytest.mark.asyncio
async def test_an_autocommit_connection_is_refused(pg_tables: StateTables) -> None:
    store, queue = await open_store(pg_tables), await open_queue(pg_tables)
    async with store, queue, await _connect(autocommit=True) as conn:
        with pytest.raises(ConfigurationError, match="autocommit"):
            store.bound(conn)
        with pytest.raises(ConfigurationError, match="autocommit"):
            queue.bound(conn)
        async with conn.transaction():
            await queue.bound(conn).enqueue("acme", {}, item_id="inside-a-block")
        assert await queue.get_item("acme", "inside-a-block") is not None
