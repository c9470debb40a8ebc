"""AsyncStateStoreConformance: the cases every StateStore must pass."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial

import pytest
import pytest_asyncio

from runyard._async.protocols import AsyncStateStore
from runyard._async.testing.inputs import AsyncStateInputCases
from runyard._async.testing.leases import AsyncRunLeaseCases
from runyard._async.testing.listing import AsyncRunListingCases
from runyard._async.testing.retention import AsyncStateRetentionCases
from runyard._async.testing.roundtrip import AsyncStateRoundTripCases
from runyard._async.testing.validation import AsyncStateValidationCases
from runyard._flavours import async_gather
from runyard.capabilities import certify
from runyard.errors import (
    StateConflictError,
    StateInUseError,
    StateNotFoundError,
    StatePersistenceError,
)
from runyard.keys import InvalidIdentifierError
from runyard.models import CounterDelta, RunKey, RunRecord

__all__ = ["AsyncStateStoreConformance"]

BAD_IDENTIFIERS = ["", "nul\x00byte", "x" * 300, "lone\ud800surrogate"]


class AsyncStateStoreConformance(
    AsyncRunListingCases,
    AsyncStateRetentionCases,
    AsyncRunLeaseCases,
    AsyncStateValidationCases,
    AsyncStateRoundTripCases,
    AsyncStateInputCases,
):
    """Subclass as ``TestMyStore`` and implement ``make_store`` and ``advance``.

    ``make_store`` returns a fresh, empty store (its own namespace) whose clock ``advance``
    moves forward. Every test validates the store's capabilities first and refuses a store
    that declares no deployment.
    """

    async def make_store(self) -> AsyncStateStore:
        """Return a fresh, empty store."""
        raise NotImplementedError("implement make_store() in your conformance subclass")

    def advance(self, seconds: float) -> None:
        """Move the store's clock forward by ``seconds``."""
        raise NotImplementedError("implement advance() in your conformance subclass")

    @pytest_asyncio.fixture
    async def store(self) -> AsyncIterator[AsyncStateStore]:
        store = await self.make_store()
        certify(store)
        try:
            yield store
        finally:
            await store.aclose()

    # -- runs --------------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_absent_run_is_none(self, store: AsyncStateStore) -> None:
        assert await store.get_run(RunKey("acme", "nope")) is None

    @pytest.mark.asyncio
    async def test_round_trip_keeps_blob_and_fields(self, store: AsyncStateStore) -> None:
        key = RunKey("acme", "run-1")
        blob = {"messages": ["hi", "ünïcødé ✓"], "n": 3, "nested": {"ok": True, "none": None}}
        await store.put_run(key, blob, expected_version=0, status="queued", session_id="s1")
        got = await store.get_run(key)
        assert got is not None
        assert (got.tenant, got.run_id, got.blob) == ("acme", "run-1", blob)
        assert (got.status, got.session_id) == ("queued", "s1")
        assert got.created_at <= got.updated_at

    @pytest.mark.asyncio
    async def test_first_write_is_version_1(self, store: AsyncStateStore) -> None:
        record = await store.put_run(RunKey("acme", "r"), {"a": 1}, expected_version=0)
        assert record.version == 1
        again = await store.put_run(RunKey("acme", "r"), {"a": 2}, expected_version=1)
        assert again.version == 2

    @pytest.mark.asyncio
    async def test_stale_write_is_refused_with_both_versions(self, store: AsyncStateStore) -> None:
        key = RunKey("acme", "r")
        await store.put_run(key, {"v": 1}, expected_version=0)
        await store.put_run(key, {"v": 2}, expected_version=1)
        with pytest.raises(StateConflictError) as caught:
            await store.put_run(key, {"v": "stale"}, expected_version=1)
        assert (caught.value.expected, caught.value.actual) == (1, 2)
        current = await store.get_run(key)
        assert current is not None and current.blob == {"v": 2}

    @pytest.mark.asyncio
    async def test_create_over_existing_run_is_refused(self, store: AsyncStateStore) -> None:
        key = RunKey("acme", "r")
        await store.put_run(key, {"first": True}, expected_version=0)
        with pytest.raises(StateConflictError) as caught:
            await store.put_run(key, {"second": True}, expected_version=0)
        assert (caught.value.expected, caught.value.actual) == (0, 1)

    @pytest.mark.asyncio
    async def test_concurrent_creates_have_exactly_one_winner(self, store: AsyncStateStore) -> None:
        key = RunKey("acme", "contended")

        async def create(i: int) -> RunRecord | None:
            try:
                return await store.put_run(key, {"writer": i}, expected_version=0)
            except StateConflictError:
                return None

        results = await async_gather([partial(create, i) for i in range(20)])
        winners = [r for r in results if r is not None]
        assert len(winners) == 1
        stored = await store.get_run(key)
        assert stored is not None and stored.blob == winners[0].blob and stored.version == 1

    @pytest.mark.asyncio
    async def test_patch_adds_to_counters_and_bumps_version(self, store: AsyncStateStore) -> None:
        key = RunKey("acme", "r")
        await store.put_run(key, {}, expected_version=0)
        delta = CounterDelta(input_tokens=10, output_tokens=5, cost_micros=700, iterations=1)
        await store.patch_run(key, delta)
        record = await store.patch_run(key, CounterDelta(input_tokens=1, cursor=4), status="done")
        assert (record.input_tokens, record.output_tokens, record.cost_micros) == (11, 5, 700)
        assert (record.iterations, record.cursor, record.version, record.status) == (
            1,
            4,
            3,
            "done",
        )

    @pytest.mark.asyncio
    async def test_concurrent_patches_all_land(self, store: AsyncStateStore) -> None:
        key = RunKey("acme", "r")
        await store.put_run(key, {}, expected_version=0)
        delta = CounterDelta(input_tokens=3, output_tokens=2, cost_micros=5, iterations=1)
        await async_gather([lambda: store.patch_run(key, delta) for _ in range(10)])
        record = await store.get_run(key)
        assert record is not None
        assert (record.input_tokens, record.output_tokens, record.cost_micros) == (30, 20, 50)
        assert (record.iterations, record.version) == (10, 11)

    @pytest.mark.asyncio
    async def test_patch_of_missing_run_raises_not_found(self, store: AsyncStateStore) -> None:
        with pytest.raises(StateNotFoundError):
            await store.patch_run(RunKey("acme", "ghost"), CounterDelta(iterations=1))
        assert await store.get_run(RunKey("acme", "ghost")) is None

    @pytest.mark.asyncio
    async def test_patch_keeps_blob_and_a_later_put_keeps_counters(
        self, store: AsyncStateStore
    ) -> None:
        key = RunKey("acme", "r")
        await store.put_run(key, {"step": 1}, expected_version=0)
        patched = await store.patch_run(key, CounterDelta(output_tokens=9))
        assert patched.blob == {"step": 1}
        put = await store.put_run(key, {"step": 2}, expected_version=patched.version)
        assert (put.output_tokens, put.blob) == (9, {"step": 2})

    @pytest.mark.asyncio
    async def test_returned_records_are_copies(self, store: AsyncStateStore) -> None:
        key = RunKey("acme", "r")
        written = await store.put_run(key, {"steps": [1]}, expected_version=0)
        written.blob["steps"].append(2)
        read = await store.get_run(key)
        assert read is not None
        read.blob["steps"].append(3)
        again = await store.get_run(key)
        assert again is not None and again.blob == {"steps": [1]}

    @pytest.mark.asyncio
    async def test_delete_removes_the_run(self, store: AsyncStateStore) -> None:
        key = RunKey("acme", "r")
        await store.put_run(key, {}, expected_version=0)
        assert await store.delete_run(key) is True
        assert await store.get_run(key) is None
        again = await store.put_run(key, {"reborn": True}, expected_version=0)
        assert again.version == 1

    @pytest.mark.asyncio
    async def test_delete_of_absent_run_returns_false(self, store: AsyncStateStore) -> None:
        assert await store.delete_run(RunKey("acme", "never")) is False

    @pytest.mark.asyncio
    async def test_delete_with_stale_version_is_refused(self, store: AsyncStateStore) -> None:
        key = RunKey("acme", "r")
        await store.put_run(key, {}, expected_version=0)
        await store.put_run(key, {}, expected_version=1)
        with pytest.raises(StateConflictError):
            await store.delete_run(key, expected_version=1)
        assert await store.get_run(key) is not None

    @pytest.mark.asyncio
    async def test_unstorable_values_are_refused_permanently(self, store: AsyncStateStore) -> None:
        for bad in ({"x": float("nan")}, {"x": float("inf")}, {"x": "nul\x00"}):
            with pytest.raises(StatePersistenceError) as caught:
                await store.put_run(RunKey("acme", "r"), bad, expected_version=0)
            assert caught.value.reason == "invalid" and caught.value.retryable is False
        assert await store.get_run(RunKey("acme", "r")) is None

    # -- sessions ----------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_session_round_trip(self, store: AsyncStateStore) -> None:
        first = await store.put_session("acme", "s1", {"user": "ada"}, expected_version=0)
        assert first.version == 1
        second = await store.put_session("acme", "s1", {"user": "bob"}, expected_version=1)
        got = await store.get_session("acme", "s1")
        assert (
            got is not None and got.blob == {"user": "bob"} and got.version == second.version == 2
        )
        assert await store.get_session("acme", "s2") is None

    @pytest.mark.asyncio
    async def test_stale_session_write_is_refused(self, store: AsyncStateStore) -> None:
        await store.put_session("acme", "s1", {}, expected_version=0)
        with pytest.raises(StateConflictError) as caught:
            await store.put_session("acme", "s1", {"late": True}, expected_version=0)
        assert (caught.value.expected, caught.value.actual) == (0, 1)

    @pytest.mark.asyncio
    async def test_session_with_runs_refuses_delete(self, store: AsyncStateStore) -> None:
        await store.put_session("acme", "s1", {}, expected_version=0)
        await store.put_run(RunKey("acme", "r1"), {}, expected_version=0, session_id="s1")
        with pytest.raises(StateInUseError):
            await store.delete_session("acme", "s1")
        assert await store.get_session("acme", "s1") is not None
        assert await store.get_run(RunKey("acme", "r1")) is not None

    @pytest.mark.asyncio
    async def test_session_cascade_deletes_its_runs(self, store: AsyncStateStore) -> None:
        await store.put_session("acme", "s1", {}, expected_version=0)
        await store.put_run(RunKey("acme", "r1"), {}, expected_version=0, session_id="s1")
        await store.put_run(RunKey("acme", "r2"), {}, expected_version=0, session_id="s1")
        await store.put_run(RunKey("acme", "other"), {}, expected_version=0, session_id="s2")
        assert await store.delete_session("acme", "s1", cascade=True) is True
        assert await store.get_session("acme", "s1") is None
        assert await store.get_run(RunKey("acme", "r1")) is None
        assert await store.get_run(RunKey("acme", "r2")) is None
        assert await store.get_run(RunKey("acme", "other")) is not None

    # -- isolation and identifiers ----------------------------------------------------------
    @pytest.mark.asyncio
    async def test_tenants_are_isolated(self, store: AsyncStateStore) -> None:
        await store.put_run(RunKey("acme", "r"), {"owner": "acme"}, expected_version=0)
        await store.put_run(RunKey("globex", "r"), {"owner": "globex"}, expected_version=0)
        a, g = await store.get_run(RunKey("acme", "r")), await store.get_run(RunKey("globex", "r"))
        assert a is not None and g is not None
        assert (a.blob, g.blob) == ({"owner": "acme"}, {"owner": "globex"})
        assert [r.blob for r in (await store.list_runs("globex")).items] == [{"owner": "globex"}]

    @pytest.mark.asyncio
    async def test_separator_characters_cannot_make_two_keys_collide(
        self, store: AsyncStateStore
    ) -> None:
        await store.put_run(RunKey("a:b", "c"), {"who": 1}, expected_version=0)
        await store.put_run(RunKey("a", "b:c"), {"who": 2}, expected_version=0)
        await store.put_run(RunKey("{a}*", "run:1?[x]"), {"who": 3}, expected_version=0)
        one, two = await store.get_run(RunKey("a:b", "c")), await store.get_run(RunKey("a", "b:c"))
        three = await store.get_run(RunKey("{a}*", "run:1?[x]"))
        assert one is not None and two is not None and three is not None
        assert (one.blob, two.blob, three.blob) == ({"who": 1}, {"who": 2}, {"who": 3})
        assert [r.run_id for r in (await store.list_runs("a")).items] == ["b:c"]
        assert await store.get_run(RunKey("*", "c")) is None

    @pytest.mark.asyncio
    @pytest.mark.parametrize("bad", BAD_IDENTIFIERS, ids=["empty", "nul", "too-long", "surrogate"])
    async def test_refused_identifiers(self, store: AsyncStateStore, bad: str) -> None:
        with pytest.raises(InvalidIdentifierError):
            await store.put_run(RunKey(bad, "r"), {}, expected_version=0)
        with pytest.raises(InvalidIdentifierError):
            await store.put_run(RunKey("acme", bad), {}, expected_version=0)
        with pytest.raises(InvalidIdentifierError):
            await store.put_session("acme", bad, {}, expected_version=0)
        with pytest.raises(InvalidIdentifierError):
            await store.get_session(bad, "s1")
        with pytest.raises(InvalidIdentifierError):
            await store.list_runs(bad)
        with pytest.raises(InvalidIdentifierError):
            await store.delete_session("acme", bad)
        with pytest.raises(InvalidIdentifierError):
            await store.acquire_lease(RunKey("acme", "r"), bad, ttl_seconds=10)
