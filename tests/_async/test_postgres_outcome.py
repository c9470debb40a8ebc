"""A write whose reply is lost: StoreOutcomeUnknown, unless reading back settles it."""

from __future__ import annotations

from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool
from runyard import CounterDelta, RunKey, StateConflictError, StoreOutcomeUnknown
from runyard.postgres import (
    AsyncPostgresStateStore,
    AsyncPostgresWorkQueue,
    AsyncPsycopgExecutor,
    StateTables,
)
from runyard.postgres.statements import statements

from tests._async.postgres_support import CountingExecutor, open_store
from tests.support.postgres_plugin import PG_PORT
from tests.support.proxy import ReplyDroppingProxy, running_proxy


async def _pool_via(port: int) -> AsyncConnectionPool[Any]:
    dsn = f"host=127.0.0.1 port={port} user=postgres dbname=test options='-c statement_timeout=30s'"
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(dsn, min_size=1, max_size=1, open=False)
    await pool.open(wait=True)
    return pool


@pytest.mark.asyncio
async def test_a_patch_whose_reply_is_lost_is_settled_by_its_write_id(
    pg_tables: StateTables,
) -> None:
    key = RunKey("acme", "r")
    with running_proxy(PG_PORT) as proxy:
        store = AsyncPostgresStateStore(
            await _pool_via(proxy.port), tables=pg_tables, close_source=True
        )
        async with store:
            await store.put_run(key, {}, expected_version=0)
            await store.patch_run(key, CounterDelta(iterations=1))  # prepares the statement
            proxy.drop_next_reply()
            patched = await store.patch_run(key, CounterDelta(iterations=1))
            assert proxy.dropped == 1 and (patched.iterations, patched.version) == (2, 3)
    direct = await open_store(pg_tables)
    async with direct:
        record = await direct.get_run(key)
        assert record is not None and record.iterations == 2  # it was applied, once


@pytest.mark.asyncio
async def test_a_put_whose_reply_is_lost_is_settled_by_reading_back(
    pg_tables: StateTables,
) -> None:
    key = RunKey("acme", "r")
    with running_proxy(PG_PORT) as proxy:
        store = AsyncPostgresStateStore(
            await _pool_via(proxy.port), tables=pg_tables, close_source=True
        )
        async with store:
            await store.put_run(key, {"v": 1}, expected_version=0)
            await store.put_run(key, {"v": 2}, expected_version=1)  # prepares the update
            proxy.drop_next_reply()
            record = await store.put_run(key, {"v": 3}, expected_version=2)
            assert proxy.dropped == 1
            assert (record.version, record.blob) == (3, {"v": 3})
            stored = await store.get_run(key)
            assert stored is not None and stored.version == 3


@pytest.mark.asyncio
async def test_a_complete_whose_reply_is_lost_is_settled_by_reading_back(
    pg_tables: StateTables,
) -> None:
    with running_proxy(PG_PORT) as proxy:
        queue = AsyncPostgresWorkQueue(
            await _pool_via(proxy.port), tables=pg_tables, close_source=True
        )
        async with queue:
            for i in range(2):
                await queue.enqueue("acme", {"i": i})
            first = await queue.claim("w1")
            assert first is not None
            await queue.complete(first.tenant, first.item_id, token=first.token)  # prepares
            second = await queue.claim("w1")
            assert second is not None
            proxy.drop_next_reply()
            await queue.complete(second.tenant, second.item_id, token=second.token)
            assert proxy.dropped == 1
            assert await queue.get_item(second.tenant, second.item_id) is None


@pytest.mark.asyncio
async def test_a_session_put_whose_reply_is_lost_is_settled_by_reading_back(
    pg_tables: StateTables,
) -> None:
    with running_proxy(PG_PORT) as proxy:
        store = AsyncPostgresStateStore(
            await _pool_via(proxy.port), tables=pg_tables, close_source=True
        )
        async with store:
            await store.put_session("acme", "s", {"v": 1}, expected_version=0)
            await store.put_session("acme", "s", {"v": 2}, expected_version=1)  # prepares
            proxy.drop_next_reply()
            record = await store.put_session("acme", "s", {"v": 3}, expected_version=2)
            assert proxy.dropped == 1
            assert (record.version, record.blob) == (3, {"v": 3})


@pytest.mark.asyncio
async def test_a_release_whose_reply_is_lost_reports_the_release(pg_tables: StateTables) -> None:
    key = RunKey("acme", "r")
    with running_proxy(PG_PORT) as proxy:
        store = AsyncPostgresStateStore(
            await _pool_via(proxy.port), tables=pg_tables, close_source=True
        )
        async with store:
            first = await store.acquire_lease(key, "h1", ttl_seconds=30)
            assert await store.release_lease(first)  # prepares the statement
            second = await store.acquire_lease(key, "h1", ttl_seconds=30)
            proxy.drop_next_reply()
            # Sent again blindly, the release would find nothing to release and say False.
            assert await store.release_lease(second) is True
            assert proxy.dropped == 1
            assert await store.get_lease(key) is None
            assert await store.release_lease(second) is False


class _LoseTheReplyTo:
    """An executor that arms the proxy just before sending the statement that contains
    ``marker`` (once), so a read the operation makes first is not the one that is lost."""

    def __init__(self, inner: AsyncPsycopgExecutor, proxy: ReplyDroppingProxy, marker: str) -> None:
        self.inner = inner
        self.proxy = proxy
        self.marker = marker
        self.armed = False

    async def fetch(self, statement: str, *args: Any) -> Any:
        if self.armed and self.marker in statement:
            self.armed = False
            self.proxy.drop_next_reply()
        return await self.inner.fetch(statement, *args)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.mark.asyncio
async def test_a_fail_whose_reply_is_lost_is_outcome_unknown_and_applied_once(
    pg_tables: StateTables,
) -> None:
    with running_proxy(PG_PORT) as proxy:
        executor = _LoseTheReplyTo(
            AsyncPsycopgExecutor(await _pool_via(proxy.port)), proxy, "WITH failed AS"
        )
        queue = AsyncPostgresWorkQueue(executor, tables=pg_tables, close_source=True)
        async with queue:
            for i in range(2):
                await queue.enqueue("acme", {"i": i}, item_id=f"i{i}")
            first = await queue.claim("w1")
            assert first is not None
            await queue.fail(first.tenant, first.item_id, token=first.token)  # prepares
            second = await queue.claim("w1")
            assert second is not None and second.item_id != first.item_id
            executor.armed = True
            with pytest.raises(StoreOutcomeUnknown):
                await queue.fail(second.tenant, second.item_id, token=second.token)
            assert proxy.dropped == 1
            item = await queue.get_item(second.tenant, second.item_id)
            assert item is not None and item.state == "ready" and item.attempts == 1
            stats = await queue.stats()
            assert stats.leased == 0 and stats.ready + stats.delayed == 2


# -- write ids: both orders of a lost write -----------------------------------------------------
@pytest.mark.asyncio
async def test_a_put_run_that_lands_late_is_not_a_conflict_with_itself(
    pg_tables: StateTables,
) -> None:
    key = RunKey("acme", "r")
    with running_proxy(PG_PORT) as proxy:
        store = AsyncPostgresStateStore(
            await _pool_via(proxy.port), tables=pg_tables, close_source=True
        )
        async with store:
            await store.put_run(key, {"v": 0}, expected_version=0)
            await store.put_run(key, {"v": 1}, expected_version=1)  # prepares the statement
            # Held back until the re-send (the only later request holding the blob) goes out.
            proxy.hold_next_request(release_on=b"late-blob")
            record = await store.put_run(key, {"v": "late-blob"}, expected_version=2)
            assert proxy.delivered_late == 1
            assert (record.version, record.blob) == (3, {"v": "late-blob"})
            stored = await store.get_run(key)
            assert stored is not None and stored.version == 3


@pytest.mark.asyncio
async def test_a_lost_put_run_is_a_conflict_when_another_writer_won_with_the_same_blob(
    pg_tables: StateTables,
) -> None:
    key = RunKey("acme", "r")
    other = await open_store(pg_tables)
    with running_proxy(PG_PORT) as proxy:
        store = AsyncPostgresStateStore(
            await _pool_via(proxy.port), tables=pg_tables, close_source=True
        )
        async with store, other:
            await store.put_run(key, {"v": 0}, expected_version=0)
            await store.put_run(key, {"v": 1}, expected_version=1)  # prepares the statement
            await other.put_run(key, {"status": "done"}, expected_version=2)
            proxy.drop_next_request()
            with pytest.raises(StateConflictError) as conflict:
                await store.put_run(key, {"status": "done"}, expected_version=2, status="done")
            assert proxy.lost_requests == 1
            assert (conflict.value.expected, conflict.value.actual) == (2, 3)
            stored = await store.get_run(key)
            assert stored is not None and (stored.version, stored.status) == (3, "running")


@pytest.mark.asyncio
async def test_a_put_session_that_lands_late_is_not_a_conflict_with_itself(
    pg_tables: StateTables,
) -> None:
    with running_proxy(PG_PORT) as proxy:
        store = AsyncPostgresStateStore(
            await _pool_via(proxy.port), tables=pg_tables, close_source=True
        )
        async with store:
            await store.put_session("acme", "s", {"v": 0}, expected_version=0)
            await store.put_session("acme", "s", {"v": 1}, expected_version=1)  # prepares
            proxy.hold_next_request(release_on=b"late-blob")
            record = await store.put_session("acme", "s", {"v": "late-blob"}, expected_version=2)
            assert proxy.delivered_late == 1
            assert (record.version, record.blob) == (3, {"v": "late-blob"})


@pytest.mark.asyncio
async def test_a_lost_put_session_is_a_conflict_when_another_writer_won_with_the_same_blob(
    pg_tables: StateTables,
) -> None:
    other = await open_store(pg_tables)
    with running_proxy(PG_PORT) as proxy:
        store = AsyncPostgresStateStore(
            await _pool_via(proxy.port), tables=pg_tables, close_source=True
        )
        async with store, other:
            await store.put_session("acme", "s", {"v": 0}, expected_version=0)
            await store.put_session("acme", "s", {"v": 1}, expected_version=1)  # prepares
            await other.put_session("acme", "s", {"v": 2}, expected_version=2)
            proxy.drop_next_request()
            with pytest.raises(StateConflictError) as conflict:
                await store.put_session("acme", "s", {"v": 2}, expected_version=2)
            assert proxy.lost_requests == 1
            assert (conflict.value.expected, conflict.value.actual) == (2, 3)


@pytest.mark.asyncio
async def test_a_finalize_whose_reply_is_lost_is_settled_by_its_write_id(
    pg_tables: StateTables,
) -> None:
    first, second = RunKey("acme", "a"), RunKey("acme", "b")
    with running_proxy(PG_PORT) as proxy:
        store = AsyncPostgresStateStore(
            await _pool_via(proxy.port), tables=pg_tables, close_source=True
        )
        async with store:
            for key in (first, second):
                await store.put_run(key, {}, expected_version=0)
            await store.finalize(first, status="completed", event_type="done", event_data={})
            proxy.drop_next_reply()  # no event_id: only the write id can settle it
            record = await store.finalize(
                second, status="completed", event_type="done", event_data={}
            )
            assert proxy.dropped == 1 and (record.status, record.version) == ("completed", 2)
            assert [e.terminal for e in await store.read_events(second)] == [True]


# -- the event log: a lost reply is settled by the event_id -------------------------------------
@pytest.mark.asyncio
async def test_an_append_whose_reply_is_lost_is_settled_by_its_event_id(
    pg_tables: StateTables,
) -> None:
    key = RunKey("acme", "r")
    append = statements(pg_tables).append_event
    with running_proxy(PG_PORT) as proxy:
        executor = CountingExecutor(AsyncPsycopgExecutor(await _pool_via(proxy.port)))
        store = AsyncPostgresStateStore(executor, tables=pg_tables, close_source=True)
        async with store:
            await store.put_run(key, {}, expected_version=0)
            await store.append_event(key, "warm", {})  # seq 1; prepares the statement
            proxy.drop_next_reply()  # the append commits; its reply is lost
            before = executor.sent
            event = await store.append_event(key, "step", {"n": 1}, event_id="e1")
            assert proxy.dropped == 1
            # Sent again (the event_id makes it safe), it found the stored event.
            assert executor.statements[before:] == [append, append]
            stored = await store.read_events(key)
            assert [(e.seq, e.type, e.event_id) for e in stored] == [
                (1, "warm", None),
                (2, "step", "e1"),
            ]
            assert event == stored[1]
            # The caller's own resend with the same id returns it too.
            assert await store.append_event(key, "step", {"n": 1}, event_id="e1") == stored[1]
            assert len(await store.read_events(key)) == 2


@pytest.mark.asyncio
async def test_a_finalize_whose_reply_is_lost_is_settled_by_its_event_id(
    pg_tables: StateTables,
) -> None:
    warm, key = RunKey("acme", "warm"), RunKey("acme", "r")
    finalize = statements(pg_tables).finalize
    with running_proxy(PG_PORT) as proxy:
        executor = CountingExecutor(AsyncPsycopgExecutor(await _pool_via(proxy.port)))
        store = AsyncPostgresStateStore(executor, tables=pg_tables, close_source=True)
        async with store:
            for k in (warm, key):
                await store.put_run(k, {}, expected_version=0)
            await store.finalize(warm, status="completed", event_type="done", event_data={})
            await store.append_event(key, "step", {})
            proxy.drop_next_reply()
            before = executor.sent
            record = await store.finalize(
                key, status="completed", event_type="done", event_data={"ok": 1}, event_id="end"
            )
            assert proxy.dropped == 1
            # Settled by sending it again (it finds its terminal event), not by reading back.
            assert executor.statements[before:] == [finalize, finalize]
            assert (record.status, record.version) == ("completed", 2)
            events = await store.read_events(key)
            assert [(e.seq, e.type, e.event_id, e.terminal) for e in events] == [
                (1, "step", None, False),
                (2, "done", "end", True),
            ]
    direct = await open_store(pg_tables)
    async with direct:
        stored = await direct.get_run(key)
        assert stored is not None and (stored.status, stored.version) == ("completed", 2)


@pytest.mark.asyncio
async def test_an_append_without_an_event_id_whose_reply_is_lost_is_outcome_unknown(
    pg_tables: StateTables,
) -> None:
    key = RunKey("acme", "r")
    with running_proxy(PG_PORT) as proxy:
        executor = CountingExecutor(AsyncPsycopgExecutor(await _pool_via(proxy.port)))
        store = AsyncPostgresStateStore(executor, tables=pg_tables, close_source=True)
        async with store:
            await store.put_run(key, {}, expected_version=0)
            await store.append_event(key, "warm", {})  # prepares the statement
            proxy.drop_next_reply()
            before = executor.sent
            # The message says the write may or may not have been applied, and (as Redis's)
            # how to make it retryable.
            with pytest.raises(StoreOutcomeUnknown, match="pass event_id= to make it retryable"):
                await store.append_event(key, "step", {"n": 1})
            assert proxy.dropped == 1
            assert executor.sent - before == 1  # never sent again
            # It committed once (the proxy lost only the reply).
            assert [e.type for e in await store.read_events(key)] == ["warm", "step"]


@pytest.mark.asyncio
async def test_a_purge_whose_reply_is_lost_is_outcome_unknown_as_on_redis(
    pg_tables: StateTables,
) -> None:
    # Sent again, the purge would find nothing left and report 0 for the 2 it deleted.
    with running_proxy(PG_PORT) as proxy:
        queue = AsyncPostgresWorkQueue(
            await _pool_via(proxy.port), tables=pg_tables, close_source=True
        )
        async with queue:
            for _ in range(2):
                await queue.enqueue("acme", {}, max_attempts=1)
                lease = await queue.claim("w")
                assert lease is not None
                await queue.fail(lease, error="boom", retryable=False)
            proxy.drop_next_reply()
            with pytest.raises(StoreOutcomeUnknown):
                await queue.purge_dead("acme")
            assert proxy.dropped == 1
            left = len(await queue.dead_letters("acme"))  # applied or not: the caller reads
            assert await queue.purge_dead("acme") == left
            assert await queue.dead_letters("acme") == []
            proxy.drop_next_reply()
            with pytest.raises(StoreOutcomeUnknown):
                await queue.prune()
