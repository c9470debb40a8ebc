"""A write whose reply is lost: StoreOutcomeUnknown, unless reading back settles it."""

from __future__ import annotations

from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool
from runyard import CounterDelta, RunKey, StoreOutcomeUnknown
from runyard.postgres import AsyncPostgresStateStore, AsyncPostgresWorkQueue, StateTables

from tests._async.postgres_support import open_store
from tests.support.postgres_plugin import PG_PORT
from tests.support.proxy import running_proxy


async def _pool_via(port: int) -> AsyncConnectionPool[Any]:
    dsn = f"host=127.0.0.1 port={port} user=postgres dbname=test options='-c statement_timeout=30s'"
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(dsn, min_size=1, max_size=1, open=False)
    await pool.open(wait=True)
    return pool


@pytest.mark.asyncio
async def test_a_patch_whose_reply_is_lost_is_outcome_unknown(pg_tables: StateTables) -> None:
    key = RunKey("acme", "r")
    with running_proxy(PG_PORT) as proxy:
        store = AsyncPostgresStateStore(
            await _pool_via(proxy.port), tables=pg_tables, close_source=True
        )
        async with store:
            await store.put_run(key, {}, expected_version=0)
            await store.patch_run(key, CounterDelta(iterations=1))  # prepares the statement
            proxy.drop_next_reply()
            with pytest.raises(StoreOutcomeUnknown):
                await store.patch_run(key, CounterDelta(iterations=1))
            assert proxy.dropped == 1
    direct = await open_store(pg_tables)
    async with direct:
        record = await direct.get_run(key)
        assert record is not None and record.iterations == 2  # it was applied, once


@pytest.mark.asyncio
async def test_a_put_whose_reply_is_lost_is_settled_by_reading_back(
    pg_tables: StateTables,
) -> None:
    key = RunKey("acme", "r")
    with running_proxy(PG_PORT) as proxy:
        store = AsyncPostgresStateStore(
            await _pool_via(proxy.port), tables=pg_tables, close_source=True
        )
        async with store:
            await store.put_run(key, {"v": 1}, expected_version=0)
            await store.put_run(key, {"v": 2}, expected_version=1)  # prepares the update
            proxy.drop_next_reply()
            record = await store.put_run(key, {"v": 3}, expected_version=2)
            assert proxy.dropped == 1
            assert (record.version, record.blob) == (3, {"v": 3})
            stored = await store.get_run(key)
            assert stored is not None and stored.version == 3


@pytest.mark.asyncio
async def test_a_complete_whose_reply_is_lost_is_settled_by_reading_back(
    pg_tables: StateTables,
) -> None:
    with running_proxy(PG_PORT) as proxy:
        queue = AsyncPostgresWorkQueue(
            await _pool_via(proxy.port), tables=pg_tables, close_source=True
        )
        async with queue:
            for i in range(2):
                await queue.enqueue("acme", {"i": i})
            first = await queue.claim("w1")
            assert first is not None
            await queue.complete(first.tenant, first.item_id, token=first.token)  # prepares
            second = await queue.claim("w1")
            assert second is not None
            proxy.drop_next_reply()
            await queue.complete(second.tenant, second.item_id, token=second.token)
            assert proxy.dropped == 1
            assert await queue.get_item(second.tenant, second.item_id) is None
