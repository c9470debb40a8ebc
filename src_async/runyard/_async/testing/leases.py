"""AsyncRunLeaseCases: the kit's cases for run leases (acquire, renew, release, fencing).

Mixed into AsyncStateStoreConformance; they use its ``store`` fixture and ``advance``.
"""

from __future__ import annotations

import pytest

from runyard._async.protocols import AsyncStateStore
from runyard._async.testing.events import AsyncEventLogConformance
from runyard.errors import LeaseLostError, RunLeaseHeldError
from runyard.models import CounterDelta, RunKey

__all__ = ["AsyncRunLeaseCases"]


class AsyncRunLeaseCases(AsyncEventLogConformance):
    """One holder at a time, a higher epoch after a lapse, and writes fenced by the epoch (on
    top of the event-log cases, as AsyncStateRetentionCases is)."""

    # -- acquire, renew, release -------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_first_lease_holder_wins(self, store: AsyncStateStore) -> None:
        key = RunKey("acme", "r")
        lease = await store.acquire_lease(key, "worker-a", ttl_seconds=30)
        assert (lease.holder, lease.epoch) == ("worker-a", 1)
        current = await store.get_lease(key)
        assert current is not None and current.holder == "worker-a"

    @pytest.mark.asyncio
    async def test_second_holder_is_refused_naming_the_holder(self, store: AsyncStateStore) -> None:
        key = RunKey("acme", "r")
        await store.acquire_lease(key, "worker-a", ttl_seconds=30)
        with pytest.raises(RunLeaseHeldError) as caught:
            await store.acquire_lease(key, "worker-b", ttl_seconds=30)
        assert caught.value.holder == "worker-a" and "worker-a" in str(caught.value)

    @pytest.mark.asyncio
    async def test_lapsed_lease_is_taken_with_a_higher_epoch(self, store: AsyncStateStore) -> None:
        key = RunKey("acme", "r")
        first = await store.acquire_lease(key, "worker-a", ttl_seconds=10)
        self.advance(11)
        second = await store.acquire_lease(key, "worker-b", ttl_seconds=10)
        assert second.holder == "worker-b" and second.epoch > first.epoch

    @pytest.mark.asyncio
    async def test_write_with_an_old_epoch_is_refused(self, store: AsyncStateStore) -> None:
        key = RunKey("acme", "r")
        await store.put_run(key, {"by": "nobody"}, expected_version=0)
        old = await store.acquire_lease(key, "worker-a", ttl_seconds=10)
        await store.put_run(key, {"by": "a"}, expected_version=1, fence=old.epoch)
        self.advance(11)
        new = await store.acquire_lease(key, "worker-b", ttl_seconds=10)
        with pytest.raises(LeaseLostError):
            await store.put_run(key, {"by": "a-late"}, expected_version=2, fence=old.epoch)
        with pytest.raises(LeaseLostError):
            await store.patch_run(key, CounterDelta(iterations=1), fence=old.epoch)
        record = await store.put_run(key, {"by": "b"}, expected_version=2, fence=new.epoch)
        assert record.blob == {"by": "b"} and record.iterations == 0

    @pytest.mark.asyncio
    async def test_renew_keeps_the_epoch(self, store: AsyncStateStore) -> None:
        key = RunKey("acme", "r")
        lease = await store.acquire_lease(key, "worker-a", ttl_seconds=10)
        self.advance(8)
        renewed = await store.renew_lease(lease, ttl_seconds=10)
        assert renewed.epoch == lease.epoch and renewed.expires_at > lease.expires_at
        self.advance(8)
        with pytest.raises(RunLeaseHeldError):
            await store.acquire_lease(key, "worker-b", ttl_seconds=10)

    @pytest.mark.asyncio
    async def test_stale_release_leaves_the_new_lease_alone(self, store: AsyncStateStore) -> None:
        key = RunKey("acme", "r")
        old = await store.acquire_lease(key, "worker-a", ttl_seconds=10)
        self.advance(11)
        new = await store.acquire_lease(key, "worker-b", ttl_seconds=10)
        assert await store.release_lease(old) is False
        current = await store.get_lease(key)
        assert current is not None and current.epoch == new.epoch
        assert await store.release_lease(new) is True
        assert await store.get_lease(key) is None
        with pytest.raises(LeaseLostError):
            await store.renew_lease(new, ttl_seconds=10)
