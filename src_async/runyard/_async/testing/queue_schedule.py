"""AsyncQueueScheduleCases: the kit's cases for ``run_at`` and a per-item ``max_attempts``.

Mixed into AsyncWorkQueueConformance; they use its ``queue`` fixture and ``advance``.
"""

from __future__ import annotations

from typing import Any

import pytest

from runyard._async.protocols import AsyncWorkQueue
from runyard._async.testing._kit import KIT_POLICY, AsyncQueueKitBase, refuses_each
from runyard.errors import InvalidArgumentError
from runyard.models import NewItem
from runyard.validation import MAX_ITEM_ATTEMPTS, MAX_RUN_AT

__all__ = ["AsyncQueueScheduleCases"]

# 10**400: past a float (math.isfinite raised a bare OverflowError for it on every backend).
BAD_RUN_ATS: list[Any] = [
    float("nan"),
    float("inf"),
    -1.0,
    MAX_RUN_AT + 1,
    10**400,
    10**5000,
    True,
    "1",
]
BAD_MAX_ATTEMPTS: list[Any] = [0, -1, MAX_ITEM_ATTEMPTS + 1, True, 1.5, "2"]
LONG_AGO = 1_000.0  # seconds since the epoch: always in the past


class AsyncQueueScheduleCases(AsyncQueueKitBase):
    """``enqueue(run_at=...)``, ``enqueue(max_attempts=...)`` and their NewItem forms."""

    # -- run_at -------------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_run_at_in_the_past_is_due_at_once(self, queue: AsyncWorkQueue) -> None:
        item = await queue.enqueue("acme", {"n": 1}, run_at=LONG_AGO)
        assert (item.state, item.available_at) == ("ready", item.enqueued_at)
        assert (await queue.stats()).ready == 1
        assert (await self._lease(queue)).item_id == item.item_id

    @pytest.mark.asyncio
    async def test_run_at_in_the_future_waits_until_then(self, queue: AsyncWorkQueue) -> None:
        first = await queue.enqueue("acme", {"n": "now"})
        later = await queue.enqueue("acme", {"n": "later"}, run_at=first.enqueued_at + 60)
        assert later.available_at == first.enqueued_at + 60
        await queue.complete(await self._lease(queue))
        assert await queue.claim("w1") is None
        stats = await queue.stats()
        assert (stats.ready, stats.delayed) == (0, 1)
        self.advance(59)
        assert await queue.claim("w1") is None
        self.advance(1)
        assert (await self._lease(queue)).item.payload == {"n": "later"}

    @pytest.mark.asyncio
    async def test_tenants_holding_only_delayed_items_keep_their_turns(
        self, queue: AsyncWorkQueue
    ) -> None:
        # Tenants a, b and c hold only delayed items while d's are served: they keep the turns
        # they joined with (as the memory backend keeps them; a store may set such tenants
        # aside meanwhile), so an item due now for b, and later their delayed items, are served
        # in turn order ahead of d, whose turn its claims advanced.
        for tenant in ("a", "b", "c"):
            await queue.enqueue(tenant, {"n": f"{tenant}-later"}, delay_seconds=30)
        for n in range(3):
            await queue.enqueue("d", {"n": f"d{n}"})
        served = [(await self._lease(queue)).item.payload["n"] for _ in range(2)]
        await queue.enqueue("b", {"n": "b-now"})
        served += [(await self._lease(queue)).item.payload["n"] for _ in range(2)]
        assert await queue.claim("w1") is None
        self.advance(30)
        assert (await queue.stats()).tenants == 3
        served += [(await self._lease(queue)).item.payload["n"] for _ in range(3)]
        assert await queue.claim("w1") is None
        assert served == ["d0", "d1", "b-now", "d2", "a-later", "c-later", "b-later"]

    @pytest.mark.asyncio
    async def test_tenants_holding_only_leased_or_dead_items_keep_their_turns(
        self, queue: AsyncWorkQueue
    ) -> None:
        # a's item is leased and b's dead while d's are served (a store may set a and b aside
        # meanwhile): a lapsed lease retried and a requeued dead letter bring them back with
        # the turns their claims gave them, ahead of d's later claims and of c, a newer tenant.
        await queue.enqueue("a", {"n": "a1"})
        await queue.enqueue("b", {"n": "b1"})
        held = await self._lease(queue)
        dead = await self._lease(queue)
        assert (held.tenant, dead.tenant) == ("a", "b")
        await queue.fail(dead, error="no", retryable=False)
        for n in range(4):
            await queue.enqueue("d", {"n": f"d{n}"})
        served = [await self._serve(queue) for _ in range(2)]
        await queue.enqueue("c", {"n": "c1"})
        self.advance(KIT_POLICY.lease_seconds + 1)
        assert [item.tenant for item in await queue.reap()] == ["a"]  # retried after 5 s
        await queue.requeue("b", dead.item_id)
        self.advance(KIT_POLICY.backoff(1))
        served += [await self._serve(queue) for _ in range(5)]
        assert await queue.claim("w1") is None
        assert served == ["d0", "d1", "a1", "b1", "c1", "d2", "d3"]

    async def _serve(self, queue: AsyncWorkQueue) -> Any:
        """Claim and complete the next due item: its payload's ``n``."""
        lease = await self._lease(queue)
        await queue.complete(lease)
        return lease.item.payload["n"]

    @pytest.mark.asyncio
    async def test_run_at_with_a_delay_is_refused_naming_both(self, queue: AsyncWorkQueue) -> None:
        with pytest.raises(InvalidArgumentError) as caught:
            await queue.enqueue("acme", {}, item_id="i", delay_seconds=5, run_at=LONG_AGO)
        assert caught.value.argument == "run_at"
        assert "delay_seconds" in str(caught.value)
        assert await queue.get_item("acme", "i") is None

    @pytest.mark.asyncio
    async def test_bad_run_at_is_refused(self, queue: AsyncWorkQueue) -> None:
        await refuses_each(
            lambda bad: queue.enqueue("acme", {}, item_id="i", run_at=bad), BAD_RUN_ATS, "run_at"
        )
        assert await queue.get_item("acme", "i") is None

    # -- max_attempts -------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_bad_max_attempts_is_refused(self, queue: AsyncWorkQueue) -> None:
        await refuses_each(
            lambda bad: queue.enqueue("acme", {}, item_id="i", max_attempts=bad),
            BAD_MAX_ATTEMPTS,
            "max_attempts",
            naming=str(MAX_ITEM_ATTEMPTS),
        )
        assert await queue.get_item("acme", "i") is None

    @pytest.mark.asyncio
    async def test_max_attempts_is_stored_with_the_item(self, queue: AsyncWorkQueue) -> None:
        own = await queue.enqueue("acme", {}, item_id="own", max_attempts=MAX_ITEM_ATTEMPTS)
        default = await queue.enqueue("acme", {}, item_id="default")
        assert (own.max_attempts, default.max_attempts) == (MAX_ITEM_ATTEMPTS, None)
        stored = await queue.get_item("acme", "own")
        assert stored is not None and stored.max_attempts == MAX_ITEM_ATTEMPTS
        lease = await self._lease(queue)
        assert (lease.item_id, lease.item.max_attempts) == ("own", MAX_ITEM_ATTEMPTS)

    @pytest.mark.asyncio
    async def test_a_repeated_enqueue_returns_the_item_unchanged(
        self, queue: AsyncWorkQueue
    ) -> None:
        first = await queue.enqueue("acme", {"v": 1}, item_id="job", dedupe_key="k")
        for again in (
            await queue.enqueue("acme", {"v": 2}, item_id="job", run_at=MAX_RUN_AT, max_attempts=9),
            await queue.enqueue(
                "acme", {"v": 3}, dedupe_key="k", run_at=MAX_RUN_AT, max_attempts=9
            ),
        ):
            assert (again.item_id, again.payload, again.max_attempts) == ("job", {"v": 1}, None)
            assert (again.state, again.available_at) == ("ready", first.available_at)

    @pytest.mark.asyncio
    async def test_item_max_attempts_dead_letters_at_that_count_via_fail(
        self, queue: AsyncWorkQueue
    ) -> None:
        await queue.enqueue("acme", {}, item_id="once", max_attempts=1)
        lease = await self._lease(queue)
        assert (await queue.fail(lease, error="boom")).state == "dead"
        more = KIT_POLICY.max_attempts + 2
        await queue.enqueue("acme", {}, item_id="more", max_attempts=more)
        for attempt in range(1, more + 1):
            lease = await self._lease(queue)
            assert (lease.item_id, lease.item.attempts) == ("more", attempt)
            item = await queue.fail(lease, error="again")
            assert item.state == ("dead" if attempt == more else "ready")
            self.advance(KIT_POLICY.backoff_cap)
        assert sorted(d.item.item_id for d in await queue.dead_letters("acme")) == ["more", "once"]

    @pytest.mark.asyncio
    async def test_item_max_attempts_dead_letters_at_that_count_via_reap(
        self, queue: AsyncWorkQueue
    ) -> None:
        await queue.enqueue("acme", {}, item_id="once", max_attempts=1)
        await self._lease(queue)
        self.advance(KIT_POLICY.lease_seconds + 1)
        assert [(i.item_id, i.state) for i in await queue.reap()] == [("once", "dead")]
        more = KIT_POLICY.max_attempts + 1
        await queue.enqueue("acme", {}, item_id="more", max_attempts=more)
        for attempt in range(1, more + 1):
            lease = await self._lease(queue)
            assert (lease.item_id, lease.item.attempts) == ("more", attempt)
            self.advance(KIT_POLICY.lease_seconds + 1)
            reaped = await queue.reap()
            assert [i.state for i in reaped] == ["dead" if attempt == more else "ready"]
            self.advance(KIT_POLICY.backoff_cap)
        letters = await queue.dead_letters("acme")
        assert [(d.item.item_id, d.item.attempts) for d in letters] == [("once", 1), ("more", more)]

    @pytest.mark.asyncio
    async def test_item_max_attempts_dead_letters_when_a_claim_reclaims_it(
        self, queue: AsyncWorkQueue
    ) -> None:
        await queue.enqueue("acme", {}, item_id="once", max_attempts=1)
        await self._lease(queue)
        self.advance(KIT_POLICY.lease_seconds + 1)
        assert await queue.claim("w2") is None
        item = await queue.get_item("acme", "once")
        assert item is not None and (item.state, item.attempts) == ("dead", 1)
        assert [d.item.item_id for d in await queue.dead_letters("acme")] == ["once"]

    # -- enqueue_many -------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_enqueue_many_takes_run_at_and_max_attempts(self, queue: AsyncWorkQueue) -> None:
        batched = self._batched(queue)
        now_item, past = await batched.enqueue_many(
            "acme",
            [NewItem(payload={"n": 1}, max_attempts=2), NewItem(payload={"n": 2}, run_at=LONG_AGO)],
        )
        now = now_item.enqueued_at
        assert (now_item.max_attempts, past.max_attempts, past.available_at) == (2, None, now)
        (future,) = await batched.enqueue_many(
            "acme", [NewItem(payload={"n": 3}, run_at=now + 60, max_attempts=1)]
        )
        assert (future.available_at, future.max_attempts) == (now + 60, 1)
        first_two = await batched.claim_many("w1", limit=10)
        assert len(first_two) == 2
        assert await batched.complete_many(first_two) == [None, None]
        self.advance(60)
        (lease,) = await batched.claim_many("w1", limit=10)
        assert (lease.item_id, lease.item.max_attempts) == (future.item_id, 1)

    @pytest.mark.asyncio
    async def test_enqueue_many_refuses_a_bad_schedule_before_adding_any(
        self, queue: AsyncWorkQueue
    ) -> None:
        batched = self._batched(queue)
        bad_items = [
            NewItem(payload={}, run_at=LONG_AGO, delay_seconds=1),
            NewItem(payload={}, max_attempts=0),
            NewItem(payload={}, run_at=-1.0),
        ]
        for bad in bad_items:
            with pytest.raises(InvalidArgumentError):
                await batched.enqueue_many("acme", [NewItem(payload={"ok": True}), bad])
        stats = await batched.stats()
        assert (stats.ready, stats.delayed) == (0, 0)
