"""Opening pools and stores on a test's schema."""

from __future__ import annotations

from typing import Any

from psycopg_pool import AsyncConnectionPool
from runyard import ManualClock, QueuePolicy
from runyard.postgres import AsyncPostgresStateStore, AsyncPostgresWorkQueue, StateTables

from tests.support.postgres_plugin import PG_DSN

__all__ = ["open_pool", "open_queue", "open_store"]


async def open_pool(max_size: int = 10, **kwargs: Any) -> AsyncConnectionPool[Any]:
    """An open pool on the test database, with a statement timeout set."""
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        PG_DSN, min_size=1, max_size=max_size, open=False, **kwargs
    )
    await pool.open(wait=True)
    return pool


async def open_store(
    tables: StateTables, clock: ManualClock | None = None, max_size: int = 10, **options: Any
) -> AsyncPostgresStateStore:
    """A verified state store that owns its pool (``options`` go to the store)."""
    return await AsyncPostgresStateStore.open(
        await open_pool(max_size), tables=tables, clock=clock, close_source=True, **options
    )


async def open_queue(
    tables: StateTables,
    clock: ManualClock | None = None,
    policy: QueuePolicy | None = None,
    max_size: int = 10,
) -> AsyncPostgresWorkQueue:
    """A verified work queue that owns its pool."""
    return await AsyncPostgresWorkQueue.open(
        await open_pool(max_size), tables=tables, clock=clock, policy=policy, close_source=True
    )
