"""The memory queue's retention and recovery details the kit leaves open: exact prune counts
and order, and a zero backoff."""

from __future__ import annotations

from runyard import ManualClock, MemoryWorkQueue, QueuePolicy


def _drained(queue: MemoryWorkQueue, tenant: str) -> None:
    queue.enqueue(tenant, {})
    lease = queue.claim("w1")
    assert lease is not None and lease.tenant == tenant
    queue.complete(lease)


def test_memory_keeps_a_rotation_entry_per_tenant_until_pruned() -> None:
    queue = MemoryWorkQueue(clock=ManualClock())
    for tenant in ("a", "b", "c"):
        _drained(queue, tenant)
    queue.enqueue("kept", {}, delay_seconds=60)
    assert queue.prune(limit=2) == 2
    assert queue.prune(limit=2) == 1
    assert queue.prune() == 0
    assert queue.stats().delayed == 1


def test_prune_forgets_the_least_recently_served_tenants_first() -> None:
    queue = MemoryWorkQueue(clock=ManualClock())
    for tenant in ("z-old", "m-middle", "a-recent"):
        _drained(queue, tenant)
    assert queue.prune(limit=2) == 2
    # z-old was forgotten and joins at the back of the rotation (had a-recent been pruned
    # instead, z-old's old turn would put it first).
    queue.enqueue("z-old", {})
    queue.enqueue("a-recent", {})
    served = [lease.tenant for lease in (queue.claim("w1"), queue.claim("w1")) if lease]
    assert served == ["a-recent", "z-old"]


def test_with_no_backoff_a_claim_takes_back_a_lapse_and_claims_it_at_once() -> None:
    clock = ManualClock()
    queue = MemoryWorkQueue(clock=clock, policy=QueuePolicy(backoff_base=0))
    queue.enqueue("acme", {}, item_id="crashed")
    assert queue.claim("crashed-worker") is not None
    clock.advance(31)
    again = queue.claim("w2")  # backoff 0: taken back and claimed by the same call
    assert again is not None and (again.item_id, again.item.attempts) == ("crashed", 2)
