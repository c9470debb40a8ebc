"""The kit's retention cases: StateStore.prune and ExecutionStore.prune_processed."""

from __future__ import annotations

import pytest

from runyard._async.execution_protocol import AsyncExecutionStore
from runyard._async.protocols import AsyncStateStore
from runyard._async.testing._execution_base import AsyncExecutionKitBase, make_execution
from runyard._async.testing.events import AsyncEventLogConformance
from runyard.errors import InvalidArgumentError, LeaseLostError
from runyard.models import RunKey

__all__ = ["AsyncExecutionRetentionCases", "AsyncStateRetentionCases"]

# A store whose prune takes bounded steps (a Redis SCAN of the whole server) may need several
# calls for what a table store removes in one; the kit calls it at most this often, enough for
# a pass over a few hundred thousand keys.
MAX_PRUNE_CALLS = 100


async def prune_until(store: AsyncStateStore, expected: int, *, limit: int = 100) -> int:
    """Call ``prune`` until it has removed ``expected`` entries (or the calls run out); every
    call must stay within ``limit``. Returns the total removed."""
    total = 0
    for _ in range(MAX_PRUNE_CALLS):
        removed = await store.prune(limit=limit)
        assert 0 <= removed <= limit
        total += removed
        if total >= expected:
            break
    return total


class AsyncStateRetentionCases(AsyncEventLogConformance):
    """Cases for ``prune``, on top of the event-log cases; AsyncStateStoreConformance takes
    both through this base (and provides ``store`` and ``advance``)."""

    @pytest.mark.asyncio
    async def test_prune_removes_lapsed_and_released_leases_only(
        self, store: AsyncStateStore
    ) -> None:
        lapsed, live, released = (
            RunKey("acme", "lapsed"),
            RunKey("acme", "live"),
            RunKey("zeta", "r"),
        )
        await store.acquire_lease(lapsed, "worker-a", ttl_seconds=10)
        await store.acquire_lease(live, "worker-b", ttl_seconds=100)
        await store.release_lease(await store.acquire_lease(released, "worker-c", ttl_seconds=100))
        self.advance(11)
        assert await prune_until(store, 2) == 2
        assert await prune_until(store, 1) == 0
        current = await store.get_lease(live)
        assert current is not None and current.holder == "worker-b"
        assert await store.get_lease(lapsed) is None

    @pytest.mark.asyncio
    async def test_prune_never_removes_a_live_lease(self, store: AsyncStateStore) -> None:
        key = RunKey("acme", "r")
        lease = await store.acquire_lease(key, "worker-a", ttl_seconds=30)
        assert await prune_until(store, 1) == 0
        renewed = await store.renew_lease(lease, ttl_seconds=30)
        assert renewed.epoch == lease.epoch

    @pytest.mark.asyncio
    async def test_fencing_survives_a_pruned_lease(self, store: AsyncStateStore) -> None:
        key = RunKey("acme", "r")
        await store.put_run(key, {"by": "nobody"}, expected_version=0)
        old = await store.acquire_lease(key, "worker-a", ttl_seconds=10)
        self.advance(11)
        assert await prune_until(store, 1) == 1
        new = await store.acquire_lease(key, "worker-b", ttl_seconds=10)
        assert new.epoch > old.epoch
        with pytest.raises(LeaseLostError):
            await store.put_run(key, {"by": "a-late"}, expected_version=1, fence=old.epoch)
        record = await store.put_run(key, {"by": "b"}, expected_version=1, fence=new.epoch)
        assert record.blob == {"by": "b"}

    @pytest.mark.asyncio
    async def test_a_pruned_lease_can_be_acquired_again_by_its_holder(
        self, store: AsyncStateStore
    ) -> None:
        key = RunKey("acme", "r")
        first = await store.acquire_lease(key, "worker-a", ttl_seconds=10)
        await store.release_lease(first)
        assert await prune_until(store, 1) == 1
        again = await store.acquire_lease(key, "worker-a", ttl_seconds=10)
        assert again.epoch > first.epoch
        current = await store.get_lease(key)
        assert current is not None and current.epoch == again.epoch

    @pytest.mark.asyncio
    async def test_prune_removes_at_most_limit_per_call(self, store: AsyncStateStore) -> None:
        for i in range(5):
            lease = await store.acquire_lease(RunKey("acme", f"r{i}"), "w", ttl_seconds=10)
            await store.release_lease(lease)
        assert await prune_until(store, 5, limit=2) == 5
        assert await prune_until(store, 1, limit=2) == 0

    @pytest.mark.asyncio
    @pytest.mark.parametrize("limit", [0, -1, 10_001, 2.5, True])
    async def test_prune_refuses_a_bad_limit(self, store: AsyncStateStore, limit: object) -> None:
        with pytest.raises(InvalidArgumentError) as caught:
            await store.prune(limit=limit)  # type: ignore[arg-type]
        assert "limit" in str(caught.value)


class AsyncExecutionRetentionCases(AsyncExecutionKitBase):
    """Cases for ``prune_processed``."""

    async def _marked(self, store: AsyncExecutionStore, *event_ids: str) -> None:
        exe = make_execution("e1")
        for event_id in event_ids:
            await store.commit(exe, processed_event_id=event_id)

    @pytest.mark.asyncio
    async def test_prune_processed_keeps_marks_younger_than_the_retention(
        self, store: AsyncExecutionStore
    ) -> None:
        await self._marked(store, "in-1", "in-2")
        assert await store.prune_processed(older_than=3600) == 0
        assert await store.is_processed("e1", "in-1") is True

    @pytest.mark.asyncio
    async def test_prune_processed_forgets_old_marks_and_keeps_the_execution(
        self, store: AsyncExecutionStore
    ) -> None:
        await self._marked(store, "in-1", "in-2")
        assert await store.prune_processed(older_than=0) == 2
        assert await store.is_processed("e1", "in-1") is False
        assert await store.is_processed("e1", "in-2") is False
        loaded = await store.load("e1")
        assert loaded is not None and loaded.version == 2
        assert await store.prune_processed(older_than=0) == 0

    @pytest.mark.asyncio
    async def test_prune_processed_takes_the_oldest_first_up_to_the_limit(
        self, store: AsyncExecutionStore
    ) -> None:
        await self._marked(store, "in-1", "in-2", "in-3")
        assert await store.prune_processed(older_than=0, limit=2) == 2
        assert await store.is_processed("e1", "in-1") is False
        assert await store.is_processed("e1", "in-2") is False
        assert await store.is_processed("e1", "in-3") is True
        assert await store.prune_processed(older_than=0, limit=2) == 1

    @pytest.mark.asyncio
    async def test_a_redelivery_after_pruning_is_processed_again(
        self, store: AsyncExecutionStore
    ) -> None:
        await self._marked(store, "in-1")
        await store.prune_processed(older_than=0)
        exe, seen = await store.load_for_event("e1", "in-1")
        assert exe is not None and seen is False
        await store.commit(exe, processed_event_id="in-1")
        assert await store.is_processed("e1", "in-1") is True

    @pytest.mark.asyncio
    @pytest.mark.parametrize(
        ("older_than", "limit", "named"),
        [(-1.0, 10, "older_than"), (float("nan"), 10, "older_than"), (0.0, 0, "limit")],
    )
    async def test_prune_processed_refuses_bad_arguments(
        self, store: AsyncExecutionStore, older_than: float, limit: int, named: str
    ) -> None:
        with pytest.raises(InvalidArgumentError) as caught:
            await store.prune_processed(older_than=older_than, limit=limit)
        assert named in str(caught.value)
