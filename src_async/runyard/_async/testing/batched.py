"""AsyncBatchedQueueCases: the kit's cases for ``batched_operations`` (the ``*_many`` calls).

A queue that does not declare the capability skips them, saying so.
"""

from __future__ import annotations

from typing import Any

import pytest

from runyard._async.protocols import AsyncBatchedWorkQueue, AsyncWorkQueue
from runyard._async.testing._kit import KIT_POLICY, AsyncQueueKitBase
from runyard.errors import InvalidArgumentError, LeaseLostError, WorkItemNotFoundError
from runyard.models import Lease, NewItem

__all__ = ["AsyncBatchedQueueCases"]


class AsyncBatchedQueueCases(AsyncQueueKitBase):
    """Mixed into the WorkQueue conformance class; uses its ``queue`` fixture and ``advance``."""

    async def _stale_and_current(self, queue: AsyncBatchedWorkQueue) -> tuple[Lease, Lease]:
        """A lease that lapsed and was claimed again (stale), and the one that replaced it."""
        await queue.enqueue("acme", {"n": 1})
        (stale,) = await queue.claim_many("w1", limit=1)
        self.advance(KIT_POLICY.lease_seconds + 1)
        await queue.reap()
        self.advance(KIT_POLICY.backoff(1))
        (current,) = await queue.claim_many("w2", limit=1)
        return stale, current

    @pytest.mark.asyncio
    async def test_claim_many_serves_tenants_in_the_rotation_of_single_claims(
        self, queue: AsyncWorkQueue
    ) -> None:
        batched = self._batched(queue)
        for n in range(3):
            await batched.enqueue("a", {"n": n})
        await batched.enqueue("b", {"n": 0})
        leases = await batched.claim_many("w1", limit=3)
        assert [lease.tenant for lease in leases] == ["a", "b", "a"]
        assert len({lease.token for lease in leases}) == 3
        assert all(lease.worker == "w1" and lease.item.attempts == 1 for lease in leases)

    @pytest.mark.asyncio
    async def test_claim_many_draws_tokens_in_the_order_it_serves(
        self, queue: AsyncWorkQueue
    ) -> None:
        # The items of "a" are stored before the one of "b", which is served second: the k-th
        # lease served has the k-th token, so adopt (token order) gives the claim's order back,
        # and again after its new tokens.
        batched = self._batched(queue)
        await batched.enqueue_many("a", [NewItem(payload={"n": n}) for n in range(3)])
        await batched.enqueue("b", {"n": 0})
        leases = await batched.claim_many("w1", limit=4)
        served = [(lease.tenant, lease.item_id) for lease in leases]
        assert [tenant for tenant, _ in served] == ["a", "b", "a", "a"]
        tokens = [lease.token for lease in leases]
        assert tokens == sorted(tokens) and len(set(tokens)) == 4, tokens
        for _ in range(2):
            adopted = await batched.adopt("w1")
            assert [(lease.tenant, lease.item_id) for lease in adopted] == served
            assert [lease.token for lease in adopted] == sorted(lease.token for lease in adopted)

    @pytest.mark.asyncio
    async def test_release_many_readies_items_in_the_order_given(
        self, queue: AsyncWorkQueue
    ) -> None:
        # One tenant, one priority, released together: the next claims serve them in the
        # order the batch handed them back, as single releases in that order would.
        batched = self._batched(queue)
        await batched.enqueue_many("acme", [NewItem(payload={"n": n}) for n in range(4)])
        leases = await batched.claim_many("w1", limit=4)
        handed_back = [leases[2], leases[0], leases[3], leases[1]]
        assert await batched.release_many(handed_back) == [None] * 4
        again = await batched.claim_many("w2", limit=4)
        assert [lease.item_id for lease in again] == [lease.item_id for lease in handed_back]

    @pytest.mark.asyncio
    async def test_claim_many_stops_when_nothing_is_due(self, queue: AsyncWorkQueue) -> None:
        batched = self._batched(queue)
        assert await batched.claim_many("w1", limit=5) == []
        await batched.enqueue("acme", {"n": 1})
        assert len(await batched.claim_many("w1", limit=5)) == 1

    @pytest.mark.asyncio
    @pytest.mark.parametrize("limit", [16, 17, 40])
    async def test_claim_many_takes_at_most_its_limit_of_any_size(
        self, queue: AsyncWorkQueue, limit: int
    ) -> None:
        # Sizes on both sides of 16 (a store may send small batches in another form).
        batched = self._batched(queue)
        await batched.enqueue_many("a", [NewItem(payload={"n": n}) for n in range(limit + 2)])
        await batched.enqueue_many("b", [NewItem(payload={"n": n}) for n in range(2)])
        leases = await batched.claim_many("w1", limit=limit)
        assert len(leases) == limit
        assert [lease.tenant for lease in leases[:4]] == ["a", "b", "a", "b"]
        assert len({(lease.tenant, lease.item_id) for lease in leases}) == limit
        rest = await batched.claim_many("w1", limit=limit)
        assert len(rest) == 4 and {lease.tenant for lease in rest} == {"a"}

    @pytest.mark.asyncio
    async def test_complete_many_fails_only_the_stale_item(self, queue: AsyncWorkQueue) -> None:
        batched = self._batched(queue)
        stale, current = await self._stale_and_current(batched)
        await batched.enqueue("acme", {"n": 2})
        (other,) = await batched.claim_many("w2", limit=1)
        results = await batched.complete_many([stale, other])
        assert isinstance(results[0], LeaseLostError) and results[1] is None
        assert await batched.get_item("acme", other.item_id) is None
        assert (await batched.complete_many([current])) == [None]

    @pytest.mark.asyncio
    async def test_heartbeat_many_renews_each_lease_and_reports_the_lost_one(
        self, queue: AsyncWorkQueue
    ) -> None:
        batched = self._batched(queue)
        stale, current = await self._stale_and_current(batched)
        self.advance(10)
        renewed, lost = await batched.heartbeat_many([current, stale])
        assert isinstance(renewed, Lease) and renewed.token == current.token
        assert renewed.expires_at > current.expires_at
        assert isinstance(lost, LeaseLostError)

    @pytest.mark.asyncio
    async def test_a_lease_named_twice_in_a_batch_settles_as_two_calls_in_order(
        self, queue: AsyncWorkQueue
    ) -> None:
        # Misuse, but answered as the single calls would answer it: the second complete finds
        # the item gone; the second heartbeat renews again; the second release finds the item
        # handed back (its token no longer the item's).
        batched = self._batched(queue)
        for n in range(3):
            await batched.enqueue("acme", {"n": n})
        done, beat, back = await batched.claim_many("w1", limit=3)
        first, second = await batched.complete_many([done, done])
        assert first is None and isinstance(second, WorkItemNotFoundError)
        renewed = await batched.heartbeat_many([beat, beat])
        assert all(isinstance(r, Lease) and r.token == beat.token for r in renewed)
        first, second = await batched.release_many([back, back])
        assert first is None and isinstance(second, LeaseLostError)
        item = await batched.get_item("acme", back.item_id)
        assert item is not None and (item.state, item.attempts) == ("ready", 0)

    @pytest.mark.asyncio
    async def test_an_item_named_under_two_tokens_settles_as_two_calls_in_order(
        self, queue: AsyncWorkQueue
    ) -> None:
        batched = self._batched(queue)
        stale, current = await self._stale_and_current(batched)
        first, second = await batched.complete_many([current, stale])
        assert first is None and isinstance(second, WorkItemNotFoundError)

    @pytest.mark.asyncio
    async def test_release_many_hands_back_without_counting_the_attempt(
        self, queue: AsyncWorkQueue
    ) -> None:
        batched = self._batched(queue)
        await batched.enqueue("acme", {"n": 1})
        (lease,) = await batched.claim_many("w1", limit=1)
        assert await batched.release_many([lease]) == [None]
        item = await batched.get_item("acme", lease.item_id)
        assert item is not None and (item.state, item.attempts) == ("ready", 0)
        (again,) = await batched.claim_many("w2", limit=1)
        assert again.item.attempts == 1
        assert isinstance((await batched.complete_many([lease]))[0], LeaseLostError)

    @pytest.mark.asyncio
    async def test_enqueue_many_adds_in_order_and_dedupes(self, queue: AsyncWorkQueue) -> None:
        batched = self._batched(queue)
        items = await batched.enqueue_many(
            "acme",
            [
                NewItem(payload={"n": 1}, dedupe_key="k"),
                NewItem(payload={"n": 2}, priority=5),
                NewItem(payload={"n": 3}, dedupe_key="k"),
            ],
        )
        assert [i.payload for i in items] == [{"n": 1}, {"n": 2}, {"n": 1}]
        assert items[0].item_id == items[2].item_id and items[1].priority == 5
        assert (await batched.stats()).ready == 2

    @pytest.mark.asyncio
    @pytest.mark.parametrize(
        ("stored", "batch", "expected"),
        [
            # The second item's id is free when it comes but its dedupe key is the first's;
            # the third then takes that id: the second stands for the first, not the third.
            (
                [],
                [("i14", "d3"), ("i13", "d3"), ("i13", None)],
                [("i14", 1), ("i14", 1), ("i13", 3)],
            ),
            # The same with the key held by an item stored before the batch.
            ([("s", "k")], [("n", "k"), ("n", None)], [("s", 0), ("n", 2)]),
            # Ids and keys reused back and forth: each item is what single enqueues give.
            (
                [],
                [("p", None), ("q", "k"), ("r", "k"), ("r", "l"), ("q", "l"), ("s", "l")],
                [("p", 1), ("q", 2), ("q", 2), ("r", 4), ("q", 2), ("r", 4)],
            ),
        ],
        ids=["key-then-id", "stored-key-then-id", "back-and-forth"],
    )
    async def test_enqueue_many_gives_what_single_enqueues_in_order_give(
        self,
        queue: AsyncWorkQueue,
        stored: list[tuple[str, str | None]],
        batch: list[tuple[str, str | None]],
        expected: list[tuple[str, int]],
    ) -> None:
        # Item n of the batch has payload {"n": n} (from 1; the stored items have 0): item n
        # is the item it added, or else the one stored (or added by an earlier item) under its
        # id, or else under its dedupe key.
        batched = self._batched(queue)
        for item_id, key in stored:
            await batched.enqueue("acme", {"n": 0}, item_id=item_id, dedupe_key=key)
        items = await batched.enqueue_many(
            "acme",
            [
                NewItem(payload={"n": n}, item_id=item_id, dedupe_key=key)
                for n, (item_id, key) in enumerate(batch, start=1)
            ],
        )
        assert [(i.item_id, i.payload["n"]) for i in items] == expected
        for item_id, n in expected:
            got = await batched.get_item("acme", item_id)
            assert got is not None and got.payload == {"n": n}
        assert (await batched.stats()).ready == len({item_id for item_id, _ in expected})

    @pytest.mark.asyncio
    async def test_settles_many_check_every_lease_before_settling_any(
        self, queue: AsyncWorkQueue
    ) -> None:
        # Memory completed the first lease, then refused the second's empty tenant; the
        # others answered "no work item" for it (PostgreSQL sent a token past a bigint).
        batched = self._batched(queue)
        await batched.enqueue("acme", {}, item_id="a")
        await batched.enqueue("acme", {}, item_id="b")
        first, second = await batched.claim_many("w", limit=2)
        bad_tenant = second.model_copy(
            update={"item": second.item.model_copy(update={"tenant": ""})}
        )
        bad_token = second.model_copy(update={"token": 2**63})
        for bad, argument in ((bad_tenant, "tenant"), (bad_token, "token")):
            for settle in (batched.complete_many, batched.heartbeat_many, batched.release_many):
                with pytest.raises(InvalidArgumentError) as caught:
                    await settle([first, bad])
                assert caught.value.argument == argument
        for item_id in ("a", "b"):
            held = await batched.get_item("acme", item_id)
            assert held is not None and held.state == "leased"
        assert await batched.complete_many([first, second]) == [None, None]

    @pytest.mark.asyncio
    @pytest.mark.parametrize("shape", ["none", "dict", "iterator", "model", "str"])
    async def test_batched_calls_refuse_what_is_not_a_collection_of_models(
        self, queue: AsyncWorkQueue, shape: str
    ) -> None:
        batched = self._batched(queue)
        item = NewItem(payload={"n": 1})
        items: Any = {
            "none": None,
            "dict": [{"payload": 1}],
            "iterator": iter([item]),
            "model": item,
            "str": "ab",
        }[shape]
        with pytest.raises(InvalidArgumentError) as caught:
            await batched.enqueue_many("acme", items)
        assert caught.value.argument == "items"
        leases: Any = {"none": None, "dict": [{}], "iterator": iter([]), "model": item}.get(
            shape, ["x"]
        )
        for settle in (batched.complete_many, batched.heartbeat_many, batched.release_many):
            with pytest.raises(InvalidArgumentError) as caught:
                await settle(leases)
            assert caught.value.argument == "leases"
        assert (await batched.stats()).ready == 0
        # A collection that is no sequence serves (typed Sequence, taken as it was before the
        # checks): a dict's values, in their order.
        items = {"one": item}.values()
        await batched.enqueue_many("acme", items)
        by_id = {lease.item_id: lease for lease in await batched.claim_many("w", limit=1)}
        leases = by_id.values()
        assert await batched.complete_many(leases) == [None]

    @pytest.mark.asyncio
    async def test_enqueue_many_checks_every_item_before_adding_any(
        self, queue: AsyncWorkQueue
    ) -> None:
        batched = self._batched(queue)
        with pytest.raises(InvalidArgumentError):
            await batched.enqueue_many(
                "acme", [NewItem(payload={"n": 1}), NewItem(payload={}, delay_seconds=-1)]
            )
        assert (await batched.stats()).ready == 0
