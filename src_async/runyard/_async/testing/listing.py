"""AsyncRunListingCases: the state store kit's cases of list_runs (order, filters, pages,
cursors), a part of AsyncStateStoreConformance."""

from __future__ import annotations

import pytest

from runyard._async.pager import AsyncRunPager
from runyard._async.protocols import AsyncStateStore
from runyard.keys import InvalidIdentifierError
from runyard.models import CounterDelta, RunKey

__all__ = ["AsyncRunListingCases"]


class AsyncRunListingCases:
    """list_runs on every store (the ``store`` fixture is AsyncStateStoreConformance's)."""

    @pytest.mark.asyncio
    async def test_list_returns_all_runs_in_creation_order(self, store: AsyncStateStore) -> None:
        ids = [f"run-{i:02d}" for i in range(7)]
        for run_id in reversed(ids):
            await store.put_run(RunKey("acme", run_id), {}, expected_version=0)
        page = await store.list_runs("acme", limit=100)
        assert [r.run_id for r in page.items] == list(reversed(ids))
        assert page.next_cursor is None

    @pytest.mark.asyncio
    async def test_list_refuses_a_cursor_of_another_tenant(self, store: AsyncStateStore) -> None:
        # A seq is a position in one tenant's runs, numbered per tenant on Redis and per store
        # elsewhere: another tenant's cursor was taken and gave other pages by backend.
        for i in range(3):
            await store.put_run(RunKey("acme", f"a{i}"), {}, expected_version=0)
            await store.put_run(RunKey("globex", f"b{i}"), {}, expected_version=0)
        first = await store.list_runs("acme", limit=1)
        assert first.next_cursor is not None
        with pytest.raises(InvalidIdentifierError) as caught:
            await store.list_runs("globex", limit=1, cursor=first.next_cursor)
        assert caught.value.argument == "cursor"
        rest = await store.list_runs("acme", limit=5, cursor=first.next_cursor)
        assert [r.run_id for r in rest.items] == ["a1", "a2"]
        # A cursor in the form issued before cursors named their tenant is still taken.
        assert len((await store.list_runs("globex", cursor="s0")).items) == 3

    @pytest.mark.asyncio
    async def test_list_filters_by_status(self, store: AsyncStateStore) -> None:
        for i in range(6):
            status = "done" if i % 2 else "running"
            await store.put_run(RunKey("acme", f"r{i}"), {}, expected_version=0, status=status)
        page = await store.list_runs("acme", status="done", limit=100)
        assert [r.run_id for r in page.items] == ["r1", "r3", "r5"]

    @pytest.mark.asyncio
    async def test_list_filters_by_session(self, store: AsyncStateStore) -> None:
        for i in range(5):
            session = "s1" if i < 2 else "s2"
            await store.put_run(RunKey("acme", f"r{i}"), {}, expected_version=0, session_id=session)
        page = await store.list_runs("acme", session_id="s1", limit=100)
        assert [r.run_id for r in page.items] == ["r0", "r1"]

    @pytest.mark.asyncio
    async def test_list_filters_by_status_and_session_together_page_by_page(
        self, store: AsyncStateStore
    ) -> None:
        # Created r9 first, r0 last: creation order is not the ids' order.
        for i in reversed(range(10)):
            session = "s1" if i % 2 == 0 else "s2"
            status = "done" if i % 3 else "running"
            await store.put_run(
                RunKey("acme", f"r{i}"), {}, expected_version=0, status=status, session_id=session
            )
        first = await store.list_runs("acme", status="done", session_id="s1", limit=2)
        assert [r.run_id for r in first.items] == ["r8", "r4"] and first.next_cursor
        rest = await store.list_runs(
            "acme", status="done", session_id="s1", limit=2, cursor=first.next_cursor
        )
        assert [r.run_id for r in rest.items] == ["r2"] and rest.next_cursor is None
        running = await store.list_runs("acme", status="running", session_id="s2", limit=100)
        assert [r.run_id for r in running.items] == ["r9", "r3"]
        seen: list[str] = []
        cursor: str | None = None
        while True:
            page = await store.list_runs("acme", session_id="s1", limit=2, cursor=cursor)
            seen += [r.run_id for r in page.items]
            cursor = page.next_cursor
            if cursor is None:
                break
        assert seen == ["r8", "r6", "r4", "r2", "r0"]

    @pytest.mark.asyncio
    async def test_put_run_with_a_new_session_moves_the_run_and_none_keeps_it(
        self, store: AsyncStateStore
    ) -> None:
        key = RunKey("acme", "r1")
        await store.put_run(key, {}, expected_version=0, session_id="s1")
        moved = await store.put_run(key, {"n": 1}, expected_version=1, session_id="s2")
        assert moved.session_id == "s2"
        in_s1 = await store.list_runs("acme", session_id="s1", limit=100)
        in_s2 = await store.list_runs("acme", session_id="s2", limit=100)
        assert ([r.run_id for r in in_s1.items], [r.run_id for r in in_s2.items]) == ([], ["r1"])
        kept = await store.put_run(key, {"n": 2}, expected_version=2)
        got = await store.get_run(key)
        assert got is not None and (kept.session_id, got.session_id) == ("s2", "s2")
        in_s2 = await store.list_runs("acme", session_id="s2", limit=100)
        assert [r.run_id for r in in_s2.items] == ["r1"]

    @pytest.mark.asyncio
    async def test_cursor_walk_returns_every_run_once_under_updates(
        self, store: AsyncStateStore
    ) -> None:
        for i in range(23):
            await store.put_run(RunKey("acme", f"r{i:02d}"), {"i": i}, expected_version=0)
        seen: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            page = await store.list_runs("acme", limit=5, cursor=cursor)
            pages += 1
            seen.extend(r.run_id for r in page.items)
            for record in page.items[:2]:  # updates between pages never move a run
                await store.put_run(record.key, {"touched": True}, expected_version=record.version)
            await store.patch_run(RunKey("acme", "r22"), CounterDelta(iterations=1))
            cursor = page.next_cursor
            if cursor is None:
                break
        assert sorted(seen) == [f"r{i:02d}" for i in range(23)]
        assert len(seen) == len(set(seen)) == 23
        assert pages == 5

    @pytest.mark.asyncio
    async def test_the_run_pager_walks_every_run_in_creation_order(
        self, store: AsyncStateStore
    ) -> None:
        for i in range(7):
            await store.put_run(RunKey("acme", f"r{i}"), {}, expected_version=0, status="done")
        await store.put_run(RunKey("acme", "other"), {}, expected_version=0, status="running")
        walked = [r.run_id async for r in AsyncRunPager(store, "acme", status="done", page_size=3)]
        assert walked == [f"r{i}" for i in range(7)]

    @pytest.mark.asyncio
    async def test_last_page_has_no_cursor(self, store: AsyncStateStore) -> None:
        for i in range(4):
            await store.put_run(RunKey("acme", f"r{i}"), {}, expected_version=0)
        first = await store.list_runs("acme", limit=2)
        assert first.next_cursor is not None and len(first.items) == 2
        last = await store.list_runs("acme", limit=2, cursor=first.next_cursor)
        assert [r.run_id for r in last.items] == ["r2", "r3"] and last.next_cursor is None
        empty = await store.list_runs("nobody", limit=2)
        assert empty.items == [] and empty.next_cursor is None
