"""runyard.queue_args: one check of an enqueue and of a batched settle, for every backend."""

from __future__ import annotations

import json
import uuid

import pytest
from runyard import InvalidArgumentError, MemoryWorkQueue
from runyard.clock import ManualClock
from runyard.models import Lease, NewItem, WorkItem
from runyard.queue_args import check_item, check_items, check_leases

ONE = {
    "item_id": None,
    "dedupe_key": None,
    "priority": 0,
    "delay_seconds": 0.0,
    "run_at": None,
    "max_attempts": None,
    "max_bytes": 1024,
}


def _lease(tenant: str, item_id: str, token: int) -> Lease:
    item = WorkItem(
        tenant=tenant,
        item_id=item_id,
        payload={},
        priority=0,
        state="leased",
        available_at=0.0,
        enqueued_at=0.0,
    )
    return Lease(item=item, token=token, worker="w", claimed_at=0.0, expires_at=1.0)


def test_a_checked_item_carries_its_stored_payload_and_due_time() -> None:
    item = check_item("acme", {"n": 1}, **{**ONE, "item_id": "i1", "delay_seconds": 5})
    assert (item.item_id, item.minted, item.anonymous) == ("i1", False, False)
    assert json.loads(item.payload) == {"n": 1}
    assert item.due_at(100.0) == 105.0
    at = check_item("acme", {}, **{**ONE, "run_at": 50.0})
    assert at.due_at(100.0) == 100.0  # a past run_at is due at once
    assert at.due_at(10.0) == 50.0


def test_only_an_item_without_id_or_dedupe_key_is_anonymous() -> None:
    assert check_item("acme", {}, **ONE).anonymous
    assert not check_item("acme", {}, **{**ONE, "dedupe_key": "k"}).anonymous


def test_the_tenant_is_checked_before_the_item() -> None:
    with pytest.raises(InvalidArgumentError, match="tenant"):
        check_item("", {}, **{**ONE, "priority": "high"})
    with pytest.raises(InvalidArgumentError, match="tenant"):
        check_items("", [NewItem(payload={})], 1024)


def test_a_batch_past_ten_thousand_is_refused_naming_it() -> None:
    # The rule is the batch's (0 to 10000: an empty batch is taken), not a page size's (it
    # said "items 10001 is not a page size (an int from 1 to 10000)").
    rule = "a collection (list, tuple, dict values) of 0 to 10000"
    with pytest.raises(InvalidArgumentError, match="items holds 10001 NewItem") as caught:
        check_items("acme", [NewItem(payload={})] * 10_001, 1024)
    assert caught.value.argument == "items" and rule in str(caught.value.limit)
    with pytest.raises(InvalidArgumentError, match="leases holds 10001 Lease") as caught:
        check_leases([_lease("acme", "i", 1)] * 10_001)
    assert caught.value.argument == "leases" and rule in str(caught.value.limit)
    assert check_items("acme", [], 1024) == []
    assert check_leases([]) == []


def test_leases_become_settle_targets_in_order() -> None:
    leases = [_lease("a", "i1", 3), _lease("b", "i2", 4)]
    assert check_leases(leases) == [("a", "i1", 3), ("b", "i2", 4)]


def test_the_memory_reference_refuses_an_oversized_batch_like_the_others() -> None:
    queue = MemoryWorkQueue(clock=ManualClock(0.0))
    with pytest.raises(InvalidArgumentError, match="items"):
        queue.enqueue_many("acme", [NewItem(payload={})] * 10_001)
    assert queue.stats().ready == 0
    with pytest.raises(InvalidArgumentError, match="leases"):
        queue.complete_many([_lease("acme", "i", 1)] * 10_001)


def test_a_minted_item_id_is_a_version_4_uuid_in_32_hex_digits() -> None:
    ids = [check_item("acme", {}, **ONE).item_id for _ in range(200)]
    assert len(set(ids)) == len(ids)
    for minted in ids:
        as_uuid = uuid.UUID(hex=minted)
        assert (as_uuid.hex, as_uuid.version, as_uuid.variant) == (minted, 4, uuid.RFC_4122)
