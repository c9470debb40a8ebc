"""AsyncQueueAdminCases: the kit's cases for ``cancel``, ``purge_dead`` and ``prune``.

Mixed into AsyncWorkQueueConformance; they use its ``queue`` fixture and ``advance``.

How many rotation entries ``prune`` finds depends on the backend (one that drops a tenant's
entry when its line empties has fewer left to prune), so the prune cases hold every backend to
the bounds and to what a caller can see: no tenant with an item is harmed, and a pruned tenant
is served in rotation when it comes back.
"""

from __future__ import annotations

from typing import Any

import pytest

from runyard._async.protocols import AsyncWorkQueue
from runyard._async.testing._kit import KIT_POLICY, AsyncQueueKitBase, refuses_each
from runyard.errors import InvalidArgumentError, ItemLeasedError

__all__ = ["AsyncQueueAdminCases"]

BAD_AGES: list[Any] = [
    float("nan"),
    float("inf"),
    -1,
    10**400,
    True,
    "1",
    None,
]  # 10**400: past a float
BAD_LIMITS: list[Any] = [0, -1, 10_001, True, 1.5, None]


class AsyncQueueAdminCases(AsyncQueueKitBase):
    """What an operator calls beside the workers' loop: cancel, purge the dead, prune."""

    async def _dead(self, queue: AsyncWorkQueue, tenant: str, item_id: str, **kw: Any) -> None:
        """Enqueue ``item_id`` and dead-letter it (the queue must hold nothing else due)."""
        await queue.enqueue(tenant, {"id": item_id}, item_id=item_id, **kw)
        lease = await self._lease(queue)
        assert lease.item_id == item_id
        await queue.fail(lease, error="bad", retryable=False)

    async def _prune_all(self, queue: AsyncWorkQueue, limit: int) -> int:
        """Prune until a call finds nothing; every call within ``limit``. Returns the total."""
        total = 0
        for _ in range(100):
            pruned = await queue.prune(limit=limit)
            assert 0 <= pruned <= limit
            if pruned == 0:
                return total
            total += pruned
        raise AssertionError("prune kept finding entries after 100 calls")

    # -- cancel -------------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_cancel_removes_a_ready_item_and_frees_its_dedupe_key(
        self, queue: AsyncWorkQueue
    ) -> None:
        item = await queue.enqueue("acme", {"v": 1}, dedupe_key="k")
        assert await queue.cancel("acme", item.item_id) is True
        assert await queue.get_item("acme", item.item_id) is None
        assert (await queue.stats()).ready == 0
        assert await queue.claim("w1") is None
        again = await queue.enqueue("acme", {"v": 2}, dedupe_key="k")
        assert again.item_id != item.item_id and again.payload == {"v": 2}
        assert (await self._lease(queue)).item_id == again.item_id

    @pytest.mark.asyncio
    async def test_cancel_removes_a_delayed_item(self, queue: AsyncWorkQueue) -> None:
        item = await queue.enqueue("acme", {}, delay_seconds=60)
        assert await queue.cancel("acme", item.item_id) is True
        assert (await queue.stats()).delayed == 0
        self.advance(60)
        assert await queue.claim("w1") is None
        assert await queue.get_item("acme", item.item_id) is None

    @pytest.mark.asyncio
    async def test_cancel_removes_a_dead_item(self, queue: AsyncWorkQueue) -> None:
        await self._dead(queue, "acme", "doomed", dedupe_key="k")
        assert await queue.cancel("acme", "doomed") is True
        assert await queue.dead_letters("acme") == []
        assert (await queue.stats()).dead == 0
        assert await queue.get_item("acme", "doomed") is None
        again = await queue.enqueue("acme", {"v": 2}, dedupe_key="k")
        assert (again.state, again.payload) == ("ready", {"v": 2})

    @pytest.mark.asyncio
    async def test_cancel_of_a_leased_item_raises_and_changes_nothing(
        self, queue: AsyncWorkQueue
    ) -> None:
        await queue.enqueue("acme", {}, item_id="busy", dedupe_key="k")
        lease = await self._lease(queue)
        with pytest.raises(ItemLeasedError) as caught:
            await queue.cancel("acme", "busy")
        assert (caught.value.item_id, caught.value.worker) == ("busy", "w1")
        held = await queue.get_item("acme", "busy")
        assert held is not None and (held.state, held.worker) == ("leased", "w1")
        assert (await queue.enqueue("acme", {}, dedupe_key="k")).item_id == "busy"
        renewed = await queue.heartbeat(lease)
        assert renewed.token == lease.token
        await queue.complete(lease)
        assert await queue.get_item("acme", "busy") is None

    @pytest.mark.asyncio
    async def test_cancel_of_an_unknown_or_completed_item_is_false(
        self, queue: AsyncWorkQueue
    ) -> None:
        assert await queue.cancel("acme", "never-enqueued") is False
        await queue.enqueue("acme", {}, item_id="done")
        await queue.complete(await self._lease(queue))
        assert await queue.cancel("acme", "done") is False
        await queue.enqueue("acme", {}, item_id="twice")
        assert await queue.cancel("acme", "twice") is True
        assert await queue.cancel("acme", "twice") is False

    @pytest.mark.asyncio
    async def test_cancel_names_one_tenants_item(self, queue: AsyncWorkQueue) -> None:
        await queue.enqueue("acme", {}, item_id="shared-id")
        assert await queue.cancel("globex", "shared-id") is False
        item = await queue.get_item("acme", "shared-id")
        assert item is not None and item.state == "ready"

    @pytest.mark.asyncio
    async def test_cancel_refuses_empty_identifiers(self, queue: AsyncWorkQueue) -> None:
        await queue.enqueue("acme", {}, item_id="i")
        for tenant, item_id in (("", "i"), ("acme", "")):
            with pytest.raises(InvalidArgumentError):
                await queue.cancel(tenant, item_id)
        assert await queue.get_item("acme", "i") is not None

    # -- purge_dead ---------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_purge_dead_deletes_the_oldest_up_to_the_limit(
        self, queue: AsyncWorkQueue
    ) -> None:
        for n in range(3):
            await self._dead(queue, "acme", f"dead-{n}")
            self.advance(10)
        assert await queue.purge_dead("acme", limit=2) == 2
        assert [d.item.item_id for d in await queue.dead_letters("acme")] == ["dead-2"]
        assert await queue.get_item("acme", "dead-0") is None
        assert await queue.get_item("acme", "dead-1") is None
        assert await queue.purge_dead("acme") == 1
        assert await queue.purge_dead("acme") == 0
        assert (await queue.stats()).dead == 0

    @pytest.mark.asyncio
    async def test_purge_dead_spares_letters_younger_than_older_than(
        self, queue: AsyncWorkQueue
    ) -> None:
        await self._dead(queue, "acme", "old")
        self.advance(100)
        await self._dead(queue, "acme", "young")
        self.advance(50)  # old died 150 s ago, young 50 s ago
        assert await queue.purge_dead("acme", older_than=151) == 0
        assert await queue.purge_dead("acme", older_than=150) == 1
        assert [d.item.item_id for d in await queue.dead_letters("acme")] == ["young"]
        assert await queue.purge_dead("acme", older_than=60) == 0
        assert await queue.purge_dead("acme", older_than=50) == 1

    @pytest.mark.asyncio
    async def test_purge_dead_touches_only_the_tenants_dead_letters(
        self, queue: AsyncWorkQueue
    ) -> None:
        await self._dead(queue, "acme", "acme-dead", dedupe_key="k")
        await self._dead(queue, "globex", "globex-dead")
        await queue.enqueue("acme", {}, item_id="waiting")
        await queue.enqueue("acme", {}, item_id="later", delay_seconds=30)
        assert await queue.purge_dead("acme") == 1
        assert [d.item.item_id for d in await queue.dead_letters("globex")] == ["globex-dead"]
        stats = await queue.stats()
        assert (stats.ready, stats.delayed, stats.dead) == (1, 1, 1)
        again = await queue.enqueue("acme", {"v": 2}, dedupe_key="k")
        assert again.item_id != "acme-dead"

    @pytest.mark.asyncio
    async def test_purge_dead_refuses_bad_arguments(self, queue: AsyncWorkQueue) -> None:
        await self._dead(queue, "acme", "d")
        await refuses_each(
            lambda bad: queue.purge_dead("acme", older_than=bad), BAD_AGES, "older_than"
        )
        await refuses_each(lambda bad: queue.purge_dead("acme", limit=bad), BAD_LIMITS, "limit")
        with pytest.raises(InvalidArgumentError):
            await queue.purge_dead("")
        assert len(await queue.dead_letters("acme")) == 1

    # -- prune --------------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_prune_keeps_every_tenant_that_holds_an_item(self, queue: AsyncWorkQueue) -> None:
        await self._dead(queue, "t-dead", "d")
        await queue.enqueue("t-done", {}, item_id="done")
        await queue.complete(await self._lease(queue))
        await queue.enqueue("t-leased", {}, item_id="held")
        held = await self._lease(queue)
        await queue.enqueue("t-delayed", {}, item_id="later", delay_seconds=60)
        await queue.enqueue("t-ready", {}, item_id="waiting")
        await queue.enqueue("t-cancelled", {}, item_id="gone")
        assert await queue.cancel("t-cancelled", "gone")
        assert await self._prune_all(queue, limit=1) <= 2  # t-done and t-cancelled at most
        stats = await queue.stats()
        assert (stats.ready, stats.delayed, stats.leased, stats.dead) == (1, 1, 1, 1)
        await queue.complete(held)
        waiting = await self._lease(queue)
        assert waiting.item_id == "waiting"
        await queue.complete(waiting)
        assert (await queue.requeue("t-dead", "d")).state == "ready"
        self.advance(60)
        served = {(await self._lease(queue)).item_id for _ in range(2)}
        assert served == {"d", "later"}

    @pytest.mark.asyncio
    async def test_prune_is_bounded_by_its_limit(self, queue: AsyncWorkQueue) -> None:
        for n in range(3):
            await queue.enqueue(f"gone-{n}", {}, item_id="x")
            await queue.complete(await self._lease(queue))
        assert await queue.prune(limit=2) <= 2
        assert await self._prune_all(queue, limit=2) <= 3
        assert await queue.prune() == 0

    @pytest.mark.asyncio
    async def test_a_pruned_tenant_is_served_in_rotation_again(self, queue: AsyncWorkQueue) -> None:
        for tenant in ("a", "b"):
            await queue.enqueue(tenant, {}, item_id="first")
            await queue.complete(await self._lease(queue))
        await self._prune_all(queue, limit=100)
        for round_ in range(3):
            for tenant in ("b", "c", "a"):
                await queue.enqueue(tenant, {"round": round_})
        served = [(await self._lease(queue)).tenant for _ in range(9)]
        for window in range(3):
            assert sorted(served[window * 3 : window * 3 + 3]) == ["a", "b", "c"]
        assert await queue.claim("w1") is None

    @pytest.mark.asyncio
    async def test_a_partial_prune_forgets_the_least_recently_served_first(
        self, queue: AsyncWorkQueue
    ) -> None:
        # z is served before a; both then go idle by cancel after the last claim (a claim may
        # retire the entry of a tenant with no ready item on some backends), and m waits.
        for tenant in ("z", "a"):
            await queue.enqueue(tenant, {}, item_id=f"{tenant}-served")
            await queue.enqueue(tenant, {}, item_id=f"{tenant}-cancelled")
            lease = await self._lease(queue)
            assert lease.item_id == f"{tenant}-served"
            await queue.complete(lease)
        for tenant in ("z", "a"):
            assert await queue.cancel(tenant, f"{tenant}-cancelled")
        await queue.enqueue("m", {}, item_id="m1")
        await queue.enqueue("m", {}, item_id="m2")
        assert await queue.prune(limit=1) == 1
        # z (served least recently) is forgotten and comes back as new, behind a (its turn
        # kept) and m (seen before it); had a been forgotten instead, z would be served first.
        await queue.enqueue("a", {}, item_id="a2")
        await queue.enqueue("z", {}, item_id="z2")
        served = [(await self._lease(queue)).item_id for _ in range(4)]
        assert served == ["a2", "m1", "z2", "m2"], served

    @pytest.mark.asyncio
    async def test_prune_refuses_a_bad_limit(self, queue: AsyncWorkQueue) -> None:
        await refuses_each(lambda bad: queue.prune(limit=bad), BAD_LIMITS, "limit")

    @pytest.mark.asyncio
    async def test_prune_keeps_a_tenant_whose_lapsed_item_waits_out_its_backoff(
        self, queue: AsyncWorkQueue
    ) -> None:
        await queue.enqueue("acme", {}, item_id="crashed")
        await self._lease(queue)
        self.advance(KIT_POLICY.lease_seconds + 1)
        assert [i.item_id for i in await queue.reap()] == ["crashed"]
        await self._prune_all(queue, limit=100)
        self.advance(KIT_POLICY.backoff(1))
        assert (await self._lease(queue, "w2")).item_id == "crashed"
