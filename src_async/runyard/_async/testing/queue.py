"""AsyncWorkQueueConformance: the cases every WorkQueue must pass."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from functools import partial

import pytest
import pytest_asyncio

from runyard._async.protocols import AsyncWorkQueue
from runyard._async.testing._kit import KIT_POLICY
from runyard._async.testing.batched import AsyncBatchedQueueCases
from runyard._async.testing.queue_admin import AsyncQueueAdminCases
from runyard._async.testing.queue_recovery import AsyncQueueRecoveryCases
from runyard._async.testing.queue_schedule import AsyncQueueScheduleCases
from runyard._async.testing.roundtrip import AsyncQueueRoundTripCases
from runyard._async.testing.validation import AsyncQueueValidationCases
from runyard._flavours import async_gather
from runyard.capabilities import certify
from runyard.errors import LeaseLostError, WorkItemNotFoundError

__all__ = ["KIT_POLICY", "AsyncWorkQueueConformance"]


class AsyncWorkQueueConformance(
    AsyncQueueValidationCases,
    AsyncQueueRoundTripCases,
    AsyncBatchedQueueCases,
    AsyncQueueScheduleCases,
    AsyncQueueAdminCases,
    AsyncQueueRecoveryCases,
):
    """Subclass as ``TestMyQueue`` and implement ``make_queue`` and ``advance``.

    ``make_queue(policy)`` returns a fresh, empty queue (its own namespace) that uses
    ``policy`` and a clock that ``advance`` moves forward.
    """

    @pytest_asyncio.fixture
    async def queue(self) -> AsyncIterator[AsyncWorkQueue]:
        queue = await self.make_queue(KIT_POLICY)
        certify(queue)
        try:
            yield queue
        finally:
            await queue.aclose()

    # -- claiming -----------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_empty_claim_is_none(self, queue: AsyncWorkQueue) -> None:
        assert await queue.claim("w1") is None

    @pytest.mark.asyncio
    async def test_claims_are_exclusive(self, queue: AsyncWorkQueue) -> None:
        await queue.enqueue("acme", {"n": 1})
        await queue.enqueue("acme", {"n": 2})
        first, second = await self._lease(queue, "w1"), await self._lease(queue, "w2")
        assert first.item_id != second.item_id and first.token != second.token
        assert await queue.claim("w3") is None
        assert (first.worker, first.item.attempts, first.item.state) == ("w1", 1, "leased")

    @pytest.mark.asyncio
    async def test_completed_item_never_returns(self, queue: AsyncWorkQueue) -> None:
        item = await queue.enqueue("acme", {"job": "x"})
        lease = await self._lease(queue)
        assert lease.item.payload == {"job": "x"}
        await queue.complete(lease.tenant, lease.item_id, token=lease.token)
        self.advance(KIT_POLICY.max_lease_seconds * 2)
        assert await queue.reap(limit=10) == []
        assert await queue.claim("w1") is None
        assert await queue.get_item("acme", item.item_id) is None

    @pytest.mark.asyncio
    async def test_lapsed_claim_is_requeued_with_the_attempt_counted(
        self, queue: AsyncWorkQueue
    ) -> None:
        await queue.enqueue("acme", {})
        first = await self._lease(queue)
        self.advance(KIT_POLICY.lease_seconds + 1)
        reaped = await queue.reap(limit=10)
        assert [(i.item_id, i.state, i.attempts) for i in reaped] == [(first.item_id, "ready", 1)]
        assert reaped[0].available_at == pytest.approx(
            first.claimed_at + KIT_POLICY.lease_seconds + 1 + KIT_POLICY.backoff(1)
        )
        self.advance(KIT_POLICY.backoff(1))
        second = await self._lease(queue, "w2")
        assert second.item_id == first.item_id and second.item.attempts == 2
        assert second.token != first.token

    @pytest.mark.asyncio
    async def test_reap_leaves_live_leases_alone(self, queue: AsyncWorkQueue) -> None:
        await queue.enqueue("acme", {})
        lease = await self._lease(queue)
        self.advance(KIT_POLICY.lease_seconds - 1)
        assert await queue.reap(limit=10) == []
        await queue.complete(lease.tenant, lease.item_id, token=lease.token)

    @pytest.mark.asyncio
    async def test_heartbeat_keeps_the_claim(self, queue: AsyncWorkQueue) -> None:
        await queue.enqueue("acme", {})
        lease = await self._lease(queue)
        for _ in range(3):
            self.advance(KIT_POLICY.lease_seconds - 5)
            lease = await queue.heartbeat(lease.tenant, lease.item_id, token=lease.token)
        assert await queue.reap(limit=10) == []
        assert await queue.claim("w2") is None
        await queue.complete(lease.tenant, lease.item_id, token=lease.token)

    @pytest.mark.asyncio
    async def test_heartbeat_past_max_lease_raises_capped(self, queue: AsyncWorkQueue) -> None:
        await queue.enqueue("acme", {})
        lease = await self._lease(queue)
        step = KIT_POLICY.lease_seconds - 10
        elapsed = 0.0
        while elapsed + step < KIT_POLICY.max_lease_seconds:
            self.advance(step)
            elapsed += step
            lease = await queue.heartbeat(lease.tenant, lease.item_id, token=lease.token)
        assert lease.expires_at <= lease.claimed_at + KIT_POLICY.max_lease_seconds
        self.advance(KIT_POLICY.max_lease_seconds - elapsed)
        with pytest.raises(LeaseLostError) as caught:
            await queue.heartbeat(lease.tenant, lease.item_id, token=lease.token)
        assert caught.value.reason == "capped"

    @pytest.mark.asyncio
    async def test_settle_with_a_stale_token_raises_lease_lost(self, queue: AsyncWorkQueue) -> None:
        await queue.enqueue("acme", {})
        stale = await self._lease(queue, "w1")
        self.advance(KIT_POLICY.lease_seconds + 1)
        await queue.reap(limit=10)
        self.advance(KIT_POLICY.backoff(1))
        fresh = await self._lease(queue, "w2")
        for settle in (
            lambda: queue.complete(stale.tenant, stale.item_id, token=stale.token),
            lambda: queue.heartbeat(stale.tenant, stale.item_id, token=stale.token),
            lambda: queue.fail(stale.tenant, stale.item_id, token=stale.token),
        ):
            with pytest.raises(LeaseLostError) as caught:
                await settle()
            assert caught.value.reason == "taken"
        await queue.complete(fresh.tenant, fresh.item_id, token=fresh.token)

    @pytest.mark.asyncio
    async def test_settle_after_expiry_raises_lease_lost_expired(
        self, queue: AsyncWorkQueue
    ) -> None:
        await queue.enqueue("acme", {})
        lease = await self._lease(queue)
        self.advance(KIT_POLICY.lease_seconds + 1)
        with pytest.raises(LeaseLostError) as caught:
            await queue.complete(lease.tenant, lease.item_id, token=lease.token)
        assert caught.value.reason == "expired"

    @pytest.mark.asyncio
    async def test_unknown_item_raises_not_found(self, queue: AsyncWorkQueue) -> None:
        with pytest.raises(WorkItemNotFoundError):
            await queue.complete("acme", "no-such-item", token=1)
        with pytest.raises(WorkItemNotFoundError):
            await queue.heartbeat("acme", "no-such-item", token=1)

    @pytest.mark.asyncio
    async def test_settle_naming_another_tenant_is_refused(self, queue: AsyncWorkQueue) -> None:
        await queue.enqueue("acme", {}, item_id="shared-id")
        lease = await self._lease(queue)
        with pytest.raises(WorkItemNotFoundError):
            await queue.complete("globex", lease.item_id, token=lease.token)
        item = await queue.get_item("acme", "shared-id")
        assert item is not None and item.state == "leased"
        await queue.complete("acme", lease.item_id, token=lease.token)

    # -- failure ------------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_fail_requeues_and_waits_out_its_backoff(self, queue: AsyncWorkQueue) -> None:
        await queue.enqueue("acme", {})
        lease = await self._lease(queue)
        item = await queue.fail(lease.tenant, lease.item_id, token=lease.token, error="boom")
        assert (item.state, item.last_error, item.attempts) == ("ready", "boom", 1)
        backoff = KIT_POLICY.backoff(1)
        assert item.available_at == pytest.approx(lease.claimed_at + backoff)
        self.advance(backoff - 1)
        assert await queue.claim("w1") is None
        self.advance(1)
        again = await self._lease(queue)
        assert again.item_id == lease.item_id and again.item.attempts == 2

    @pytest.mark.asyncio
    async def test_non_retryable_fail_dead_letters(self, queue: AsyncWorkQueue) -> None:
        await queue.enqueue("acme", {"bad": True})
        lease = await self._lease(queue)
        item = await queue.fail(
            lease.tenant, lease.item_id, token=lease.token, error="invalid input", retryable=False
        )
        assert item.state == "dead"
        letters = await queue.dead_letters("acme")
        assert [d.item.item_id for d in letters] == [lease.item_id]
        assert letters[0].item.last_error == "invalid input"
        self.advance(1000)
        assert await queue.claim("w1") is None

    @pytest.mark.asyncio
    async def test_max_attempts_dead_letters(self, queue: AsyncWorkQueue) -> None:
        await queue.enqueue("acme", {})
        for attempt in range(1, KIT_POLICY.max_attempts + 1):
            lease = await self._lease(queue)
            assert lease.item.attempts == attempt
            item = await queue.fail(lease.tenant, lease.item_id, token=lease.token, error="again")
            self.advance(KIT_POLICY.backoff_cap)
        assert item.state == "dead"
        assert await queue.claim("w1") is None
        assert len(await queue.dead_letters("acme")) == 1

    @pytest.mark.asyncio
    async def test_lapses_past_max_attempts_dead_letter(self, queue: AsyncWorkQueue) -> None:
        await queue.enqueue("acme", {})
        for _ in range(KIT_POLICY.max_attempts):
            await self._lease(queue)
            self.advance(KIT_POLICY.lease_seconds + 1)
            reaped = await queue.reap(limit=10)
            self.advance(KIT_POLICY.backoff_cap)
        assert [i.state for i in reaped] == ["dead"]
        assert len(await queue.dead_letters("acme")) == 1

    @pytest.mark.asyncio
    async def test_requeue_from_the_dead_letter(self, queue: AsyncWorkQueue) -> None:
        await queue.enqueue("acme", {"x": 1})
        lease = await self._lease(queue)
        await queue.fail(lease.tenant, lease.item_id, token=lease.token, retryable=False)
        item = await queue.requeue("acme", lease.item_id)
        assert (item.state, item.attempts) == ("ready", 0)
        assert await queue.dead_letters("acme") == []
        again = await self._lease(queue)
        assert again.item_id == lease.item_id and again.item.payload == {"x": 1}
        with pytest.raises(WorkItemNotFoundError):
            await queue.requeue("acme", lease.item_id)

    # -- identity -----------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_dedupe_key_returns_the_existing_item(self, queue: AsyncWorkQueue) -> None:
        first = await queue.enqueue("acme", {"v": 1}, dedupe_key="invoice-7")
        second = await queue.enqueue("acme", {"v": 2}, dedupe_key="invoice-7")
        other = await queue.enqueue("globex", {"v": 3}, dedupe_key="invoice-7")
        assert second.item_id == first.item_id and second.payload == {"v": 1}
        assert (other.tenant, other.payload) == ("globex", {"v": 3})
        assert (await queue.stats()).ready == 2

    @pytest.mark.asyncio
    async def test_caller_minted_id_returns_the_existing_item(self, queue: AsyncWorkQueue) -> None:
        first = await queue.enqueue("acme", {"v": 1}, item_id="job-1")
        second = await queue.enqueue("acme", {"v": 2}, item_id="job-1")
        assert first.item_id == second.item_id == "job-1" and second.payload == {"v": 1}
        lease = await self._lease(queue)
        assert lease.item_id == "job-1"
        assert await queue.claim("w1") is None

    @pytest.mark.asyncio
    async def test_an_item_id_is_forgotten_once_its_item_completes(
        self, queue: AsyncWorkQueue
    ) -> None:
        await queue.enqueue("acme", {"run": 1}, item_id="job-1", dedupe_key="k")
        lease = await self._lease(queue)
        await queue.complete(lease.tenant, lease.item_id, token=lease.token)
        again = await queue.enqueue("acme", {"run": 2}, item_id="job-1", dedupe_key="k")
        assert (again.item_id, again.payload, again.attempts) == ("job-1", {"run": 2}, 0)

    @pytest.mark.asyncio
    async def test_a_dead_item_keeps_its_dedupe_key(self, queue: AsyncWorkQueue) -> None:
        first = await queue.enqueue("acme", {"v": 1}, dedupe_key="k")
        lease = await self._lease(queue)
        await queue.fail(lease.tenant, lease.item_id, token=lease.token, retryable=False)
        again = await queue.enqueue("acme", {"v": 2}, dedupe_key="k")
        assert (again.item_id, again.state, again.payload) == (first.item_id, "dead", {"v": 1})

    @pytest.mark.asyncio
    async def test_returned_items_are_copies(self, queue: AsyncWorkQueue) -> None:
        item = await queue.enqueue("acme", {"steps": [1]}, item_id="job-1")
        item.payload["steps"].append(2)
        lease = await self._lease(queue)
        lease.item.payload["steps"].append(3)
        stored = await queue.get_item("acme", "job-1")
        assert stored is not None and stored.payload == {"steps": [1]}

    @pytest.mark.asyncio
    async def test_adopt_returns_the_leases_a_worker_held(self, queue: AsyncWorkQueue) -> None:
        for i in range(3):
            await queue.enqueue("acme", {"i": i})
        mine = [await self._lease(queue, "w1"), await self._lease(queue, "w1")]
        theirs = await self._lease(queue, "w2")
        self.advance(10)
        adopted = await queue.adopt("w1")
        assert sorted(a.item_id for a in adopted) == sorted(m.item_id for m in mine)
        assert all(
            a.expires_at > m.expires_at
            for a, m in zip(
                sorted(adopted, key=lambda a: a.item_id),
                sorted(mine, key=lambda m: m.item_id),
                strict=True,
            )
        )
        for lease in adopted:
            await queue.complete(lease.tenant, lease.item_id, token=lease.token)
        assert [a.item_id for a in await queue.adopt("w2")] == [theirs.item_id]

    # -- fairness and order -------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_noisy_tenant_does_not_starve_a_quiet_one(self, queue: AsyncWorkQueue) -> None:
        for i in range(100):
            await queue.enqueue("noisy", {"i": i})
        await queue.enqueue("quiet", {"only": True})
        served = [(await self._lease(queue)).tenant for _ in range(2)]
        assert "quiet" in served

    @pytest.mark.asyncio
    async def test_five_tenants_are_served_round_robin(self, queue: AsyncWorkQueue) -> None:
        tenants = [f"tenant-{n}" for n in range(5)]
        for round_ in range(3):
            for tenant in tenants:
                await queue.enqueue(tenant, {"round": round_})
        served = [(await self._lease(queue)).tenant for _ in range(15)]
        for window in range(3):
            assert sorted(served[window * 5 : window * 5 + 5]) == tenants

    @pytest.mark.asyncio
    async def test_priority_orders_within_a_tenant(self, queue: AsyncWorkQueue) -> None:
        await queue.enqueue("acme", {"p": "low"}, priority=0)
        await queue.enqueue("acme", {"p": "high"}, priority=10)
        await queue.enqueue("acme", {"p": "low-2"}, priority=0)
        order = [(await self._lease(queue)).item.payload["p"] for _ in range(3)]
        assert order == ["high", "low", "low-2"]

    @pytest.mark.asyncio
    async def test_items_are_served_in_the_order_they_became_due(
        self, queue: AsyncWorkQueue
    ) -> None:
        await queue.enqueue("acme", {"n": "delayed"}, delay_seconds=10)
        self.advance(15)
        await queue.enqueue("acme", {"n": "later"})
        order = [(await self._lease(queue)).item.payload["n"] for _ in range(2)]
        assert order == ["delayed", "later"]

    @pytest.mark.asyncio
    async def test_delayed_items_wait(self, queue: AsyncWorkQueue) -> None:
        await queue.enqueue("acme", {"later": True}, delay_seconds=60)
        assert await queue.claim("w1") is None
        stats = await queue.stats()
        assert (stats.ready, stats.delayed) == (0, 1)
        self.advance(60)
        lease = await self._lease(queue)
        assert lease.item.payload == {"later": True}

    @pytest.mark.asyncio
    async def test_stats_count_items_by_state(self, queue: AsyncWorkQueue) -> None:
        for i in range(4):
            await queue.enqueue("acme" if i % 2 else "globex", {"i": i})
        await queue.enqueue("acme", {}, delay_seconds=30)
        leased = await self._lease(queue)
        dead = await self._lease(queue)
        await queue.fail(dead.tenant, dead.item_id, token=dead.token, retryable=False)
        stats = await queue.stats()
        assert (stats.ready, stats.delayed, stats.leased, stats.dead) == (2, 1, 1, 1)
        assert stats.tenants == 2
        await queue.complete(leased.tenant, leased.item_id, token=leased.token)
        assert (await queue.stats()).leased == 0

    @pytest.mark.asyncio
    async def test_concurrent_claimers_claim_each_item_exactly_once(
        self, queue: AsyncWorkQueue
    ) -> None:
        for i in range(200):
            await queue.enqueue(f"tenant-{i % 7}", {"i": i})

        async def worker(name: str) -> list[int]:
            done: list[int] = []
            while True:
                lease = await queue.claim(name)
                if lease is None:
                    return done
                await queue.complete(lease.tenant, lease.item_id, token=lease.token)
                done.append(lease.item.payload["i"])

        results = await async_gather([partial(worker, f"w{n}") for n in range(8)])
        counts = Counter(i for done in results for i in done)
        assert sorted(counts) == list(range(200))
        assert set(counts.values()) == {1}
        assert (await queue.stats()).ready == 0
