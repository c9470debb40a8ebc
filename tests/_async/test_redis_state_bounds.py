"""The state store's Redis work is bounded per script: a filtered listing reads a bounded
slice per call, and a session is deleted in bounded batches."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from runyard import RunKey
from runyard.errors import StateInUseError
from runyard.redis import AsyncRedisStateStore

from tests._async.redis_support import state_store_on
from tests.support.redis_commands import counting_commands
from tests.support.redis_plugin import RedisTarget


@pytest_asyncio.fixture
async def store(dedicated_redis_target: RedisTarget) -> AsyncIterator[AsyncRedisStateStore]:
    async with state_store_on(dedicated_redis_target) as store:
        yield store


def _script_key_counts(sent: list[str]) -> list[int]:
    # MONITOR shows EVALSHA <sha> <numkeys> <keys...> <args...>
    return [int(c.split()[2]) for c in sent if c.upper().startswith("EVALSHA")]


@pytest.mark.asyncio
async def test_a_filtered_listing_reads_a_bounded_slice_per_call(
    store: AsyncRedisStateStore, dedicated_redis_target: RedisTarget
) -> None:
    for n in range(2500):
        await store.put_run(RunKey("acme", f"r{n:04d}"), {"n": n}, expected_version=0)
    await store.put_run(RunKey("acme", "last"), {}, expected_version=0, status="done")
    with counting_commands(dedicated_redis_target.port) as counted:
        first = await store.list_runs("acme", status="done", limit=10)
    assert first.items == [] and first.next_cursor is not None
    ranges = [c for c in counted.scripted if c.upper().startswith("HGETALL")]
    assert ranges == []  # no blob of a run that does not match is read
    assert sum(1 for c in counted.scripted if c.upper().startswith("HMGET")) == 1000
    pages = [first]
    cursor: str | None = first.next_cursor
    while cursor is not None:
        page = await store.list_runs("acme", status="done", limit=10, cursor=cursor)
        pages.append(page)
        cursor = page.next_cursor
    assert [r.run_id for p in pages for r in p.items] == ["last"]
    assert len(pages) == 3


@pytest.mark.asyncio
async def test_an_unfiltered_listing_still_fills_its_page(store: AsyncRedisStateStore) -> None:
    for n in range(30):
        await store.put_run(RunKey("acme", f"r{n:02d}"), {"n": n}, expected_version=0)
    page = await store.list_runs("acme", limit=25)
    assert len(page.items) == 25 and page.next_cursor is not None


@pytest.mark.asyncio
async def test_a_cascading_session_delete_runs_in_bounded_batches(
    store: AsyncRedisStateStore, dedicated_redis_target: RedisTarget
) -> None:
    await store.put_session("acme", "s", {}, expected_version=0)
    for n in range(450):
        await store.put_run(RunKey("acme", f"r{n:03d}"), {}, expected_version=0, session_id="s")
    with pytest.raises(StateInUseError, match="450 run"):
        await store.delete_session("acme", "s")
    with counting_commands(dedicated_redis_target.port) as counted:
        assert await store.delete_session("acme", "s", cascade=True) is True
    counts = _script_key_counts(counted.sent_with_arguments)
    # per run: its hash, event log, event ids and tombstone
    assert counts and max(counts) <= 2 + 4 * 200
    assert await store.get_session("acme", "s") is None
    assert (await store.list_runs("acme")).items == []
    assert await store.delete_session("acme", "s") is False


@pytest.mark.asyncio
async def test_a_session_whose_runs_moved_away_is_deleted_without_cascade(
    store: AsyncRedisStateStore,
) -> None:
    await store.put_session("acme", "s", {}, expected_version=0)
    record = await store.put_run(RunKey("acme", "r"), {}, expected_version=0, session_id="s")
    await store.put_run(RunKey("acme", "r"), {}, expected_version=record.version, session_id="t")
    assert await store.delete_session("acme", "s") is True
    assert await store.get_run(RunKey("acme", "r")) is not None
