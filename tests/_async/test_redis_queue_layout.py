"""The Redis queue's key layout (one small hash per item, a versioned namespace) and its
bounded scripts."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from runyard import ManualClock, QueuePolicy
from runyard.errors import ConfigurationError
from runyard.models import Lease, NewItem
from runyard.redis import AsyncRedisWorkQueue, RedisStoreSettings
from runyard.redis.flavours import ResponseError
from runyard.redis.keys import QUEUE_LAYOUT, QueueKeys, time_key
from runyard.redis.scripts import QUEUE_SCRIPTS

from tests.support.redis_commands import SentCommands, counting_commands
from tests.support.redis_plugin import AsyncClients, RedisTarget, fresh_namespace


def _settings(namespace: str) -> RedisStoreSettings:
    return RedisStoreSettings(namespace=namespace, durable=False)


def test_the_lua_layout_version_is_the_python_one() -> None:
    assert f"local LAYOUT = '{QUEUE_LAYOUT}'" in QUEUE_SCRIPTS["claim"].text


@pytest.mark.asyncio
async def test_each_item_is_one_small_hash_in_the_queue_slot(
    dedicated_redis_target: RedisTarget,
) -> None:
    namespace = fresh_namespace()
    client = AsyncClients.for_target(dedicated_redis_target)
    async with AsyncRedisWorkQueue(
        client, clock=ManualClock(), settings=_settings(namespace), owns_client=True
    ) as queue:
        await queue.enqueue("acme", {"n": 1}, item_id="a")
        keys = QueueKeys(namespace)
        fields = await client.hgetall(keys.item("acme", "a"))
        # Short field names; defaults (ready, priority 0, no attempts, due at enqueue) left out;
        # the header (enqueue time, readiness seq: 13 bytes) in front of the payload.
        assert set(fields) == {b"p"} and fields[b"p"][13:] == b'{"n":1}'
        assert await client.hget(keys.all()[0], "layout") == str(QUEUE_LAYOUT).encode()
        assert not await client.exists(keys.legacy_items)
        assert keys.item("acme", "a") == f"{{{namespace}}}:i:4:acme1:a"
        lease = await queue.claim("w")
        assert lease is not None
        await queue.complete(lease)
        assert not await client.exists(keys.item("acme", "a"))


@pytest.mark.asyncio
async def test_a_namespace_in_the_old_layout_is_refused_naming_both_versions(
    dedicated_redis_target: RedisTarget,
) -> None:
    namespace = fresh_namespace()
    client = AsyncClients.for_target(dedicated_redis_target)
    legacy = QueueKeys(namespace).legacy_items
    # Layout 1: every column of every item a field of one hash, no meta key.
    await client.hset(legacy, mapping={"4:acme:1:a:state": "ready", "4:acme:1:a:payload": "1"})
    try:
        with pytest.raises(ConfigurationError, match=r"layout version 1.*layout version 3"):
            await AsyncRedisWorkQueue.open(client, settings=_settings(namespace))
        queue = AsyncRedisWorkQueue(client, clock=ManualClock(), settings=_settings(namespace))
        with pytest.raises(ConfigurationError, match=r"layout version 1.*layout version 3"):
            await queue.claim("w")
        with pytest.raises(ConfigurationError, match="layout version 1"):
            await queue.get_item("acme", "a")
        assert await client.hgetall(legacy) == {
            b"4:acme:1:a:state": b"ready",
            b"4:acme:1:a:payload": b"1",
        }
    finally:
        dedicated_redis_target.purge(namespace)
        await client.aclose()


@pytest.mark.asyncio
@pytest.mark.parametrize("version", ["2", "4"])
async def test_a_namespace_stamped_with_another_version_is_refused(
    dedicated_redis_target: RedisTarget, version: str
) -> None:
    namespace = fresh_namespace()
    client = AsyncClients.for_target(dedicated_redis_target)
    await client.hset(QueueKeys(namespace).all()[0], "layout", version)
    try:
        with pytest.raises(ConfigurationError, match=rf"layout version {version}.*version 3"):
            await AsyncRedisWorkQueue.open(client, settings=_settings(namespace))
        queue = AsyncRedisWorkQueue(client, clock=ManualClock(), settings=_settings(namespace))
        with pytest.raises(ConfigurationError, match=rf"layout version {version}.*version 3"):
            await queue.enqueue("acme", 1)
    finally:
        dedicated_redis_target.purge(namespace)
        await client.aclose()


@pytest.mark.asyncio
async def test_a_fresh_namespace_gets_the_layout_on_open(
    dedicated_redis_target: RedisTarget,
) -> None:
    namespace = fresh_namespace()
    client = AsyncClients.for_target(dedicated_redis_target)
    try:
        await AsyncRedisWorkQueue.open(client, settings=_settings(namespace))
        meta = QueueKeys(namespace).all()[0]
        assert await client.hget(meta, "layout") == str(QUEUE_LAYOUT).encode()
    finally:
        dedicated_redis_target.purge(namespace)
        await client.aclose()


@pytest.mark.asyncio
async def test_dead_letter_keys_sort_by_the_python_time_key(
    dedicated_redis_target: RedisTarget,
) -> None:
    namespace = fresh_namespace()
    clock = ManualClock(1_700_000_123.25)
    client = AsyncClients.for_target(dedicated_redis_target)
    async with AsyncRedisWorkQueue(
        client,
        clock=clock,
        policy=QueuePolicy(max_attempts=1),
        settings=_settings(namespace),
        owns_client=True,
    ) as queue:
        await queue.enqueue("acme", 1, item_id="a")
        lease = await queue.claim("w")
        assert lease is not None
        await queue.fail(lease, retryable=False)
        dead = await client.zrange(QueueKeys(namespace).all()[5], 0, -1)
        assert dead == [f"4:acme{time_key(1_700_000_123.25)}a".encode()]


@pytest.mark.asyncio
async def test_adopt_over_20000_stale_entries_reads_at_most_1000_per_script(
    dedicated_redis_target: RedisTarget,
) -> None:
    namespace = fresh_namespace()
    client = AsyncClients.for_target(dedicated_redis_target)
    keys = QueueKeys(namespace).all()
    # Index entries whose items are gone (what a crash between writes could leave behind).
    stale = {f"2:w1{n:016d}4:acme6:g{n:05d}": 0 for n in range(20_000)}
    await client.zadd(keys[4], stale)
    await client.hset(keys[9], "token", 20_000)  # tokens come from the counter
    async with AsyncRedisWorkQueue(
        client, clock=ManualClock(), settings=_settings(namespace), owns_client=True
    ) as queue:
        with counting_commands(dedicated_redis_target.port) as counted:
            assert await queue.adopt("w1", limit=10) == []
        # 20 scripts of 1,000 entries each, then one that finds the index exhausted.
        assert counted.sent.count("evalsha") == 21
        ranges = [c for c in counted.scripted if c.upper().startswith("ZRANGEBYLEX")]
        assert all(c.endswith(" LIMIT 0 10") for c in ranges)
        assert len(ranges) == 2001


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("payload", "split"),
    [("x" * 48, False), ("x" * 49, True), ("é" * 200, True), ("y" * 2000, False)],
)
async def test_a_payload_is_split_only_to_keep_the_item_hash_small(
    dedicated_redis_target: RedisTarget, payload: str, split: bool
) -> None:
    namespace = fresh_namespace()
    client = AsyncClients.for_target(dedicated_redis_target)
    async with AsyncRedisWorkQueue(
        client, clock=ManualClock(), settings=_settings(namespace), owns_client=True
    ) as queue:
        await queue.enqueue("acme", payload, item_id="a")
        name = QueueKeys(namespace).item("acme", "a")
        assert (await client.hexists(name, "1")) is split
        assert (await client.hexists(name, "p")) is not split
        if split:
            assert await client.object("encoding", name) == b"listpack"
        got = await queue.get_item("acme", "a")
        assert got is not None and got.payload == payload
        lease = await queue.claim("w")
        assert lease is not None and lease.item.payload == payload


@pytest.mark.asyncio
async def test_a_script_told_an_item_refuses_its_key_when_not_declared(
    dedicated_redis_target: RedisTarget,
) -> None:
    namespace = fresh_namespace()
    client = AsyncClients.for_target(dedicated_redis_target)
    keys = QueueKeys(namespace)
    async with AsyncRedisWorkQueue(
        client, clock=ManualClock(), settings=_settings(namespace), owns_client=True
    ) as queue:
        await queue.enqueue("acme", 1, item_id="a")
        script = QUEUE_SCRIPTS["get_item"].text
        # Another item's key declared instead of this one's: refused, nothing read.
        for declared in ([], [keys.item("acme", "b")]):
            with pytest.raises(ResponseError, match="RUNYARD_UNDECLARED"):
                await client.eval(script, 14 + len(declared), *keys.all(), *declared, "acme", "a")
        reply = await client.eval(script, 15, *keys.all(), keys.item("acme", "a"), "acme", "a")
        assert reply[1] == b"a"


def _declared_and_touched(counted: SentCommands, namespace: str) -> tuple[set[str], set[str]]:
    """The item and line keys the block's scripts were given, and those their calls touched."""
    keys = QueueKeys(namespace)
    wanted = (f"{{{namespace}}}:i:", f"{keys.prefix}:ready:")
    declared: set[str] = set()
    for command in counted.sent_with_arguments:
        name, *rest = command.split(" ")
        if name.upper() in ("EVALSHA", "EVAL"):
            declared.update(k for k in rest[2 : 2 + int(rest[1])] if k.startswith(wanted))
    touched = {
        token
        for command in counted.scripted
        for token in command.split(" ")
        if token.startswith(wanted)
    }
    return declared, touched


@pytest.mark.asyncio
async def test_scripts_told_their_items_touch_only_the_keys_they_declare(
    dedicated_redis_target: RedisTarget,
) -> None:
    namespace = fresh_namespace()
    clock = ManualClock()
    client = AsyncClients.for_target(dedicated_redis_target)
    async with AsyncRedisWorkQueue(
        client,
        clock=clock,
        policy=QueuePolicy(max_attempts=2, backoff_base=0),
        settings=_settings(namespace),
        owns_client=True,
    ) as queue:
        port = dedicated_redis_target.port

        async def told(operation: Callable[[], Awaitable[object]]) -> None:
            with counting_commands(port) as counted:
                await operation()
            declared, touched = _declared_and_touched(counted, namespace)
            assert touched and touched <= declared

        await told(lambda: queue.enqueue("acme", 1, item_id="a", dedupe_key="d"))
        news = [NewItem(payload=1, item_id="b"), NewItem(payload=2, item_id="c")]
        await told(lambda: queue.enqueue_many("acme", news))
        await told(lambda: queue.get_item("acme", "a"))

        async def claim() -> Lease:
            lease = await queue.claim("w")
            assert lease is not None
            return lease

        first = await claim()
        assert first.item_id == "a"
        await told(lambda: queue.heartbeat(first))
        await told(lambda: queue.complete(first))
        second = await claim()
        await told(lambda: queue.fail(second, error="boom"))  # retried at once: back in its line
        leases = await queue.claim_many("w", limit=3)
        await told(lambda: queue.heartbeat_many(leases))
        await told(lambda: queue.release_many(leases[:1]))
        await told(lambda: queue.complete_many(leases[1:]))
        third = await claim()
        await told(lambda: queue.fail(third, retryable=False))
        await told(lambda: queue.requeue(third.tenant, third.item_id))
        await told(lambda: queue.cancel(third.tenant, third.item_id))
