"""The validation cases of the conformance kit: every limit of docs/protocols.md ("Limits and
validation"), refused the same way by every store, with nothing written.

Mixed into AsyncStateStoreConformance and AsyncWorkQueueConformance, whose ``store`` and
``queue`` fixtures they use.
"""

from __future__ import annotations

from typing import Any

import pytest

from runyard._async.protocols import AsyncStateStore, AsyncWorkQueue
from runyard._async.testing._kit import AsyncQueueKitBase, refuses_each
from runyard.errors import InvalidArgumentError
from runyard.keys import InvalidIdentifierError
from runyard.models import CounterDelta, RunKey, RunRecord
from runyard.validation import (
    COUNTER_FIELDS,
    MAX_COUNTER,
    MAX_ERROR_BYTES,
    MAX_PRIORITY,
    MAX_STATUS_BYTES,
    MIN_PRIORITY,
)

__all__ = ["AsyncQueueValidationCases", "AsyncStateValidationCases"]

BAD_STATUSES = ["", "nul\x00", "lone\ud800", "s" * (MAX_STATUS_BYTES + 1)]
BAD_PRIORITIES: list[Any] = [
    True,
    1.5,
    "3",
    None,
    MAX_PRIORITY + 1,
    MIN_PRIORITY - 1,
    10**15,
    2**63,
]
BAD_DELAYS: list[Any] = [
    float("nan"),
    float("inf"),
    -1,
    -0.5,
    10**400,
    True,
    "1",
    None,
]  # past a float
BAD_ERRORS = ["nul\x00", "lone\ud800", "e" * (MAX_ERROR_BYTES + 1)]


def _counters(record: RunRecord) -> tuple[int, ...]:
    return (*(getattr(record, name) for name in COUNTER_FIELDS), record.version)


class AsyncStateValidationCases:
    """Limits every StateStore enforces before anything is written."""

    @pytest.mark.asyncio
    async def test_validation_delta_out_of_range_is_refused(self, store: AsyncStateStore) -> None:
        key = RunKey("acme", "r")
        await store.put_run(key, {}, expected_version=0)
        for amount in (2**64, 2**63 - 1, MAX_COUNTER + 1, -1):
            # model_construct skips CounterDelta's own check, so the store must make it.
            delta = CounterDelta.model_construct(
                input_tokens=5, output_tokens=6, cost_micros=amount, iterations=1, cursor=0
            )
            with pytest.raises(InvalidArgumentError) as caught:
                await store.patch_run(key, delta)
            assert caught.value.argument == "delta.cost_micros"
            assert str(MAX_COUNTER) in str(caught.value)
        got = await store.get_run(key)
        assert got is not None and _counters(got) == (0, 0, 0, 0, 0, 1)

    @pytest.mark.asyncio
    async def test_validation_patch_past_the_counter_limit_writes_nothing(
        self, store: AsyncStateStore
    ) -> None:
        key = RunKey("acme", "r")
        await store.put_run(key, {}, expected_version=0)
        await store.patch_run(key, CounterDelta(cost_micros=MAX_COUNTER - 1))
        with pytest.raises(InvalidArgumentError) as caught:
            await store.patch_run(
                key,
                CounterDelta(input_tokens=5, output_tokens=6, cost_micros=2, iterations=1),
                status="done",
            )
        assert caught.value.argument == "delta.cost_micros" and not caught.value.retryable
        got = await store.get_run(key)
        assert got is not None
        assert _counters(got) == (0, 0, MAX_COUNTER - 1, 0, 0, 2) and got.status != "done"
        # Up to the limit itself is fine, and comes back exact.
        reached = await store.patch_run(key, CounterDelta(cost_micros=1, iterations=MAX_COUNTER))
        assert (reached.cost_micros, reached.iterations) == (MAX_COUNTER, MAX_COUNTER)
        again = await store.get_run(key)
        assert again is not None and _counters(again) == _counters(reached)

    @pytest.mark.asyncio
    @pytest.mark.parametrize("bad", BAD_STATUSES, ids=["empty", "nul", "surrogate", "long"])
    async def test_validation_bad_status_is_refused(self, store: AsyncStateStore, bad: str) -> None:
        key = RunKey("acme", "r")
        with pytest.raises(InvalidArgumentError) as caught:
            await store.put_run(key, {}, expected_version=0, status=bad)
        assert caught.value.argument == "status"
        assert await store.get_run(key) is None
        await store.put_run(key, {}, expected_version=0, status="queued")
        with pytest.raises(InvalidArgumentError):
            await store.patch_run(key, CounterDelta(iterations=1), status=bad)
        with pytest.raises(InvalidArgumentError):
            await store.list_runs("acme", status=bad)
        got = await store.get_run(key)
        assert got is not None and (got.status, got.version, got.iterations) == ("queued", 1, 0)

    @pytest.mark.asyncio
    @pytest.mark.parametrize("bad", [True, "1", 1.0, -1, 2**63], ids=repr)
    async def test_validation_bad_versions_and_fences_are_refused(
        self, store: AsyncStateStore, bad: Any
    ) -> None:
        key = RunKey("acme", "r")
        await store.put_run(key, {"v": 1}, expected_version=0)
        with pytest.raises(InvalidArgumentError) as caught:
            await store.put_run(key, {"v": 2}, expected_version=bad)
        assert caught.value.argument == "expected_version"
        with pytest.raises(InvalidArgumentError) as caught:
            await store.put_run(key, {"v": 2}, expected_version=1, fence=bad)
        assert caught.value.argument == "fence"
        with pytest.raises(InvalidArgumentError) as caught:
            await store.patch_run(key, CounterDelta(iterations=1), fence=bad)
        assert caught.value.argument == "fence"
        with pytest.raises(InvalidArgumentError) as caught:
            await store.delete_run(key, expected_version=bad)
        assert caught.value.argument == "expected_version"
        with pytest.raises(InvalidArgumentError) as caught:
            await store.put_session("acme", "s", {}, expected_version=bad)
        assert caught.value.argument == "expected_version"
        got = await store.get_run(key)
        assert got is not None and (got.blob, got.version, got.iterations) == ({"v": 1}, 1, 0)
        assert await store.get_session("acme", "s") is None


class AsyncQueueValidationCases(AsyncQueueKitBase):
    """Limits every WorkQueue enforces before anything is written, and settling by Lease."""

    @pytest.mark.asyncio
    @pytest.mark.parametrize("bad", [True, 1.0, -1, 2**63], ids=repr)
    async def test_validation_bad_settle_tokens_are_refused(
        self, queue: AsyncWorkQueue, bad: Any
    ) -> None:
        await queue.enqueue("acme", {}, item_id="a")
        lease = await self._lease(queue)
        for settle in (queue.complete, queue.heartbeat):
            with pytest.raises(InvalidArgumentError) as caught:
                await settle("acme", "a", token=bad)
            assert caught.value.argument == "token"
        await queue.complete(lease)

    @pytest.mark.asyncio
    @pytest.mark.parametrize(
        "field, bad",
        [
            ("token", -1),
            ("token", 2**63),
            ("token", 2**64),
            ("tenant", ""),
            ("item_id", ""),
            ("tenant", "a\x00b"),
            ("item_id", "x" * 257),
            ("item_id", "\ud800"),
        ],
        ids=repr,
    )
    async def test_validation_a_lease_with_bad_fields_is_refused_before_sending(
        self, queue: AsyncWorkQueue, field: str, bad: Any
    ) -> None:
        # A Lease is a plain model anyone can build: memory refused bad identifiers in one,
        # SQLite raised a raw OverflowError for a token past a bigint, PostgreSQL a driver
        # error after sending, Redis and SQLite answered "no work item".
        await queue.enqueue("acme", {}, item_id="i")
        lease = await self._lease(queue)
        if field == "token":
            forged = lease.model_copy(update={"token": bad})
        else:
            forged = lease.model_copy(update={"item": lease.item.model_copy(update={field: bad})})
        for settle in (queue.complete, queue.heartbeat, queue.fail):
            with pytest.raises(InvalidArgumentError) as caught:
                await settle(forged)
            assert caught.value.argument == field
        held = await queue.get_item("acme", "i")
        assert held is not None and (held.state, held.attempts) == ("leased", 1)
        await queue.complete(lease)

    @pytest.mark.asyncio
    @pytest.mark.parametrize("call", ["dedupe_key", "get_item", "claim"])
    async def test_validation_empty_identifiers_are_refused(
        self, queue: AsyncWorkQueue, call: str
    ) -> None:
        with pytest.raises(InvalidArgumentError):
            if call == "dedupe_key":
                await queue.enqueue("acme", {}, dedupe_key="")
            elif call == "get_item":
                await queue.get_item("acme", "")
            else:
                await queue.claim("")
        assert (await queue.stats()).ready == 0

    @pytest.mark.asyncio
    async def test_validation_empty_item_id_is_refused(self, queue: AsyncWorkQueue) -> None:
        for _ in range(2):
            with pytest.raises(InvalidIdentifierError) as caught:
                await queue.enqueue("acme", {}, item_id="")
            assert caught.value.argument == "item_id"
        stats = await queue.stats()
        assert (stats.ready, stats.delayed) == (0, 0)

    @pytest.mark.asyncio
    async def test_validation_bad_delay_is_refused(self, queue: AsyncWorkQueue) -> None:
        await refuses_each(
            lambda bad: queue.enqueue("acme", {}, item_id="i", delay_seconds=bad),
            BAD_DELAYS,
            "delay_seconds",
        )
        assert await queue.get_item("acme", "i") is None

    @pytest.mark.asyncio
    async def test_validation_bad_priority_is_refused(self, queue: AsyncWorkQueue) -> None:
        await refuses_each(
            lambda bad: queue.enqueue("acme", {}, item_id="i", priority=bad),
            BAD_PRIORITIES,
            "priority",
            naming=str(MAX_PRIORITY),
        )
        assert await queue.get_item("acme", "i") is None

    @pytest.mark.asyncio
    async def test_validation_priority_limits_are_stored_and_ordered(
        self, queue: AsyncWorkQueue
    ) -> None:
        await queue.enqueue("acme", {}, item_id="low", priority=MIN_PRIORITY)
        await queue.enqueue("acme", {}, item_id="high", priority=MAX_PRIORITY)
        first = await self._lease(queue)
        assert (first.item_id, first.item.priority) == ("high", MAX_PRIORITY)
        low = await queue.get_item("acme", "low")
        assert low is not None and low.priority == MIN_PRIORITY

    @pytest.mark.asyncio
    async def test_validation_bad_error_text_is_refused(self, queue: AsyncWorkQueue) -> None:
        await queue.enqueue("acme", {}, item_id="i")
        lease = await self._lease(queue)
        for bad in BAD_ERRORS:
            with pytest.raises(InvalidArgumentError) as caught:
                await queue.fail(lease, error=bad)
            assert caught.value.argument == "error"
        held = await queue.get_item("acme", "i")
        assert held is not None and (held.state, held.last_error) == ("leased", None)
        longest = "é" * (MAX_ERROR_BYTES // 2)
        failed = await queue.fail(lease, error=longest)
        assert (failed.state, failed.last_error) == ("ready", longest)

    @pytest.mark.asyncio
    @pytest.mark.parametrize("bad", ["no", None, 0, 1, float("nan"), []], ids=repr)
    async def test_validation_fail_takes_retryable_as_a_bool_only(
        self, queue: AsyncWorkQueue, bad: Any
    ) -> None:
        # It was read by truthiness on every backend: "no" and NaN retried, None and []
        # dead-lettered.
        await queue.enqueue("acme", {}, item_id="i")
        lease = await self._lease(queue)
        with pytest.raises(InvalidArgumentError) as caught:
            await queue.fail(lease, error="boom", retryable=bad)
        assert caught.value.argument == "retryable"
        held = await queue.get_item("acme", "i")
        assert held is not None and (held.state, held.last_error) == ("leased", None)
        await queue.complete(lease)

    @pytest.mark.asyncio
    async def test_validation_settles_accept_the_lease(self, queue: AsyncWorkQueue) -> None:
        await queue.enqueue("acme", {}, item_id="i")
        lease = await self._lease(queue)
        renewed = await queue.heartbeat(lease)
        assert (renewed.item_id, renewed.token) == ("i", lease.token)
        with pytest.raises(InvalidArgumentError):
            await queue.complete(lease, token=lease.token + 1)
        await queue.complete(lease)
        assert await queue.get_item("acme", "i") is None
        await queue.enqueue("acme", {}, item_id="j")
        second = await self._lease(queue)
        failed = await queue.fail(second, error="boom", retryable=False)
        assert (failed.state, failed.last_error) == ("dead", "boom")
