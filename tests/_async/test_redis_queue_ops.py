"""Redis queue behaviour beyond the kit: wake hints from the scripts, one round trip per batched
call, bounded reclaim, prune and promotion, per-item fields in the item hash, fresh tokens on
adopt."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from redis.crc import key_slot
from runyard import ManualClock, QueuePolicy
from runyard.errors import (
    ItemLeasedError,
    LeaseLostError,
    StoreOutcomeUnknown,
    WorkItemNotFoundError,
)
from runyard.models import NewItem
from runyard.policy import RECLAIM_PER_CLAIM
from runyard.redis import AsyncRedisWorkQueue, RedisStoreSettings
from runyard.redis.flavours import AsyncRedisClient
from runyard.redis.items import PROMOTE_BATCH
from runyard.redis.keys import QueueKeys
from runyard.redis.wake import WAKE_LIST_MAX, wake_key

from tests.support.proxy import ReplyDroppingProxy, running_proxy
from tests.support.redis_commands import counting_commands
from tests.support.redis_plugin import AsyncClients, RedisTarget, fresh_namespace

POLICY = QueuePolicy(lease_seconds=10, max_attempts=3, backoff_base=0, backoff_cap=0)


class _Queue:
    def __init__(self, target: RedisTarget, policy: QueuePolicy = POLICY) -> None:
        self.namespace = fresh_namespace()
        self.clock = ManualClock()
        self.client: AsyncRedisClient = AsyncClients.for_target(target)
        settings = RedisStoreSettings(namespace=self.namespace, durable=False)
        self.queue = AsyncRedisWorkQueue(
            self.client, policy=policy, clock=self.clock, settings=settings, owns_client=True
        )
        self.keys = QueueKeys(self.namespace)


@pytest_asyncio.fixture
async def q(dedicated_redis_target: RedisTarget) -> AsyncIterator[_Queue]:
    made = _Queue(dedicated_redis_target)
    yield made
    await made.queue.aclose()


def test_the_wake_key_is_declared_and_in_the_queue_slot() -> None:
    keys = QueueKeys("ns")
    assert wake_key("ns") in keys.all()
    slots = {key_slot(k.encode()) for k in [*keys.all(), keys.item("{t}", "a{b}")]}
    assert len(slots) == 1


@pytest.mark.asyncio
async def test_ready_items_push_bounded_wake_hints_delayed_ones_none(q: _Queue) -> None:
    wake = wake_key(q.namespace)
    await q.queue.enqueue("acme", 1, delay_seconds=5)
    await q.queue.enqueue("acme", 2, run_at=q.clock.now() + 5)
    await q.queue.enqueue_many("acme", [NewItem(payload=3, delay_seconds=9)])
    assert await q.client.llen(wake) == 0
    await q.queue.enqueue("acme", 4)
    await q.queue.enqueue("acme", 5, run_at=q.clock.now() - 5)  # past: due at once
    assert await q.client.llen(wake) == 2
    await q.queue.enqueue_many("acme", [NewItem(payload=n) for n in range(3)])
    assert await q.client.llen(wake) == 5
    for n in range(WAKE_LIST_MAX):
        await q.queue.enqueue("acme", n)
    await q.queue.enqueue_many("acme", [NewItem(payload=n) for n in range(500)])
    assert await q.client.llen(wake) == WAKE_LIST_MAX


@pytest.mark.asyncio
async def test_release_many_wakes_and_a_dedupe_hit_does_not(q: _Queue) -> None:
    wake = wake_key(q.namespace)
    await q.queue.enqueue("acme", 1, dedupe_key="k")
    await q.client.delete(wake)
    await q.queue.enqueue("acme", 1, dedupe_key="k")
    assert await q.client.llen(wake) == 0
    leases = await q.queue.claim_many("w", limit=5)
    assert await q.queue.release_many(leases) == [None]
    assert await q.client.llen(wake) == 1


@pytest.mark.asyncio
async def test_each_batched_call_is_one_script(
    q: _Queue, dedicated_redis_target: RedisTarget
) -> None:
    await q.queue.stats()  # the layout check
    with counting_commands(dedicated_redis_target.port) as counted:
        await q.queue.enqueue_many("acme", [NewItem(payload=n) for n in range(50)])
        leases = await q.queue.claim_many("w", limit=40)
        renewed = await q.queue.heartbeat_many(leases)
        assert await q.queue.complete_many(leases[:20]) == [None] * 20
        assert await q.queue.release_many(leases[20:]) == [None] * 20
    assert len(leases) == len(renewed) == 40
    assert counted.sent.count("evalsha") == 5
    assert set(counted.sent) <= {"evalsha", "eval"}


@pytest.mark.asyncio
async def test_a_claim_reclaims_a_bounded_few_lapsed_leases(q: _Queue) -> None:
    await q.queue.enqueue_many("acme", [NewItem(payload=n) for n in range(12)])
    assert len(await q.queue.claim_many("w1", limit=10)) == 10
    q.clock.advance(11)
    lease = await q.queue.claim("w2")
    assert lease is not None
    stats = await q.queue.stats()
    # 8 lapsed leases went back to ready; 2 wait for the next claim or reap.
    assert RECLAIM_PER_CLAIM == 8
    assert (stats.leased, stats.ready) == (10 - RECLAIM_PER_CLAIM + 1, RECLAIM_PER_CLAIM + 1)


@pytest.mark.asyncio
async def test_a_lapse_is_retried_after_the_backoff(dedicated_redis_target: RedisTarget) -> None:
    policy = QueuePolicy(lease_seconds=10, backoff_base=4, backoff_cap=4, random=lambda: 0.5)
    made = _Queue(dedicated_redis_target, policy)
    queue = made.queue
    await queue.enqueue("acme", 1)
    await queue.claim("w1")
    made.clock.advance(11)
    (reaped,) = await queue.reap()
    lapse_is_delayed = policy.on_lapse(1, 0.0).retry_at != 0.0
    # The delay is the policy's decision for a lapse (its backoff once it decides so).
    assert reaped.available_at == made.clock.now() + (2.0 if lapse_is_delayed else 0.0)
    await queue.aclose()


@pytest.mark.asyncio
async def test_per_item_max_attempts_is_stored_with_the_item(q: _Queue) -> None:
    item = await q.queue.enqueue("acme", 1, item_id="a", max_attempts=1)
    assert item.max_attempts == 1
    assert await q.client.hget(q.keys.item("acme", "a"), "m") == b"1"
    lease = await q.queue.claim("w")
    assert lease is not None
    dead = await q.queue.fail(lease, error="boom")
    assert dead.state == "dead" and dead.max_attempts == 1
    (letter,) = await q.queue.dead_letters("acme")
    assert letter.reason == "failed 1 of 1 attempts"


@pytest.mark.asyncio
async def test_adopt_mints_fresh_tokens_and_the_old_ones_are_refused(q: _Queue) -> None:
    await q.queue.enqueue_many("acme", [NewItem(payload=n) for n in range(3)])
    old = await q.queue.claim_many("w", limit=3)
    adopted = await q.queue.adopt("w")
    assert [a.item_id for a in adopted] == [o.item_id for o in old]
    assert all(a.token > max(o.token for o in old) for a in adopted)
    (refused,) = await q.queue.complete_many(old[:1])
    assert isinstance(refused, LeaseLostError) and refused.reason == "taken"
    with pytest.raises(LeaseLostError):
        await q.queue.heartbeat(old[1])
    assert await q.queue.complete_many(adopted) == [None, None, None]


@pytest.mark.asyncio
async def test_cancel_purge_and_prune_leave_nothing_behind(q: _Queue) -> None:
    await q.queue.enqueue("a", 1, item_id="ready", dedupe_key="d")
    await q.queue.enqueue("b", 2, item_id="later", delay_seconds=60)
    await q.queue.enqueue("c", 3, item_id="held")
    lease = await q.queue.claim("w")
    assert lease is not None and lease.tenant == "a"
    lease_c = await q.queue.claim("w")
    assert lease_c is not None and lease_c.tenant == "c"
    await q.queue.fail(lease, retryable=False)
    with pytest.raises(ItemLeasedError):
        await q.queue.cancel("c", "held")
    assert await q.queue.cancel("b", "later") and not await q.queue.cancel("b", "later")
    await q.queue.complete(lease_c)
    q.clock.advance(30)
    assert await q.queue.purge_dead("a", older_than=60) == 0
    assert await q.queue.purge_dead("a", older_than=10) == 1
    assert await q.queue.prune(limit=2) == 2
    assert await q.queue.prune(limit=2) == 1
    assert await q.queue.prune() == 0
    keys = q.keys.all()
    for key in (keys[1], keys[2], keys[3], keys[4], keys[5], keys[6], keys[7], keys[8]):
        assert not await q.client.exists(key), key
    assert await q.queue.enqueue("a", 1, dedupe_key="d")
    assert (await q.queue.stats()).tenants == 1


# -- lost replies to the batched calls ---------------------------------------------------------
@pytest_asyncio.fixture
async def lossy(
    dedicated_redis_target: RedisTarget,
) -> AsyncIterator[tuple[_Queue, ReplyDroppingProxy]]:
    with running_proxy(dedicated_redis_target.port) as proxy:
        made = _Queue(RedisTarget("server", port=proxy.port))
        await made.queue.stats()  # the layout check, before any reply is dropped
        yield made, proxy
        await made.queue.aclose()


@pytest.mark.asyncio
async def test_a_lost_enqueue_many_reply_is_resent_only_when_every_item_has_an_identity(
    lossy: tuple[_Queue, ReplyDroppingProxy],
) -> None:
    made, proxy = lossy
    proxy.drop_next_reply()
    items = await made.queue.enqueue_many(
        "acme", [NewItem(payload=1, item_id="a"), NewItem(payload=2, dedupe_key="k")]
    )
    assert proxy.dropped == 1 and [i.payload for i in items] == [1, 2]
    assert (await made.queue.stats()).ready == 2
    proxy.drop_next_reply()
    with pytest.raises(StoreOutcomeUnknown):
        await made.queue.enqueue_many("acme", [NewItem(payload=3, item_id="b"), NewItem(payload=4)])
    assert (await made.queue.stats()).ready == 4


@pytest.mark.asyncio
async def test_lost_claim_many_and_complete_many_replies_are_outcome_unknown(
    lossy: tuple[_Queue, ReplyDroppingProxy],
) -> None:
    made, proxy = lossy
    await made.queue.enqueue_many("acme", [NewItem(payload=n) for n in range(3)])
    proxy.drop_next_reply()
    with pytest.raises(StoreOutcomeUnknown):
        await made.queue.claim_many("w", limit=2)
    leases = await made.queue.adopt("w")  # what the lost claim took
    assert len(leases) == 2
    proxy.drop_next_reply()
    renewed = await made.queue.heartbeat_many(leases)  # re-sent: extends the same leases
    assert proxy.dropped == 2 and all(not isinstance(r, Exception) for r in renewed)
    proxy.drop_next_reply()
    with pytest.raises(StoreOutcomeUnknown):
        await made.queue.complete_many(leases)
    again = await made.queue.complete_many(leases)  # the first send finished them
    assert all(isinstance(r, WorkItemNotFoundError) for r in again)
    assert (await made.queue.stats()).ready == 1


@pytest.mark.asyncio
async def test_a_lost_cancel_reply_is_outcome_unknown(
    lossy: tuple[_Queue, ReplyDroppingProxy],
) -> None:
    made, proxy = lossy
    await made.queue.enqueue("acme", 1, item_id="a")
    proxy.drop_next_reply()
    with pytest.raises(StoreOutcomeUnknown):
        await made.queue.cancel("acme", "a")
    assert await made.queue.get_item("acme", "a") is None


@pytest.mark.asyncio
async def test_an_item_due_behind_more_than_a_promotion_batch_waits_for_its_promotion(
    q: _Queue,
) -> None:
    # docs/redis.md, "Round trips": a claim promotes at most PROMOTE_BATCH due items, earliest
    # first, so b's item (due after z's 5,000) joins the rotation at claim 6, not claim 1.
    assert PROMOTE_BATCH == 1000
    await q.queue.enqueue("b", {}, item_id="b0")
    lease = await q.queue.claim("w")
    assert lease is not None
    await q.queue.complete(lease)
    for batch in range(5):
        items = [
            NewItem(payload={}, item_id=f"z{batch}-{n}", delay_seconds=10) for n in range(1000)
        ]
        await q.queue.enqueue_many("z", items)
    await q.queue.enqueue("b", {}, item_id="b1", delay_seconds=11)
    q.clock.advance(12)
    served = []
    for _ in range(6):
        lease = await q.queue.claim("w")
        assert lease is not None
        served.append(lease.tenant)
    assert served == ["z"] * 5 + ["b"]
