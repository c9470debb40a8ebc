"""AsyncPostgresUpdates: LISTEN/NOTIFY hints, and a follower that loses its listener."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from runyard import ConfigurationError, RunKey
from runyard._flavours import async_gather
from runyard.events import RunEvent
from runyard.postgres import AsyncPostgresStateStore, AsyncPostgresUpdates, StateTables
from runyard.postgres.flavours import AsyncConnection

from tests._async.follow_support import LostListener, watching_for_lost_listener
from tests._async.postgres_support import open_store
from tests.support.postgres_plugin import PG_DSN, admin_connection

KEY = RunKey("acme", "listened")


@pytest.fixture
def signal() -> Iterator[LostListener]:
    with watching_for_lost_listener() as handler:
        yield handler


@pytest.mark.asyncio
async def test_a_write_wakes_a_subscriber_of_its_run(pg_tables: StateTables) -> None:
    async with await open_store(pg_tables, live_updates=True) as store:
        assert isinstance(store.live_updates, AsyncPostgresUpdates)
        await store.put_run(KEY, {}, expected_version=0)
        subscription = await store.live_updates.subscribe(KEY)
        await store.append_event(KEY, "step", {})
        assert await subscription.wait(30) is True
        assert subscription.lost is None
        await subscription.aclose()


@pytest.mark.asyncio
async def test_one_listening_connection_serves_every_subscription(
    pg_tables: StateTables,
) -> None:
    updates = AsyncPostgresUpdates.from_conninfo(PG_DSN, pg_tables)
    try:
        first = await updates.subscribe(KEY)
        pid = updates.backend_pid
        second = await updates.subscribe(RunKey("acme", "other"))
        assert pid is not None and updates.backend_pid == pid
        await first.aclose()
        await second.aclose()
    finally:
        await updates.aclose()
    assert updates.backend_pid is None


@pytest.mark.asyncio
async def test_live_updates_true_on_a_single_connection_says_what_to_pass(
    pg_tables: StateTables,
) -> None:
    connection = await AsyncConnection.connect(PG_DSN)
    try:
        with pytest.raises(ConfigurationError, match="from_conninfo"):
            AsyncPostgresStateStore(connection, tables=pg_tables, live_updates=True)
    finally:
        await connection.close()


@pytest.mark.asyncio
async def test_a_follower_whose_listener_is_killed_polls_to_the_end_and_logs_it(
    pg_tables: StateTables, signal: LostListener, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="runyard.follow")
    async with await open_store(pg_tables, live_updates=True) as store:
        assert isinstance(store.live_updates, AsyncPostgresUpdates)
        await store.put_run(KEY, {}, expected_version=0)
        await store.append_event(KEY, "step", {"i": 0})
        followed: list[RunEvent] = []
        events = store.follow(KEY, poll_seconds=0.01).__aiter__()
        followed.append(await events.__anext__())  # subscribed, and read the first event
        with admin_connection() as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", [store.live_updates.backend_pid])

        async def follower() -> None:
            followed.extend([event async for event in events])

        async def writer() -> None:
            # Only once the follower has noticed the loss: it must then end by polling.
            assert await signal.flag.wait(30)
            await store.append_event(KEY, "step", {"i": 1})
            await store.finalize(KEY, status="completed", event_type="done", event_data={})

        await async_gather([follower, writer])
    assert [(e.seq, e.type, e.terminal) for e in followed] == [
        (1, "step", False),
        (2, "step", False),
        (3, "done", True),
    ]
    assert any(
        "lost their listener" in r.getMessage() and "following by polling" in r.getMessage()
        for r in caplog.records
    )


@pytest.mark.asyncio
async def test_a_follower_that_cannot_subscribe_polls_to_the_end_and_logs_it(
    pg_tables: StateTables, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="runyard.follow")
    # Nothing listens on port 1: the LISTEN connection cannot be opened.
    unreachable = AsyncPostgresUpdates.from_conninfo(
        "host=127.0.0.1 port=1 dbname=runyard connect_timeout=5", pg_tables
    )
    async with await open_store(pg_tables, live_updates=unreachable) as store:
        await store.put_run(KEY, {}, expected_version=0)
        await store.append_event(KEY, "step", {"i": 0})
        await store.finalize(KEY, status="completed", event_type="done", event_data={})
        followed = [event async for event in store.follow(KEY, poll_seconds=0.01)]
    await unreachable.aclose()
    assert [(e.seq, e.terminal) for e in followed] == [(1, False), (2, True)]
    assert any(
        "lost their listener" in r.getMessage() and "following by polling" in r.getMessage()
        for r in caplog.records
    )
