"""AsyncEventLiveCases: event-log cases about time, the other twin, and a lost listener.

Mixed into the state-store kit. Each needs a hook the backend's test implements (the default
skips the case, saying which hook): ``make_real_time_store`` (a store whose time is real),
``make_twin`` (a store of the other twin on the same data) and ``listener_killer`` (ends the
live-updates listener connection of a store, as a server restart or a network cut would).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial

import pytest

from runyard._async.event_protocol import AsyncEventLogStore
from runyard._async.protocols import AsyncStateStore
from runyard._flavours import AsyncBlocking, AsyncEvent, async_gather
from runyard.events import RunEvent
from runyard.models import RunKey
from runyard.twin_drivers import TwinDriver

__all__ = ["AsyncEventLiveCases", "LostListenerLog"]

KEY = RunKey("acme", "live")
POLL = 0.01
STEPS = 20
LOST = "lost their listener"


def _log(store: AsyncStateStore | None, hook: str) -> AsyncEventLogStore:
    if store is None:
        pytest.skip(f"{hook}() returns None: this case needs it")
    if not (store.capabilities.event_log and store.capabilities.atomic_finalize):
        pytest.skip(f"{type(store).__name__} does not declare event_log and atomic_finalize")
    assert isinstance(store, AsyncEventLogStore)
    return store


class LostListenerLog(logging.Handler):
    """Keeps what ``runyard.follow`` logs, and sets ``flag`` once it says a listener was lost."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.flag = AsyncEvent()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
        if LOST in record.getMessage():
            self.flag.set()


class AsyncEventLiveCases:
    """Mixed into AsyncEventLogConformance; uses its hooks (and asks for its ``store``
    fixture even where it does not use it, so that the subclass has set itself up)."""

    async def make_live_store(self) -> AsyncStateStore | None:
        """See AsyncEventLogConformance.make_live_store."""
        return None

    async def make_real_time_store(self) -> AsyncStateStore | None:
        """A fresh store whose time is real (the server's, or the system clock), sharing
        nothing with ``store``; None skips the case that needs it."""
        return None

    def make_twin(self, store: AsyncStateStore) -> TwinDriver | None:
        """A driver of a store of the other twin on ``store``'s data, with live updates on
        when ``store`` has them (``runyard.testing.BlockingTwin``/``LoopTwin``); None skips."""
        return None

    def listener_killer(self, store: AsyncStateStore) -> Callable[[], Awaitable[None]] | None:
        """A call that ends the live-updates listener connection(s) of ``store`` (made by
        ``make_live_store``) from outside; None skips the case that needs it."""
        return None

    # -- time --------------------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_event_times_never_go_back_as_seqs_go_up(self, store: AsyncStateStore) -> None:
        log = _log(await self.make_real_time_store(), "make_real_time_store")
        try:
            await log.put_run(KEY, {}, expected_version=0)
            await async_gather(
                [partial(log.append_event, KEY, "step", {"writer": i}) for i in range(16)]
            )
            events = await log.read_events(KEY)
        finally:
            await log.aclose()
        assert [e.seq for e in events] == list(range(1, 17))
        times = [e.at for e in events]
        assert times == sorted(times)

    # -- the other twin ----------------------------------------------------------------------
    async def _this_and_twin(
        self, store: AsyncStateStore, live: bool
    ) -> tuple[AsyncEventLogStore, TwinDriver]:
        this = _log(await self.make_live_store() if live else store, "make_live_store")
        twin = self.make_twin(this)
        if twin is None:
            if this is not store:
                await this.aclose()
            pytest.skip("make_twin() returns None: no store of the other twin to drive")
        await this.put_run(KEY, {}, expected_version=0)
        return this, twin

    async def _run_follower_and_writer(
        self,
        store: AsyncStateStore,
        this: AsyncEventLogStore,
        follower: Callable[[], Awaitable[None]],
        writer: Callable[[], Awaitable[None]],
    ) -> list[RunEvent]:
        """Run ``follower`` and ``writer`` together; return the log as written. Closes ``this``
        unless it is the kit's ``store``."""
        try:
            await async_gather([follower, writer])
            return await this.read_events(KEY)
        finally:
            if this is not store:
                await this.aclose()

    @pytest.mark.asyncio
    @pytest.mark.parametrize("live", [False, True], ids=["polling", "live"])
    async def test_the_other_twin_follows_everything_this_one_writes(
        self, store: AsyncStateStore, live: bool
    ) -> None:
        this, twin = await self._this_and_twin(store, live)
        followed: list[RunEvent] = []

        async def follower() -> None:
            followed.extend(await AsyncBlocking.call(partial(twin.follow, KEY, POLL)))

        async def writer() -> None:
            for i in range(STEPS):
                await this.append_event(KEY, "step", {"i": i})
            await this.finalize(KEY, status="completed", event_type="done", event_data={"n": STEPS})

        written = await self._run_follower_and_writer(store, this, follower, writer)
        assert followed == written
        assert [e.seq for e in followed] == list(range(1, STEPS + 2)) and followed[-1].terminal

    @pytest.mark.asyncio
    @pytest.mark.parametrize("live", [False, True], ids=["polling", "live"])
    async def test_this_twin_follows_everything_the_other_one_writes(
        self, store: AsyncStateStore, live: bool
    ) -> None:
        this, twin = await self._this_and_twin(store, live)
        followed: list[RunEvent] = []

        async def follower() -> None:
            followed.extend([event async for event in this.follow(KEY, poll_seconds=POLL)])

        async def writer() -> None:
            await AsyncBlocking.call(partial(twin.write, KEY, STEPS))

        written = await self._run_follower_and_writer(store, this, follower, writer)
        assert followed == written
        assert [e.seq for e in followed] == list(range(1, STEPS + 2))
        assert followed[-1].terminal and followed[-1].data == {"n": STEPS}

    # -- a lost listener ---------------------------------------------------------------------
    @pytest.mark.asyncio
    async def test_a_follower_whose_listener_dies_ends_by_polling_and_says_so(
        self, store: AsyncStateStore
    ) -> None:
        live = _log(await self.make_live_store(), "make_live_store")
        kill = self.listener_killer(live)
        if kill is None:
            await live.aclose()
            pytest.skip("listener_killer() returns None: no listener connection to end")
        watcher = LostListenerLog()
        logger = logging.getLogger("runyard.follow")
        logger.addHandler(watcher)
        followed: list[RunEvent] = []
        try:
            await live.put_run(KEY, {}, expected_version=0)
            await live.append_event(KEY, "step", {"i": 0})
            events = live.follow(KEY, poll_seconds=POLL).__aiter__()
            followed.append(await events.__anext__())  # subscribed, and read the first event
            await kill()

            async def follower() -> None:
                followed.extend([event async for event in events])

            async def writer() -> None:
                # Only once the follower has noticed the loss: it must then end by polling.
                assert await watcher.flag.wait(60)
                await live.append_event(KEY, "step", {"i": 1})
                await live.finalize(KEY, status="completed", event_type="done", event_data={})

            await async_gather([follower, writer])
        finally:
            logger.removeHandler(watcher)
            await live.aclose()
        assert [(e.seq, e.type, e.terminal) for e in followed] == [
            (1, "step", False),
            (2, "step", False),
            (3, "done", True),
        ]
        assert any(LOST in m and "following by polling" in m for m in watcher.messages)
