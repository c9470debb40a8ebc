"""AsyncQueueRecoveryCases: the kit's cases for recovering from crashed workers.

A lapse (a lease past its expiry) counts its attempt and is retried after the policy's backoff,
whether ``reap`` or a ``claim`` (which takes back up to RECLAIM_PER_CLAIM lapsed leases first)
finds it; ``adopt`` fences a restarted worker's leases with new tokens. Mixed into
AsyncWorkQueueConformance; they use its ``queue`` fixture and ``advance``.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from runyard._async.protocols import AsyncWorkQueue
from runyard._async.testing._kit import KIT_POLICY, AsyncQueueKitBase
from runyard.errors import LeaseLostError
from runyard.policy import RECLAIM_PER_CLAIM

__all__ = ["AsyncQueueRecoveryCases"]

LAPSE = KIT_POLICY.lease_seconds + 1  # a step that makes a fresh lease lapse
BACKOFF_1 = KIT_POLICY.backoff(1)  # the wait after a first attempt lapses (5 s)


class AsyncQueueRecoveryCases(AsyncQueueKitBase):
    """Lapse backoff, recovery inside claims, and fencing by incarnation on adopt."""

    # -- adopt --------------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_adopt_gives_a_new_token_and_refuses_the_old(self, queue: AsyncWorkQueue) -> None:
        await queue.enqueue("acme", {}, item_id="a")
        await queue.enqueue("acme", {}, item_id="b")
        old = [await self._lease(queue, "w1"), await self._lease(queue, "w1")]
        self.advance(10)
        adopted = sorted(await queue.adopt("w1"), key=lambda lease: lease.item_id)
        assert [a.item_id for a in adopted] == ["a", "b"]
        for before, after in zip(old, adopted, strict=True):
            assert after.token > before.token and after.worker == "w1"
            # the same claim: the worker tells a re-tokened claim from a later one by these
            assert after.item.attempts == before.item.attempts == 1
            assert after.claimed_at == before.claimed_at
            for settle in (queue.heartbeat, queue.complete, queue.fail):
                with pytest.raises(LeaseLostError) as caught:
                    await settle(before)
                assert caught.value.reason == "taken"
        assert len({a.token for a in adopted} | {o.token for o in old}) == 4
        await queue.heartbeat(adopted[0])
        await queue.complete(adopted[0])
        assert (await queue.fail(adopted[1], retryable=False)).state == "dead"

    @pytest.mark.asyncio
    async def test_adopting_again_fences_the_previous_adoption(self, queue: AsyncWorkQueue) -> None:
        await queue.enqueue("acme", {}, item_id="a")
        await self._lease(queue, "w1")
        (first,) = await queue.adopt("w1")
        (second,) = await queue.adopt("w1")
        assert second.token > first.token
        with pytest.raises(LeaseLostError):
            await queue.complete(first)
        await queue.complete(second)

    @pytest.mark.asyncio
    async def test_adopt_leaves_the_turns_as_they_were(self, queue: AsyncWorkQueue) -> None:
        # adopt mints tokens but is not a claim: it moves no claim counter, so a tenant first
        # seen after it joins with the same turn as without it. Here b was served by the first
        # claim, and a, first seen after the adopt, ties with b (the counter's current value)
        # and goes first by name, as it would with no adopt between.
        await queue.enqueue("b", {}, item_id="b1")
        await queue.enqueue("b", {}, item_id="b2")
        assert (await self._lease(queue, "w1")).item_id == "b1"
        assert [lease.item_id for lease in await queue.adopt("w1")] == ["b1"]
        await queue.enqueue("a", {}, item_id="a1")
        served = [(await self._lease(queue, "w2")).item_id for _ in range(2)]
        assert served == ["a1", "b2"]

    # -- the lapse backoff --------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_a_reaped_lapse_is_not_claimable_before_its_backoff(
        self, queue: AsyncWorkQueue
    ) -> None:
        await queue.enqueue("acme", {}, item_id="crashed")
        first = await self._lease(queue)
        self.advance(LAPSE)
        (reaped,) = await queue.reap()
        assert (reaped.state, reaped.attempts) == ("ready", 1)
        assert reaped.available_at == pytest.approx(first.claimed_at + LAPSE + BACKOFF_1)
        stats = await queue.stats()
        assert (stats.ready, stats.delayed, stats.leased) == (0, 1, 0)
        self.advance(BACKOFF_1 - 1)
        assert await queue.claim("w2") is None
        self.advance(1)
        again = await self._lease(queue, "w2")
        assert (again.item_id, again.item.attempts) == ("crashed", 2)

    @pytest.mark.asyncio
    async def test_the_lapse_backoff_grows_with_the_attempts(self, queue: AsyncWorkQueue) -> None:
        await queue.enqueue("acme", {}, item_id="crashed")
        for attempt in (1, 2):
            await self._lease(queue)
            self.advance(LAPSE)
            (reaped,) = await queue.reap()
            assert reaped.attempts == attempt
            self.advance(KIT_POLICY.backoff(attempt) - 1)
            assert await queue.claim("w1") is None
            self.advance(1)
        assert (await self._lease(queue)).item.attempts == 3

    # -- recovery inside claims ---------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_claim_takes_back_a_lapsed_lease_without_reap(
        self, queue: AsyncWorkQueue
    ) -> None:
        await queue.enqueue("acme", {}, item_id="crashed")
        crashed = await self._lease(queue, "crashed-worker")
        self.advance(LAPSE)
        assert await queue.claim("w2") is None  # taken back, but waiting out its backoff
        item = await queue.get_item("acme", "crashed")
        assert item is not None and (item.state, item.attempts, item.worker) == ("ready", 1, None)
        assert item.available_at == pytest.approx(crashed.claimed_at + LAPSE + BACKOFF_1)
        with pytest.raises(LeaseLostError):
            await queue.complete(crashed)
        self.advance(BACKOFF_1)
        again = await self._lease(queue, "w2")
        assert (again.item_id, again.item.attempts) == ("crashed", 2)
        assert again.token != crashed.token
        assert await queue.reap() == []

    @pytest.mark.asyncio
    async def test_claim_leaves_a_live_lease_alone(self, queue: AsyncWorkQueue) -> None:
        await queue.enqueue("acme", {}, item_id="busy")
        lease = await self._lease(queue)
        self.advance(KIT_POLICY.lease_seconds - 1)
        assert await queue.claim("w2") is None
        await queue.complete(lease)

    @pytest.mark.asyncio
    async def test_a_lease_is_live_up_to_its_expiry_instant(self, queue: AsyncWorkQueue) -> None:
        """Reap, a claim's recovery and a settle agree: a lease lapses once the clock is past
        ``expires_at``, not at it."""
        await queue.enqueue("acme", {}, item_id="busy")
        lease = await self._lease(queue)
        self.advance(lease.expires_at - lease.claimed_at)
        assert await queue.claim("w2") is None
        assert await queue.reap() == []
        await queue.complete(lease)

    @pytest.mark.asyncio
    async def test_claim_many_takes_back_a_lapsed_lease(self, queue: AsyncWorkQueue) -> None:
        batched = self._batched(queue)
        await batched.enqueue("acme", {}, item_id="crashed")
        (crashed,) = await batched.claim_many("crashed-worker", limit=5)
        self.advance(LAPSE)
        await batched.enqueue("acme", {}, item_id="fresh")
        assert [lease.item_id for lease in await batched.claim_many("w2", limit=5)] == ["fresh"]
        assert isinstance((await batched.complete_many([crashed]))[0], LeaseLostError)
        self.advance(BACKOFF_1)
        (again,) = await batched.claim_many("w2", limit=5)
        assert (again.item_id, again.item.attempts) == ("crashed", 2)

    async def _lapsed_without_backoff(self, lapsed: str = "t1") -> AsyncWorkQueue:
        """A queue with no lapse backoff whose tenant ``lapsed`` holds a lapsed lease (item
        x) and whose tenants t2 and t3 have an item due each (y, z); the three tie on their
        turn, so the rotation serves them in name order."""
        queue = await self.make_queue(replace(KIT_POLICY, backoff_base=0))
        await queue.enqueue(lapsed, {}, item_id="x")
        await self._lease(queue, "crashed-worker")
        self.advance(LAPSE)
        await queue.enqueue("t2", {}, item_id="y")
        await queue.enqueue("t3", {}, item_id="z")
        return queue

    @pytest.mark.asyncio
    async def test_a_lapse_without_backoff_is_served_by_the_claim_that_takes_it_back(
        self, queue: AsyncWorkQueue
    ) -> None:
        # PostgreSQL's claim took it back, but its snapshot still saw it leased: claim served
        # another tenant's item (or answered None when nothing else was due).
        queue = await self._lapsed_without_backoff()
        try:
            again = await queue.claim("w2")
            assert again is not None and (again.item_id, again.item.attempts) == ("x", 2)
            assert (await self._lease(queue, "w2")).item_id == "y"
            stats = await queue.stats()
            assert (stats.ready, stats.leased) == (1, 2)
        finally:
            await queue.aclose()

    @pytest.mark.asyncio
    async def test_a_lapse_without_backoff_waits_its_turn_in_the_rotation(
        self, queue: AsyncWorkQueue
    ) -> None:
        # Named t9, the lapsed tenant comes last in the rotation: taken back or not, it waits
        # its turn (a store serving what it took back first would give x here).
        queue = await self._lapsed_without_backoff("t9")
        try:
            served = [await self._lease(queue, "w2") for _ in range(3)]
            assert [(s.item_id, s.item.attempts) for s in served] == [("y", 1), ("z", 1), ("x", 2)]
        finally:
            await queue.aclose()

    @pytest.mark.asyncio
    async def test_claim_many_serves_lapses_without_backoff_in_the_same_call(
        self, queue: AsyncWorkQueue
    ) -> None:
        # PostgreSQL's claim_many left them out (2 leases of 10 in a review's run).
        queue = await self._lapsed_without_backoff()
        try:
            batched = self._batched(queue)
            served = await batched.claim_many("w2", limit=5)
            assert [(s.item_id, s.item.attempts) for s in served] == [
                ("x", 2),
                ("y", 1),
                ("z", 1),
            ]
            await batched.complete_many(served)
            await batched.enqueue("t4", {}, item_id="w")
            assert [s.item_id for s in await batched.claim_many("crashed-worker", limit=5)] == ["w"]
            self.advance(LAPSE)
            # the lapsed lease is all there is due
            assert [s.item_id for s in await batched.claim_many("w2", limit=5)] == ["w"]
        finally:
            await queue.aclose()

    @pytest.mark.asyncio
    async def test_claim_many_serves_lapses_without_backoff_in_their_turn(
        self, queue: AsyncWorkQueue
    ) -> None:
        queue = await self._lapsed_without_backoff("t9")  # last in the rotation, as above
        try:
            served = await self._batched(queue).claim_many("w2", limit=5)
            assert [(s.item_id, s.item.attempts) for s in served] == [("y", 1), ("z", 1), ("x", 2)]
        finally:
            await queue.aclose()

    @pytest.mark.asyncio
    async def test_a_claim_takes_back_at_most_reclaim_per_claim_leases(
        self, queue: AsyncWorkQueue
    ) -> None:
        held = RECLAIM_PER_CLAIM + 2
        for n in range(held):
            await queue.enqueue("acme", {}, item_id=f"i{n}")
            await self._lease(queue, "crashed-worker")
        self.advance(LAPSE)
        assert await queue.claim("w2") is None
        stats = await queue.stats()
        assert (stats.leased, stats.delayed) == (held - RECLAIM_PER_CLAIM, RECLAIM_PER_CLAIM)
        assert await queue.claim("w2") is None
        assert (await queue.stats()).leased == 0

    @pytest.mark.asyncio
    async def test_lapses_taken_back_by_claims_dead_letter_past_max_attempts(
        self, queue: AsyncWorkQueue
    ) -> None:
        await queue.enqueue("acme", {}, item_id="crashy")
        for attempt in range(1, KIT_POLICY.max_attempts + 1):
            lease = await self._lease(queue)
            assert lease.item.attempts == attempt
            self.advance(LAPSE)
            assert await queue.claim("w1") is None
            self.advance(KIT_POLICY.backoff_cap)
        letters = await queue.dead_letters("acme")
        assert [(d.item.item_id, d.item.attempts) for d in letters] == [
            ("crashy", KIT_POLICY.max_attempts)
        ]

    @pytest.mark.asyncio
    async def test_a_crashed_workers_item_is_served_under_load_without_reap(
        self, queue: AsyncWorkQueue
    ) -> None:
        """A steady inflow keeps the claims busy; nobody calls reap. The crashed worker's item
        is taken back by the first claim after its lease lapses and served again once its
        backoff has passed: lease + 1 s + backoff after it was claimed (1 s steps)."""
        await queue.enqueue("acme", {}, item_id="crashed")
        await self._lease(queue, "crashed-worker")
        due = LAPSE + BACKOFF_1
        for second in range(1, int(due) + 5):
            self.advance(1)
            await queue.enqueue("busy", {"at": second})
            for _ in range(2):
                lease = await queue.claim("w2")
                if lease is None:
                    continue
                await queue.complete(lease)
                if lease.item_id == "crashed":
                    assert second == due and lease.item.attempts == 2
                    return
        raise AssertionError("the crashed worker's item was never served again")
