"""Twin interop on PostgreSQL: one schema, rows written by one twin read by the other."""

from __future__ import annotations

from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from runyard import CounterDelta, RunKey
from runyard.postgres import (
    AsyncPostgresStateStore,
    AsyncPostgresWorkQueue,
    PostgresStateStore,
    PostgresWorkQueue,
    StateTables,
)

from tests.support.postgres_plugin import PG_DSN


async def _async_pool() -> AsyncConnectionPool[Any]:
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(PG_DSN, min_size=1, open=False)
    await pool.open(wait=True)
    return pool


def _sync_pool() -> ConnectionPool[Any]:
    return ConnectionPool(PG_DSN, min_size=1, open=True)


@pytest.mark.asyncio
async def test_sync_writes_are_read_patched_and_claimed_by_async(pg_tables: StateTables) -> None:
    with PostgresStateStore.open(_sync_pool(), tables=pg_tables, close_source=True) as store:
        store.put_run(RunKey("acme", "r1"), {"by": "sync"}, expected_version=0, session_id="s")
        store.patch_run(RunKey("acme", "r1"), CounterDelta(input_tokens=5))
    with PostgresWorkQueue.open(_sync_pool(), tables=pg_tables, close_source=True) as queue:
        queue.enqueue("acme", {"job": "from-sync"}, item_id="j1")

    a_store = await AsyncPostgresStateStore.open(
        await _async_pool(), tables=pg_tables, close_source=True
    )
    a_queue = await AsyncPostgresWorkQueue.open(
        await _async_pool(), tables=pg_tables, close_source=True
    )
    async with a_store, a_queue:
        run = await a_store.get_run(RunKey("acme", "r1"))
        assert run is not None and run.blob == {"by": "sync"} and run.input_tokens == 5
        patched = await a_store.patch_run(RunKey("acme", "r1"), CounterDelta(input_tokens=1))
        assert (patched.input_tokens, patched.version) == (6, 3)
        lease = await a_queue.claim("async-worker")
        assert lease is not None and lease.item_id == "j1"
        assert lease.item.payload == {"job": "from-sync"}
        await a_queue.complete(lease.tenant, lease.item_id, token=lease.token)


@pytest.mark.asyncio
async def test_async_writes_are_read_patched_and_claimed_by_sync(pg_tables: StateTables) -> None:
    a_store = await AsyncPostgresStateStore.open(
        await _async_pool(), tables=pg_tables, close_source=True
    )
    a_queue = await AsyncPostgresWorkQueue.open(
        await _async_pool(), tables=pg_tables, close_source=True
    )
    async with a_store, a_queue:
        await a_store.put_run(RunKey("acme", "r1"), {"by": "async"}, expected_version=0)
        lease_a = await a_store.acquire_lease(RunKey("acme", "r1"), "async", ttl_seconds=30)
        await a_queue.enqueue("acme", {"job": "from-async"}, item_id="j1")
        await a_store.release_lease(lease_a)

    with (
        PostgresStateStore.open(_sync_pool(), tables=pg_tables, close_source=True) as store,
        PostgresWorkQueue.open(_sync_pool(), tables=pg_tables, close_source=True) as queue,
    ):
        run = store.get_run(RunKey("acme", "r1"))
        assert run is not None and run.blob == {"by": "async"}
        lease = store.acquire_lease(RunKey("acme", "r1"), "sync", ttl_seconds=30)
        assert lease.epoch == lease_a.epoch + 1
        patched = store.patch_run(
            RunKey("acme", "r1"), CounterDelta(iterations=2), fence=lease.epoch
        )
        assert (patched.iterations, patched.version) == (2, 2)
        claimed = queue.claim("sync-worker")
        assert claimed is not None and claimed.item.payload == {"job": "from-async"}
        queue.complete(claimed.tenant, claimed.item_id, token=claimed.token)
        assert queue.get_item("acme", "j1") is None
