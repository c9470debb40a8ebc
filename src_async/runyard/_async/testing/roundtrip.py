"""The round-trip cases of the conformance kit: a stored JSON value reads back as it was sent.

Equal is not enough: ``-0.0 == 0.0`` and dicts compare without their key order. Each case also
compares the ``json.dumps`` text of what comes back with the text of what was sent, as the memory
backend returns it: floats keep their form (``1e16`` stays a float, ``-0.0`` keeps its sign),
big integers stay exact, and object keys keep the order the client gave them (event data
excepted: it is stored canonical, keys sorted, on every backend).

Mixed into AsyncStateStoreConformance and AsyncWorkQueueConformance, whose ``store`` and
``queue`` fixtures they use.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from runyard._async.event_protocol import AsyncEventLogStore
from runyard._async.protocols import AsyncBatchedWorkQueue, AsyncStateStore, AsyncWorkQueue
from runyard.models import CounterDelta, NewItem, RunKey

__all__ = ["TRICKY_JSON", "AsyncQueueRoundTripCases", "AsyncStateRoundTripCases"]

TRICKY_JSON: dict[str, Any] = {
    "z": {"b": 1, "a": 2, "c": {"y": [], "x": {}}},
    "floats": [1e16, 0.1, -0.0, 1.5e-300, 2.5, 1e-7, 123456789.125],
    "ints": [2**62, -(2**63), 2**63 - 1, 0, -1],
    "unicode": 'héllo ☃ 𝄞 \u2028 "quoted" back\\slash',
    "keys": {"é": 1, "☃": 2, "": 3, "10": 4, "9": 5},
    "a": [None, True, False, "", [[]], [{"b": None, "a": 0.0}]],
}


def _text(value: Any) -> str:
    return json.dumps(value, allow_nan=False)


def _assert_same(got: Any, sent: Any) -> None:
    assert got == sent
    assert _text(got) == _text(sent)


class AsyncStateRoundTripCases:
    """Run blobs, session blobs and event data read back with the text and key order sent."""

    @pytest.mark.asyncio
    async def test_roundtrip_run_blob_keeps_its_json_text(self, store: AsyncStateStore) -> None:
        key = RunKey("acme", "exact")
        written = await store.put_run(key, TRICKY_JSON, expected_version=0)
        _assert_same(written.blob, TRICKY_JSON)
        got = await store.get_run(key)
        assert got is not None
        _assert_same(got.blob, TRICKY_JSON)
        listed = await store.list_runs("acme")
        _assert_same([r.blob for r in listed.items if r.run_id == "exact"], [TRICKY_JSON])
        again = await store.put_run(key, [TRICKY_JSON, -0.0], expected_version=1)
        _assert_same(again.blob, [TRICKY_JSON, -0.0])

    @pytest.mark.asyncio
    async def test_roundtrip_session_blob_keeps_its_json_text(self, store: AsyncStateStore) -> None:
        written = await store.put_session("acme", "s-exact", TRICKY_JSON, expected_version=0)
        _assert_same(written.blob, TRICKY_JSON)
        got = await store.get_session("acme", "s-exact")
        assert got is not None
        _assert_same(got.blob, TRICKY_JSON)

    @pytest.mark.asyncio
    async def test_roundtrip_event_data_keeps_its_json_text(self, store: AsyncStateStore) -> None:
        if not store.capabilities.event_log:
            pytest.skip(f"{type(store).__name__} does not declare event_log")
        assert isinstance(store, AsyncEventLogStore)
        key = RunKey("acme", "exact-events")
        await store.put_run(key, {}, expected_version=0)
        # Event data is stored canonical (keys sorted, so a retried event_id compares equal):
        # every backend returns that form, with its floats and integers as sent.
        canonical = json.loads(json.dumps(TRICKY_JSON, sort_keys=True))
        appended = await store.append_event(key, "step", TRICKY_JSON, event_id="e1")
        _assert_same(appended.data, canonical)
        retried = await store.append_event(key, "step", TRICKY_JSON, event_id="e1")
        assert retried.seq == appended.seq
        events = await store.read_events(key)
        _assert_same([e.data for e in events], [canonical])

    @pytest.mark.asyncio
    async def test_a_run_write_returns_the_run_as_stored(self, store: AsyncStateStore) -> None:
        # A backend may build the returned record from what it sent rather than read it back:
        # whatever it returns must be what a read gets, field for field.
        key = RunKey("acme", "as-stored")
        writes = [
            await store.put_run(key, {"n": 1}, expected_version=0, status="queued"),
            await store.put_run(key, {"n": 2}, expected_version=1, session_id="s1"),
            await store.patch_run(key, CounterDelta(input_tokens=3, iterations=1)),
            await store.put_run(key, {"n": 3}, expected_version=3, status="done"),
        ]
        assert [written.version for written in writes] == [1, 2, 3, 4]
        assert await store.get_run(key) == writes[-1]
        other = RunKey("acme", "as-stored-2")
        created = await store.put_run(other, [], expected_version=0, session_id="s2")
        assert await store.get_run(other) == created
        patched = await store.patch_run(other, CounterDelta(cost_micros=5))
        assert await store.get_run(other) == patched


class AsyncQueueRoundTripCases:
    """Work payloads read back with the text and key order sent."""

    @pytest.mark.asyncio
    async def test_roundtrip_payload_keeps_its_json_text(self, queue: AsyncWorkQueue) -> None:
        enqueued = await queue.enqueue("acme", TRICKY_JSON, item_id="exact")
        _assert_same(enqueued.payload, TRICKY_JSON)
        stored = await queue.get_item("acme", "exact")
        assert stored is not None
        _assert_same(stored.payload, TRICKY_JSON)
        lease = await queue.claim("w1")
        assert lease is not None and lease.item_id == "exact"
        _assert_same(lease.item.payload, TRICKY_JSON)

    @pytest.mark.asyncio
    async def test_an_enqueued_item_is_returned_as_it_is_stored(
        self, queue: AsyncWorkQueue
    ) -> None:
        # A backend may build the returned item from what it sent rather than read it back:
        # whatever it returns must be what get_item reads, field for field.
        made = [
            await queue.enqueue("acme", {"n": 1}),
            await queue.enqueue("acme", [1, 2.5], item_id="i-2", priority=-3),
            await queue.enqueue("acme", "x", dedupe_key="k", delay_seconds=12.5, max_attempts=2),
            await queue.enqueue("beta", None, run_at=1.0, priority=7),  # a past run_at
        ]
        for item in made:
            assert await queue.get_item(item.tenant, item.item_id) == item
        # A repeat returns the stored item, not the repeat's arguments.
        assert await queue.enqueue("acme", "other", dedupe_key="k") == made[2]
        assert await queue.enqueue("acme", "other", item_id="i-2") == made[1]
        if queue.capabilities.batched_operations:
            assert isinstance(queue, AsyncBatchedWorkQueue)
            batch = await queue.enqueue_many(
                "gamma",
                [
                    NewItem(payload=5, max_attempts=9),
                    NewItem(payload={"a": 1}, delay_seconds=3.0, priority=2),
                    NewItem(payload="dup", item_id="i-2"),
                ],
            )
            for item in batch:
                assert await queue.get_item(item.tenant, item.item_id) == item
