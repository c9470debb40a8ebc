"""bound(): state and work commit together in the caller's transaction, or neither does."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from psycopg import AsyncConnection
from runyard import ConfigurationError, RunKey
from runyard._flavours import async_gather
from runyard.postgres import AsyncPostgresWorkQueue, StateTables

from tests._async.postgres_support import open_pool, open_queue, open_store
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


@pytest.mark.asyncio
async def test_an_open_transaction_that_enqueued_delays_no_claim(pg_tables: StateTables) -> None:
    # Tenant "a" has due work and the oldest turn, so claims come to it first. A caller's
    # transaction enqueues more for "a" and stays open while four claims run at once. The
    # claimers' connections set lock_timeout: a claim that waited on any lock would fail
    # (55P03, retried, then raised) instead of returning a lease.
    queue = await open_queue(pg_tables)
    pool = await open_pool(4, kwargs={"options": "-c statement_timeout=30s -c lock_timeout=200ms"})
    claimers = await AsyncPostgresWorkQueue.open(pool, tables=pg_tables, close_source=True)
    async with queue, claimers, await _connect() as conn:
        await queue.enqueue("a", {}, item_id="a-1")
        for n in range(3):
            await queue.enqueue("b", {}, item_id=f"b-{n}")
        async with conn.transaction():
            await queue.bound(conn).enqueue("a", {}, item_id="a-2")
            leases = await async_gather([partial(claimers.claim, f"w{n}") for n in range(4)])
            claimed = sorted(lease.item_id for lease in leases if lease is not None)
            assert claimed == ["a-1", "b-0", "b-1", "b-2"]
        lease = await claimers.claim("w-after")
        assert lease is not None and lease.item_id == "a-2"
