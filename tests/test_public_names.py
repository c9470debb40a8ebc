"""The names the docs tell users to import are importable from public modules (a review found
the worker's wake-ups, NewItem, the batched protocols and the memory live updates reachable only
through private modules)."""

from __future__ import annotations

import runyard
import runyard.postgres
import runyard.redis
from runyard._async.memory.updates import AsyncMemoryUpdates as PrivateAsyncMemoryUpdates
from runyard._async.postgres.wakeup import AsyncPostgresWakeup as PrivateAsyncPostgresWakeup
from runyard._async.protocols import AsyncBatchedWorkQueue as PrivateAsyncBatched
from runyard._async.redis.wakeup import AsyncRedisWakeup as PrivateAsyncRedisWakeup
from runyard._sync.postgres.wakeup import PostgresWakeup as PrivatePostgresWakeup
from runyard._sync.redis.wakeup import RedisWakeup as PrivateRedisWakeup
from runyard.models import NewItem as ModelsNewItem


def test_the_worker_wake_ups_are_exported_by_their_backends() -> None:
    assert runyard.redis.AsyncRedisWakeup is PrivateAsyncRedisWakeup
    assert runyard.redis.RedisWakeup is PrivateRedisWakeup
    assert runyard.postgres.AsyncPostgresWakeup is PrivateAsyncPostgresWakeup
    assert runyard.postgres.PostgresWakeup is PrivatePostgresWakeup
    for module in (runyard.redis, runyard.postgres):
        assert {name for name in module.__all__ if name.endswith("Wakeup")} <= set(dir(module))


def test_the_top_level_exports_what_the_protocol_docs_name() -> None:
    assert runyard.NewItem is ModelsNewItem
    assert runyard.AsyncBatchedWorkQueue is PrivateAsyncBatched
    assert runyard.AsyncMemoryUpdates is PrivateAsyncMemoryUpdates
    assert {"NewItem", "BatchedWorkQueue", "MemoryUpdates"} <= set(runyard.__all__)
    item = runyard.NewItem(payload={"a": 1})  # payload is a keyword, as docs/protocols.md shows
    assert item.payload == {"a": 1}
