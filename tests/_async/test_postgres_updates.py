"""AsyncPostgresUpdates: LISTEN/NOTIFY hints on one connection per instance.

A follower whose LISTEN backend is terminated is a kit case (listener_killer in the
conformance test).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from functools import partial

import pytest
from runyard import ConfigurationError, RunKey
from runyard._flavours import async_gather
from runyard.events import RunEvent
from runyard.postgres import AsyncPostgresStateStore, AsyncPostgresUpdates, StateTables
from runyard.postgres.flavours import AsyncConnection

from tests._async.follow_support import subscribed_followers
from tests._async.postgres_support import open_store
from tests.support.postgres_plugin import PG_DSN, admin_connection

KEY = RunKey("acme", "listened")


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


def _listen_backends(application_name: str) -> int:
    with admin_connection() as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
            [application_name],
        ).fetchone()
    assert row is not None
    return int(str(row[0]))


@pytest.mark.asyncio
async def test_twenty_followers_share_one_listen_backend(pg_tables: StateTables) -> None:
    name = f"ry-{uuid.uuid4().hex[:12]}"
    updates = AsyncPostgresUpdates.from_conninfo(f"{PG_DSN} application_name={name}", pg_tables)
    keys = [RunKey("acme", f"run-{i}") for i in range(20)]
    try:
        async with await open_store(pg_tables, live_updates=updates) as store:
            followers = await subscribed_followers(store, keys)
            assert updates.followed == len(keys)
            assert _listen_backends(name) == 1
            for key in keys:
                await store.finalize(key, status="completed", event_type="done", event_data={})

            async def drain(events: AsyncIterator[RunEvent]) -> list[int]:
                return [event.seq async for event in events]

            drained = await async_gather([partial(drain, events) for events in followers])
        assert drained == [[2]] * len(keys)
    finally:
        await updates.aclose()


@pytest.mark.asyncio
async def test_a_subscription_made_while_another_follower_waits_gets_its_hint(
    pg_tables: StateTables,
) -> None:
    updates = AsyncPostgresUpdates.from_conninfo(PG_DSN, pg_tables)
    waiting, late = RunKey("acme", "waiting"), RunKey("acme", "late")
    try:
        async with await open_store(pg_tables, live_updates=updates) as store:
            for key in (waiting, late):
                await store.put_run(key, {}, expected_version=0)
            first = await updates.subscribe(waiting)
            woken: list[str] = []

            async def waiter() -> None:
                # Waits long: no read of this wait may hold up the other subscription.
                if await first.wait(120):
                    woken.append("waiting")

            async def subscriber() -> None:
                second = await updates.subscribe(late)
                await store.append_event(late, "step", {})
                if await second.wait(60):  # a generous bound, not a timing assertion
                    woken.append("late")
                await store.append_event(waiting, "step", {})  # ends the waiter's wait
                await second.aclose()

            await async_gather([waiter, subscriber])
            await first.aclose()
        assert woken == ["late", "waiting"]
    finally:
        await updates.aclose()


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
