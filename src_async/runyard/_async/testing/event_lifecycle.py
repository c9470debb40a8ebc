"""AsyncEventLifecycleCases: the event-log cases about a run's end, mixed into the kit.

A run in a terminal status takes no further ``finalize`` (bar the retry of the one that ended
it) and no further event: followers end there, woken by the live-update hint when the status
came from ``put_run`` or ``patch_run`` too. ``delete_run`` and a cascading ``delete_session``
take the runs' logs with them.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from runyard._async.event_protocol import AsyncEventLogStore
from runyard._async.protocols import AsyncStateStore
from runyard._flavours import AsyncEvent, async_gather
from runyard.errors import RunFinalizedError, StateConflictError, StateNotFoundError
from runyard.events import EventConflictError, RunEvent
from runyard.models import CounterDelta, RunKey, RunRecord

__all__ = ["AsyncEventLifecycleCases"]

KEY = RunKey("acme", "ending")
# A follower woken only by its polling backstop would wait this long; the hint cases allow it
# HINT_WAIT seconds to end, so one that ends in time was woken by the hint.
LONG_POLL = 30.0
HINT_WAIT = 10.0


def _log(store: AsyncStateStore, capability: str = "event_log") -> AsyncEventLogStore:
    if not getattr(store.capabilities, capability):
        pytest.skip(f"{type(store).__name__} does not declare {capability}")
    assert isinstance(store, AsyncEventLogStore)
    return store


async def _finalized(log: AsyncEventLogStore) -> None:
    await log.put_run(KEY, {"step": 0}, expected_version=0)
    await log.append_event(KEY, "step", {"i": 1}, event_id="step-1")
    await log.finalize(
        KEY, status="completed", event_type="done", event_data={"ok": True}, event_id="fin-1"
    )


class AsyncEventLifecycleCases:
    """The end of a run's log: refusals after the terminal status, the hint that wakes a
    follower, and ``delete_run`` / ``delete_session(cascade=True)``."""

    async def make_live_store(self) -> AsyncStateStore | None:
        """Return a fresh store with live updates on, sharing nothing; None skips those cases."""
        return None

    @pytest.mark.asyncio
    async def test_a_second_finalize_of_a_terminal_run_is_refused(
        self, store: AsyncStateStore
    ) -> None:
        log = _log(store, "atomic_finalize")
        await _finalized(log)
        for event_id in ("fin-2", None):
            with pytest.raises(RunFinalizedError) as caught:
                await log.finalize(
                    KEY,
                    status="error",
                    event_type="failed",
                    event_data={},
                    expected_version=2,
                    event_id=event_id,
                )
            assert (caught.value.run_id, caught.value.status) == (KEY.run_id, "completed")
            assert not caught.value.retryable
        run = await log.get_run(KEY)
        assert run is not None and (run.status, run.version) == ("completed", 2)
        assert [e.event_id for e in await log.read_events(KEY)] == ["step-1", "fin-1"]

    @pytest.mark.asyncio
    async def test_the_retry_of_the_ending_finalize_returns_the_stored_run(
        self, store: AsyncStateStore
    ) -> None:
        log = _log(store, "atomic_finalize")
        await _finalized(log)
        again = await log.finalize(
            KEY, status="completed", event_type="done", event_data={"ok": True}, event_id="fin-1"
        )
        assert (again.status, again.version) == ("completed", 2)
        assert [e.seq for e in await log.read_events(KEY)] == [1, 2]

    @pytest.mark.asyncio
    async def test_finalize_of_a_run_put_in_a_terminal_status_is_refused(
        self, store: AsyncStateStore
    ) -> None:
        log = _log(store, "atomic_finalize")
        await log.put_run(KEY, {"step": 0}, expected_version=0)
        await log.put_run(KEY, {"step": 1}, expected_version=1, status="cancelled")
        with pytest.raises(RunFinalizedError) as caught:
            await log.finalize(KEY, status="completed", event_type="done", event_data={})
        assert caught.value.status == "cancelled"
        run = await log.get_run(KEY)
        assert run is not None and (run.status, run.version) == ("cancelled", 2)
        assert await log.read_events(KEY) == []

    @pytest.mark.asyncio
    async def test_an_append_after_the_terminal_status_is_refused(
        self, store: AsyncStateStore
    ) -> None:
        log = _log(store, "atomic_finalize")
        await _finalized(log)
        for event_id in ("late", None):
            with pytest.raises(RunFinalizedError) as caught:
                await log.append_event(KEY, "step", {"i": 2}, event_id=event_id)
            assert (caught.value.run_id, caught.value.status) == (KEY.run_id, "completed")
        # The retry of an append stored before the end still returns its event.
        retried = await log.append_event(KEY, "step", {"i": 1}, event_id="step-1")
        assert retried.seq == 1
        assert [(e.seq, e.terminal) for e in await log.read_events(KEY)] == [
            (1, False),
            (2, True),
        ]

    @pytest.mark.asyncio
    async def test_a_finalize_naming_an_appended_event_is_refused(
        self, store: AsyncStateStore
    ) -> None:
        log = _log(store, "atomic_finalize")
        await log.put_run(KEY, {"step": 0}, expected_version=0)
        await log.append_event(KEY, "done", {"ok": True}, event_id="same-id")
        # Same id, type and data, but the stored event is not terminal: not this finalize's.
        with pytest.raises(EventConflictError) as caught:
            await log.finalize(
                KEY,
                status="completed",
                event_type="done",
                event_data={"ok": True},
                event_id="same-id",
            )
        assert (caught.value.event_id, caught.value.seq) == ("same-id", 1)
        run = await log.get_run(KEY)
        assert run is not None and (run.status, run.version) == ("running", 1)
        assert [(e.seq, e.terminal) for e in await log.read_events(KEY)] == [(1, False)]

    @pytest.mark.asyncio
    async def test_an_append_naming_the_terminal_event_is_refused(
        self, store: AsyncStateStore
    ) -> None:
        log = _log(store, "atomic_finalize")
        await _finalized(log)
        # Same id, type and data as the terminal event: an append is another event.
        with pytest.raises(EventConflictError) as caught:
            await log.append_event(KEY, "done", {"ok": True}, event_id="fin-1")
        assert (caught.value.event_id, caught.value.seq) == ("fin-1", 2)
        assert [(e.seq, e.terminal) for e in await log.read_events(KEY)] == [
            (1, False),
            (2, True),
        ]

    @pytest.mark.asyncio
    async def test_concurrent_sends_of_one_event_id_all_return_the_stored_event(
        self, store: AsyncStateStore
    ) -> None:
        log = _log(store)
        await log.put_run(KEY, {"step": 0}, expected_version=0)
        # A retry racing its original (and each other): one event stored, each call gets it.
        sent = await async_gather(
            [partial(log.append_event, KEY, "tool", {"n": 1}, event_id="e-1") for _ in range(16)]
        )
        stored = await log.read_events(KEY)
        assert [(e.seq, e.event_id) for e in stored] == [(1, "e-1")]
        assert sent == [stored[0]] * 16

    @pytest.mark.asyncio
    async def test_concurrent_sends_of_one_finalize_all_return_the_run(
        self, store: AsyncStateStore
    ) -> None:
        log = _log(store, "atomic_finalize")
        await log.put_run(KEY, {"step": 0}, expected_version=0)

        async def finalize() -> RunRecord:
            return await log.finalize(
                KEY, status="completed", event_type="done", event_data={}, event_id="fin-1"
            )

        sent = await async_gather([finalize for _ in range(16)])
        assert {(run.status, run.version) for run in sent} == {("completed", 2)}
        assert [(e.event_id, e.terminal) for e in await log.read_events(KEY)] == [("fin-1", True)]

    @pytest.mark.asyncio
    async def test_delete_run_deletes_its_event_log(self, store: AsyncStateStore) -> None:
        log = _log(store)
        await log.put_run(KEY, {"step": 0}, expected_version=0)
        await log.append_event(KEY, "step", {"i": 1}, event_id="e-1")
        await log.append_event(KEY, "step", {"i": 2})
        with pytest.raises(StateConflictError):
            await log.delete_run(KEY, expected_version=7)
        assert len(await log.read_events(KEY)) == 2
        assert await log.delete_run(KEY)
        assert await log.read_events(KEY) == []
        await log.put_run(KEY, {"step": 0}, expected_version=0)
        assert await log.read_events(KEY) == []
        # The old event ids went with the log: "e-1" is a new event, with other content.
        first = await log.append_event(KEY, "other", {"new": True}, event_id="e-1")
        second = await log.append_event(KEY, "other", {"new": True})
        assert (first.seq, second.seq) == (1, 2)
        assert [(e.seq, e.type) for e in await log.read_events(KEY)] == [
            (1, "other"),
            (2, "other"),
        ]

    @pytest.mark.asyncio
    async def test_a_cascading_session_delete_deletes_its_runs_event_logs(
        self, store: AsyncStateStore
    ) -> None:
        log = _log(store)
        await log.put_session("acme", "s-ending", {}, expected_version=0)
        await log.put_run(KEY, {"step": 0}, expected_version=0, session_id="s-ending")
        await log.append_event(KEY, "step", {"i": 1}, event_id="e-1")
        assert await log.delete_session("acme", "s-ending", cascade=True)
        assert await log.get_run(KEY) is None
        assert await log.read_events(KEY) == []
        # The event ids went with the log: made again, the run's "e-1" is a new event.
        await log.put_run(KEY, {"step": 0}, expected_version=0)
        again = await log.append_event(KEY, "other", {"new": True}, event_id="e-1")
        assert (again.seq, again.type) == (1, "other")

    # -- follow, at its ends -------------------------------------------------------------------
    @pytest.mark.asyncio
    @pytest.mark.parametrize("write", ["put_run", "patch_run"])
    async def test_a_terminal_status_written_without_finalize_wakes_a_follower(
        self, store: AsyncStateStore, write: str
    ) -> None:
        made = await self.make_live_store()
        if made is None:
            pytest.skip("make_live_store() returns None: no live-updates variant to check")
        live = _log(made)
        try:
            await live.put_run(KEY, {"step": 0}, expected_version=0)
            await live.append_event(KEY, "step", {"i": 1})
            seen, checked, ended = AsyncEvent(), AsyncEvent(), AsyncEvent()
            followed: list[int] = []
            prompt: list[bool] = []
            read_run = live.get_run

            async def get_run(key: RunKey) -> RunRecord | None:
                # The follower's status check after event 1: once it has read "running", only a
                # hint (or its LONG_POLL poll) can tell it about the terminal status written next.
                run = await read_run(key)
                checked.set()
                return run

            live.get_run = get_run  # type: ignore[method-assign]

            async def follower() -> None:
                async for event in live.follow(KEY, poll_seconds=LONG_POLL):
                    followed.append(event.seq)
                    seen.set()
                ended.set()

            async def writer() -> None:
                assert await seen.wait(HINT_WAIT)
                assert await checked.wait(HINT_WAIT)
                if write == "put_run":
                    await live.put_run(KEY, {"step": 1}, expected_version=1, status="cancelled")
                else:
                    await live.patch_run(KEY, CounterDelta(iterations=1), status="cancelled")
                prompt.append(await ended.wait(HINT_WAIT))

            await async_gather([follower, writer])
        finally:
            await live.aclose()
        assert followed == [1]
        assert prompt == [True], f"the follower waited for its {LONG_POLL} s poll: no hint"

    @pytest.mark.asyncio
    async def test_follow_of_a_missing_run_raises_naming_it(self, store: AsyncStateStore) -> None:
        log = _log(store)
        with pytest.raises(StateNotFoundError, match="'ghost'"):
            async for _ in log.follow(RunKey("acme", "ghost"), poll_seconds=0.01):
                pass

    @pytest.mark.asyncio
    async def test_follow_of_a_run_deleted_while_followed_raises_naming_it(
        self, store: AsyncStateStore
    ) -> None:
        log = _log(store)
        await log.put_run(KEY, {"step": 0}, expected_version=0)
        await log.append_event(KEY, "step", {"i": 1})
        followed: list[RunEvent] = []
        with pytest.raises(StateNotFoundError, match="'ending'"):
            async for event in log.follow(KEY, poll_seconds=0.01):
                followed.append(event)
                await log.delete_run(KEY)
        assert [e.seq for e in followed] == [1]

    @pytest.mark.asyncio
    @pytest.mark.parametrize(
        ("call", "named"),
        [
            ({"after": -1}, "after"),
            ({"poll_seconds": 0}, "poll_seconds"),
            ({"poll_seconds": -0.5}, "poll_seconds"),
        ],
    )
    async def test_follow_checks_its_arguments_when_called(
        self, store: AsyncStateStore, call: dict[str, float], named: str
    ) -> None:
        log = _log(store)
        # Refused by the call itself, before anything is iterated.
        with pytest.raises(ValueError, match=named):
            log.follow(KEY, **call)  # type: ignore[arg-type]

    @pytest.mark.asyncio
    @pytest.mark.parametrize("status_seen", ["before", "after"])
    async def test_follow_misses_nothing_written_between_its_log_read_and_its_status_read(
        self, store: AsyncStateStore, status_seen: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # The interleaving forced: right after the follower has read the log (one event),
        # and before its read of the run's status returns, two more events and the terminal
        # write land. The status it then sees is the run's as it was "before" the writes
        # (not terminal yet) or "after" them (terminal): either way it must yield all four.
        # A store whose follow() reads the status some other way gets the writes after 50
        # reads of its log instead (so the follow ends), and the case skips.
        log = _log(store, "atomic_finalize")
        await log.put_run(KEY, {"step": 0}, expected_version=0)
        await log.append_event(KEY, "step", {"i": 0})
        get_run, read_events = log.get_run, log.read_events
        written: list[str] = []  # how the writes came: "raced", or "fallback"

        async def write(how: str) -> None:
            written.append(how)
            await log.append_event(KEY, "step", {"i": 1})
            await log.append_event(KEY, "step", {"i": 2})
            await log.finalize(KEY, status="completed", event_type="done", event_data={})

        async def racing_get_run(key: RunKey) -> Any:
            before = await get_run(key)
            if not written:
                await write("raced")
            return before if status_seen == "before" else await get_run(key)

        reads: list[int] = []

        async def counting_read_events(key: RunKey, **options: Any) -> Any:
            reads.append(1)
            if len(reads) == 50 and not written:
                await write("fallback")
            return await read_events(key, **options)

        try:
            monkeypatch.setattr(log, "get_run", racing_get_run)
            monkeypatch.setattr(log, "read_events", counting_read_events)
        except (AttributeError, TypeError):
            pytest.skip("this store's get_run/read_events cannot be wrapped on the instance")
        followed = [event async for event in log.follow(KEY, poll_seconds=0.01)]
        monkeypatch.undo()
        if written != ["raced"]:
            pytest.skip("this store's follow() does not read the run's status with get_run()")
        assert [(e.type, e.seq) for e in followed] == [
            ("step", 1),
            ("step", 2),
            ("step", 3),
            ("done", 4),
        ]
        assert followed[-1].terminal
