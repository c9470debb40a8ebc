"""Another writer's blocking calls, straight to the server, for a proxy's ``then`` (its thread).

A sync-twin store of the same data (a Redis namespace, PostgreSQL tables) is opened for the
call and closed after it, so the async and the generated sync tests both hand it to
``ReplyDroppingProxy.drop_next_reply(then=...)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runyard.postgres import PostgresStateStore, StateTables
from runyard.redis import RedisStateStore, RedisStoreSettings

from tests._sync import postgres_support
from tests.support.redis_plugin import Clients, RedisTarget

__all__ = ["on_postgres", "on_redis"]


def on_redis(
    target: RedisTarget, settings: RedisStoreSettings, call: Callable[[RedisStateStore], Any]
) -> Callable[[], None]:
    """``call`` on a store of ``settings``' namespace on ``target``, as a blocking callable."""

    def run() -> None:
        clients = Clients.for_target(target)
        with RedisStateStore(clients, settings=settings, owns_client=True) as store:
            call(store)

    return run


def on_postgres(
    tables: StateTables, call: Callable[[PostgresStateStore], Any]
) -> Callable[[], None]:
    """``call`` on a store of ``tables``, as a blocking callable."""

    def run() -> None:
        with postgres_support.open_store(tables) as store:
            call(store)

    return run
