"""The Redis queue against the memory backend, fed the same seeded scripts of queue operations
(tests/support/queue_differential.py, adopt included): every call must give the same result,
on the machine's Redis and on fakeredis. The SQLite lane, with its own rotation checks, is
tests/test_sqlite_queue_differential.py.

PostgreSQL has no lane here: it retires a tenant's rotation row once a claim drains its ready
items (docs/protocols.md, "Fair rotation", a difference the kit leaves open), so a drained
tenant that comes back rejoins as a new tenant, and `prune` finds fewer entries to forget; the
seeded scripts meet that in most runs (24 of 25 differed at a claim or a prune when tried)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from runyard import ManualClock, MemoryWorkQueue
from runyard.redis import RedisStoreSettings, RedisWorkQueue

from tests.support.queue_differential import POLICY, run_script
from tests.support.redis_plugin import Clients, RedisTarget, fresh_namespace

T0 = 1_000.0


@pytest.fixture(params=["local_redis_target", "fake_redis_target"])
def target(request: pytest.FixtureRequest) -> Iterator[RedisTarget]:
    chosen: RedisTarget = request.getfixturevalue(request.param)
    yield chosen


@pytest.mark.parametrize("seed", range(25))
def test_redis_serves_as_the_memory_backend_does(target: RedisTarget, seed: int) -> None:
    namespace = fresh_namespace()
    mem_clock, store_clock = ManualClock(T0), ManualClock(T0)
    store = RedisWorkQueue(
        Clients.for_target(target),
        policy=POLICY,
        clock=store_clock,
        settings=RedisStoreSettings(namespace=namespace, durable=False),
        owns_client=True,
    )
    try:
        memory = MemoryWorkQueue(clock=mem_clock, policy=POLICY)
        run_script(memory, store, mem_clock, store_clock, seed=seed, steps=200, tenants=6)
    finally:
        store.close()
        target.purge(namespace)
