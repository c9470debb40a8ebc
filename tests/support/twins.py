"""Drivers of the other twin's store for the kit's interop cases, as a flavour pair.

The async tests name ``AsyncTwins`` (drivers of sync-twin stores); the generated sync tests
name ``Twins`` (drivers of async-twin stores). Each driver opens a store on the same data as
the kit's store (a Redis namespace, a PostgreSQL schema, a SQLite file) for each call.
"""

from __future__ import annotations

from typing import Any

from runyard.postgres import StateTables
from runyard.redis import AsyncRedisStateStore, RedisStateStore, RedisStoreSettings
from runyard.sqlite import AsyncSqliteStateStore, SqliteStateStore
from runyard.testing import BlockingTwin, LoopTwin, TwinDriver

from tests._async import postgres_support as async_postgres
from tests._sync import postgres_support as sync_postgres
from tests.support.redis_plugin import AsyncClients, Clients, RedisTarget

__all__ = ["AsyncTwins", "Twins"]


class AsyncTwins:
    """For the async kit: drivers of sync-twin stores."""

    @staticmethod
    def redis(target: RedisTarget, settings: RedisStoreSettings, live: bool) -> TwinDriver:
        """A sync store on ``settings``' namespace of ``target``."""
        return BlockingTwin(
            lambda: RedisStateStore(
                Clients.for_target(target), settings=settings, owns_client=True, live_updates=live
            )
        )

    @staticmethod
    def postgres(tables: StateTables, live: bool) -> TwinDriver:
        """A sync store on ``tables``."""
        return BlockingTwin(lambda: sync_postgres.open_store(tables, live_updates=live))

    @staticmethod
    def sqlite(path: str, live: bool) -> TwinDriver:
        """A sync store on the file at ``path``."""
        return BlockingTwin(lambda: SqliteStateStore.open(path, live_updates=live))


class Twins:
    """For the sync kit: drivers of async-twin stores."""

    @staticmethod
    def redis(target: RedisTarget, settings: RedisStoreSettings, live: bool) -> TwinDriver:
        """An async store on ``settings``' namespace of ``target``."""

        async def open_store() -> Any:
            return AsyncRedisStateStore(
                AsyncClients.for_target(target),
                settings=settings,
                owns_client=True,
                live_updates=live,
            )

        return LoopTwin(open_store)

    @staticmethod
    def postgres(tables: StateTables, live: bool) -> TwinDriver:
        """An async store on ``tables``."""

        async def open_store() -> Any:
            return await async_postgres.open_store(tables, live_updates=live)

        return LoopTwin(open_store)

    @staticmethod
    def sqlite(path: str, live: bool) -> TwinDriver:
        """An async store on the file at ``path``."""

        async def open_store() -> Any:
            return await AsyncSqliteStateStore.open(path, live_updates=live)

        return LoopTwin(open_store)
