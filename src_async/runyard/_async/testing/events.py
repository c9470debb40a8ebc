"""AsyncEventLogConformance: the event log, finalize and follow cases of the state-store kit.

They run for a store that declares ``event_log`` (and ``atomic_finalize`` for finalize) and
are skipped, saying so, for one that does not.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import pytest

from runyard._async.event_protocol import AsyncEventLogStore
from runyard._async.protocols import AsyncStateStore
from runyard._async.testing.event_lifecycle import AsyncEventLifecycleCases
from runyard._async.testing.event_live import AsyncEventLiveCases
from runyard._flavours import async_gather
from runyard.errors import (
    InvalidArgumentError,
    LeaseLostError,
    RunFinalizedError,
    StateConflictError,
    StateNotFoundError,
)
from runyard.events import EventConflictError, RunEvent
from runyard.keys import InvalidIdentifierError
from runyard.models import RunKey

__all__ = ["AsyncEventLogConformance"]

KEY = RunKey("acme", "evented")
# Followers in the kit poll often: the cases check what is yielded, never how fast.
POLL = 0.01


def _log(store: AsyncStateStore, capability: str = "event_log") -> AsyncEventLogStore:
    if not getattr(store.capabilities, capability):
        pytest.skip(f"{type(store).__name__} does not declare {capability}")
    assert isinstance(store, AsyncEventLogStore)
    return store


async def _collect(store: AsyncEventLogStore, key: RunKey, after: int = 0) -> list[RunEvent]:
    return [event async for event in store.follow(key, after=after, poll_seconds=POLL)]


class AsyncEventLogConformance(AsyncEventLifecycleCases, AsyncEventLiveCases):
    """Mixed into AsyncStateStoreConformance; uses its ``store`` fixture and ``advance``."""

    def advance(self, seconds: float) -> None:
        raise NotImplementedError

    async def _run(self, store: AsyncEventLogStore, key: RunKey = KEY) -> None:
        await store.put_run(key, {"step": 0}, expected_version=0)

    # -- the log -----------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_concurrent_appends_get_gap_free_seqs_in_order(
        self, store: AsyncStateStore
    ) -> None:
        log = _log(store)
        await self._run(log)
        appended = await async_gather(
            [partial(log.append_event, KEY, "step", {"writer": i}) for i in range(16)]
        )
        events = await log.read_events(KEY)
        assert [e.seq for e in events] == list(range(1, 17))
        assert sorted(e.seq for e in appended) == list(range(1, 17))
        assert sorted(e.data["writer"] for e in events) == list(range(16))
        assert {e.seq: e.data for e in appended} == {e.seq: e.data for e in events}

    @pytest.mark.asyncio
    async def test_read_events_pages_after_a_seq(self, store: AsyncStateStore) -> None:
        log = _log(store)
        await self._run(log)
        for i in range(5):
            await log.append_event(KEY, "step", {"i": i})
        page = await log.read_events(KEY, after=2, limit=2)
        assert [(e.seq, e.data) for e in page] == [(3, {"i": 2}), (4, {"i": 3})]
        assert await log.read_events(KEY, after=5) == []
        assert await log.read_events(RunKey("acme", "never")) == []

    @pytest.mark.asyncio
    async def test_an_event_keeps_its_type_data_time_and_id(self, store: AsyncStateStore) -> None:
        log = _log(store)
        await self._run(log)
        data = {"text": "ünïcødé ✓", "n": [1, 2.5, None], "nested": {"b": 1, "a": 2}}
        event = await log.append_event(KEY, "message", data, event_id="m-1")
        (stored,) = await log.read_events(KEY)
        assert stored == event
        assert (stored.type, stored.data, stored.event_id, stored.terminal) == (
            "message",
            data,
            "m-1",
            False,
        )
        assert (stored.tenant, stored.run_id, stored.seq) == ("acme", "evented", 1)

    @pytest.mark.asyncio
    async def test_a_retried_event_id_returns_the_stored_event(
        self, store: AsyncStateStore
    ) -> None:
        log = _log(store)
        await self._run(log)
        first = await log.append_event(KEY, "tool", {"a": 1, "b": 2}, event_id="e-1")
        self.advance(5)
        again = await log.append_event(KEY, "tool", {"b": 2, "a": 1}, event_id="e-1")
        assert again == first
        assert [e.seq for e in await log.read_events(KEY)] == [1]

    @pytest.mark.asyncio
    async def test_an_event_id_with_other_content_is_refused(self, store: AsyncStateStore) -> None:
        log = _log(store)
        await self._run(log)
        await log.append_event(KEY, "tool", {"a": 1}, event_id="e-1")
        with pytest.raises(EventConflictError) as caught:
            await log.append_event(KEY, "tool", {"a": 2}, event_id="e-1")
        assert (caught.value.event_id, caught.value.seq) == ("e-1", 1)
        with pytest.raises(EventConflictError):
            await log.append_event(KEY, "other", {"a": 1}, event_id="e-1")
        assert [e.data for e in await log.read_events(KEY)] == [{"a": 1}]

    @pytest.mark.asyncio
    async def test_an_append_with_a_stale_fence_is_refused(self, store: AsyncStateStore) -> None:
        log = _log(store)
        await self._run(log)
        old = await log.acquire_lease(KEY, "worker-a", ttl_seconds=10)
        await log.append_event(KEY, "step", {"by": "a"}, fence=old.epoch)
        self.advance(11)
        new = await log.acquire_lease(KEY, "worker-b", ttl_seconds=10)
        with pytest.raises(LeaseLostError):
            await log.append_event(KEY, "step", {"by": "a-late"}, fence=old.epoch)
        await log.append_event(KEY, "step", {"by": "b"}, fence=new.epoch)
        assert [e.data["by"] for e in await log.read_events(KEY)] == ["a", "b"]

    @pytest.mark.asyncio
    async def test_an_append_to_a_missing_run_is_refused(self, store: AsyncStateStore) -> None:
        log = _log(store)
        with pytest.raises(StateNotFoundError):
            await log.append_event(RunKey("acme", "ghost"), "step", {})
        assert await log.read_events(RunKey("acme", "ghost")) == []

    @pytest.mark.asyncio
    @pytest.mark.parametrize(
        ("call", "error"),
        [
            ({"type": ""}, InvalidIdentifierError),
            ({"type": "x" * 300}, InvalidIdentifierError),
            ({"event_id": ""}, InvalidIdentifierError),
            ({"data": {"nan": float("nan")}}, Exception),
        ],
    )
    async def test_bad_event_arguments_are_refused_before_writing(
        self, store: AsyncStateStore, call: dict[str, Any], error: type[Exception]
    ) -> None:
        log = _log(store)
        await self._run(log)
        arguments: dict[str, Any] = {"type": "step", "data": {}, **call}
        with pytest.raises(error):
            await log.append_event(KEY, arguments.pop("type"), arguments.pop("data"), **arguments)
        assert await log.read_events(KEY) == []

    @pytest.mark.asyncio
    @pytest.mark.parametrize(("after", "limit"), [(-1, 10), (0, 0), (0, 10_001)])
    async def test_a_bad_read_window_is_refused_naming_it(
        self, store: AsyncStateStore, after: int, limit: int
    ) -> None:
        log = _log(store)
        with pytest.raises(ValueError, match="after" if after < 0 else "limit"):
            await log.read_events(KEY, after=after, limit=limit)

    # -- finalize ----------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_finalize_sets_the_status_and_appends_the_terminal_event(
        self, store: AsyncStateStore
    ) -> None:
        log = _log(store, "atomic_finalize")
        await self._run(log)
        await log.append_event(KEY, "step", {"i": 1})
        record = await log.finalize(
            KEY, status="completed", event_type="done", event_data={"ok": True}, expected_version=1
        )
        assert (record.status, record.version) == ("completed", 2)
        events = await log.read_events(KEY)
        assert [(e.seq, e.type, e.terminal) for e in events] == [
            (1, "step", False),
            (2, "done", True),
        ]
        assert events[1].data == {"ok": True}

    @pytest.mark.asyncio
    async def test_finalize_with_a_stale_version_changes_nothing(
        self, store: AsyncStateStore
    ) -> None:
        log = _log(store, "atomic_finalize")
        await self._run(log)
        await log.put_run(KEY, {"step": 1}, expected_version=1)
        with pytest.raises(StateConflictError) as caught:
            await log.finalize(
                KEY, status="error", event_type="failed", event_data={}, expected_version=1
            )
        assert (caught.value.expected, caught.value.actual) == (1, 2)
        run = await log.get_run(KEY)
        assert run is not None and (run.status, run.version) == ("running", 2)
        assert await log.read_events(KEY) == []

    @pytest.mark.asyncio
    async def test_finalize_with_a_stale_fence_changes_nothing(
        self, store: AsyncStateStore
    ) -> None:
        log = _log(store, "atomic_finalize")
        await self._run(log)
        old = await log.acquire_lease(KEY, "worker-a", ttl_seconds=10)
        self.advance(11)
        await log.acquire_lease(KEY, "worker-b", ttl_seconds=10)
        with pytest.raises(LeaseLostError):
            await log.finalize(
                KEY, status="cancelled", event_type="stop", event_data={}, fence=old.epoch
            )
        run = await log.get_run(KEY)
        assert run is not None and run.status == "running"
        assert await log.read_events(KEY) == []

    @pytest.mark.asyncio
    async def test_a_retried_finalize_is_settled_by_its_event_id(
        self, store: AsyncStateStore
    ) -> None:
        log = _log(store, "atomic_finalize")
        await self._run(log)
        first = await log.finalize(
            KEY,
            status="completed",
            event_type="done",
            event_data={"n": 1},
            expected_version=1,
            event_id="fin-1",
        )
        again = await log.finalize(
            KEY,
            status="completed",
            event_type="done",
            event_data={"n": 1},
            expected_version=1,
            event_id="fin-1",
        )
        assert (again.version, again.status) == (first.version, "completed")
        assert [e.event_id for e in await log.read_events(KEY)] == ["fin-1"]

    @pytest.mark.asyncio
    async def test_finalize_refuses_a_status_that_is_not_terminal(
        self, store: AsyncStateStore
    ) -> None:
        log = _log(store, "atomic_finalize")
        await self._run(log)
        with pytest.raises(ValueError, match="status 'paused' is not terminal"):
            await log.finalize(KEY, status="paused", event_type="done", event_data={})
        run = await log.get_run(KEY)
        assert run is not None and run.version == 1
        assert await log.read_events(KEY) == []

    @pytest.mark.asyncio
    @pytest.mark.parametrize("status", ["", "bad\x00status", 7])
    async def test_finalize_refuses_a_status_no_store_accepts_before_sending(
        self, store: AsyncStateStore, status: Any
    ) -> None:
        log = _log(store, "atomic_finalize")
        await self._run(log)
        with pytest.raises(InvalidArgumentError) as caught:
            await log.finalize(KEY, status=status, event_type="done", event_data={})
        assert caught.value.argument == "status"
        run = await log.get_run(KEY)
        assert run is not None and (run.version, run.status) == (1, "running")
        assert await log.read_events(KEY) == []

    @pytest.mark.asyncio
    async def test_append_event_refuses_a_bad_type_naming_it(self, store: AsyncStateStore) -> None:
        log = _log(store)
        await self._run(log)
        with pytest.raises(InvalidArgumentError) as caught:
            await log.append_event(KEY, "", {})
        assert caught.value.argument == "type"
        assert await log.read_events(KEY) == []

    @pytest.mark.asyncio
    async def test_finalize_of_a_missing_run_is_refused(self, store: AsyncStateStore) -> None:
        log = _log(store, "atomic_finalize")
        with pytest.raises(StateNotFoundError):
            await log.finalize(
                RunKey("acme", "ghost"), status="completed", event_type="done", event_data={}
            )

    # -- follow ------------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_follow_yields_the_whole_log_and_ends_at_finalize(
        self, store: AsyncStateStore
    ) -> None:
        log = _log(store, "atomic_finalize")
        await self._run(log)
        for i in range(3):
            await log.append_event(KEY, "step", {"i": i})
        await log.finalize(KEY, status="completed", event_type="done", event_data={})
        followed = await _collect(log, KEY)
        assert followed == await log.read_events(KEY)
        assert [e.seq for e in followed] == [1, 2, 3, 4] and followed[-1].terminal

    @pytest.mark.asyncio
    async def test_follow_starts_after_the_given_seq(self, store: AsyncStateStore) -> None:
        log = _log(store, "atomic_finalize")
        await self._run(log)
        for i in range(4):
            await log.append_event(KEY, "step", {"i": i})
        await log.finalize(KEY, status="error", event_type="failed", event_data={})
        assert [e.seq for e in await _collect(log, KEY, after=3)] == [4, 5]

    @pytest.mark.asyncio
    async def test_follow_ends_on_a_terminal_status_written_without_finalize(
        self, store: AsyncStateStore
    ) -> None:
        log = _log(store)
        await self._run(log)
        await log.append_event(KEY, "step", {})
        await log.put_run(KEY, {"step": 1}, expected_version=1, status="cancelled")
        assert [e.seq for e in await _collect(log, KEY)] == [1]

    @pytest.mark.asyncio
    async def test_follow_misses_nothing_when_the_terminal_write_races_the_last_events(
        self, store: AsyncStateStore
    ) -> None:
        log = _log(store, "atomic_finalize")
        await self._run(log)
        followed: list[RunEvent] = []

        async def follower() -> None:
            followed.extend(await _collect(log, KEY))

        refused: list[int] = []

        async def appender(i: int) -> None:
            try:
                await log.append_event(KEY, "step", {"i": i})
            except RunFinalizedError:
                refused.append(i)  # it lost the race to the terminal write

        async def finisher() -> None:
            await log.finalize(KEY, status="completed", event_type="done", event_data={})

        calls: list[Callable[[], Awaitable[None]]] = [follower, finisher]
        calls[1:1] = [partial(appender, i) for i in range(16)]
        await async_gather(calls)
        log_now = await log.read_events(KEY)
        # The terminal event ends the log, and the follower got all of it, once, in order.
        assert log_now[-1].terminal
        assert followed == log_now
        assert [e.seq for e in followed] == list(range(1, len(log_now) + 1))
        assert len(log_now) + len(refused) == 17

    @pytest.mark.asyncio
    async def test_live_updates_on_and_off_yield_the_same_sequence(
        self, store: AsyncStateStore
    ) -> None:
        polled = _log(store, "atomic_finalize")
        made = await self.make_live_store()
        if made is None:
            pytest.skip("make_live_store() returns None: no live-updates variant to compare")
        live = _log(made, "atomic_finalize")
        try:
            on = await self._follow_while_writing(live)
            off = await self._follow_while_writing(polled)
        finally:
            await live.aclose()
        assert on == off
        assert [seq for seq, *_ in on] == [1, 2, 3, 4, 5, 6]

    async def _follow_while_writing(self, store: AsyncEventLogStore) -> list[tuple[Any, ...]]:
        await self._run(store)
        followed: list[RunEvent] = []

        async def follower() -> None:
            followed.extend(await _collect(store, KEY))

        async def writer() -> None:
            for i in range(5):
                await store.append_event(KEY, "step", {"i": i})
            await store.finalize(KEY, status="completed", event_type="done", event_data={"n": 5})

        await async_gather([follower, writer])
        return [(e.seq, e.type, e.data, e.terminal) for e in followed]
