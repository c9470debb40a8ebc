"""The execution store conformance kit against the memory backend."""

from __future__ import annotations

from datetime import date

import pytest
from runyard import AsyncMemoryExecutionStore, ManualClock
from runyard._async.execution_protocol import AsyncExecutionStore
from runyard._async.testing import AsyncExecutionStoreConformance
from runyard.capabilities import StoreCapabilities, certify
from runyard.errors import InvalidArgumentError
from runyard.executions import Execution


class TestMemoryExecutionStore(AsyncExecutionStoreConformance):
    async def make_store(self) -> AsyncExecutionStore:
        return AsyncMemoryExecutionStore(clock=ManualClock())


class TestMemoryExecutionStoreWithASmallRing(AsyncExecutionStoreConformance):
    async def make_store(self) -> AsyncExecutionStore:
        return AsyncMemoryExecutionStore(trace_max=3)


def test_memory_store_satisfies_the_protocol_and_certifies() -> None:
    store = AsyncMemoryExecutionStore()
    assert isinstance(store, AsyncExecutionStore)
    assert certify(store) == StoreCapabilities(retry_ids=True, deployment="single_process")


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, 10**6 + 1, 10**17])
def test_trace_max_must_be_a_positive_int(bad: object) -> None:
    # Unbounded, 10**17 failed every Redis commit half way (its LTRIM refused the number).
    with pytest.raises(InvalidArgumentError):
        AsyncMemoryExecutionStore(trace_max=bad)  # type: ignore[arg-type]


class _Dated(Execution):
    days: list[date] = []
    counts: dict[int, int] = {}


@pytest.mark.asyncio
async def test_a_subclass_keeps_its_own_fields_through_a_load() -> None:
    # The memory store copies JSON fields through their text; a subclass's own fields are
    # no JSON (a date, an int key) and are deep-copied as they were.
    store = AsyncMemoryExecutionStore()
    exe = _Dated(id="e", definition_id="d", days=[date(2026, 12, 3)], counts={1: 2})
    await store.save(exe)
    loaded = await store.load("e")
    assert isinstance(loaded, _Dated)
    assert loaded.days == [date(2026, 12, 3)] and loaded.counts == {1: 2}
    loaded.counts[1] = 5
    again = await store.load("e")
    assert isinstance(again, _Dated) and again.counts == {1: 2}
