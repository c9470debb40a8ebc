"""Runs and sessions on PostgreSQL: a create whose reply was lost, and a delete before the
read-back (as tests/_async/test_redis_tombstones.py); prune() of old tombstones.

Deleting a run or session writes its last write id to the tombstones table: a lost create that
landed and was deleted since is not sent again (that would undo the delete):
StoreOutcomeUnknown. One that never landed is sent again whatever another writer created and
deleted meanwhile (the tombstone holds that writer's id).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from psycopg_pool import AsyncConnectionPool
from runyard import ManualClock, RunKey, StoreOutcomeUnknown
from runyard.postgres import AsyncPostgresStateStore, PostgresStateStore, StateTables
from runyard.writes import TOMBSTONE_SECONDS

from tests._async.postgres_support import open_store
from tests.support.other_writer import on_postgres
from tests.support.postgres_plugin import PG_PORT, admin_connection
from tests.support.proxy import ReplyDroppingProxy, running_proxy

KEY = RunKey("acme", "r")


@pytest.fixture
def proxy() -> Iterator[ReplyDroppingProxy]:
    with running_proxy(PG_PORT) as proxy:
        yield proxy


@pytest_asyncio.fixture
async def store(
    proxy: ReplyDroppingProxy, pg_tables: StateTables
) -> AsyncIterator[AsyncPostgresStateStore]:
    """A store through the proxy, its create statements prepared (the next request is the
    test's)."""
    dsn = (
        f"host=127.0.0.1 port={proxy.port} user=postgres dbname=test "
        "options='-c statement_timeout=30s'"
    )
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(dsn, min_size=1, max_size=1, open=False)
    await pool.open(wait=True)
    async with AsyncPostgresStateStore(pool, tables=pg_tables, close_source=True) as store:
        await store.put_run(RunKey("acme", "warm"), {}, expected_version=0)
        await store.put_session("acme", "warm", {}, expected_version=0)
        yield store


def _delete_and_create(other: PostgresStateStore) -> None:
    other.delete_run(KEY)
    other.put_run(KEY, {"v": "other"}, expected_version=0)


def _create_and_delete(other: PostgresStateStore) -> None:
    other.put_run(KEY, {"v": "other"}, expected_version=0)
    other.delete_run(KEY)


def _create_and_delete_session(other: PostgresStateStore) -> None:
    other.put_session("acme", "s", {"v": "other"}, expected_version=0)
    other.delete_session("acme", "s")


@pytest.mark.asyncio
async def test_a_lost_create_deleted_before_the_read_back_stays_deleted(
    store: AsyncPostgresStateStore, proxy: ReplyDroppingProxy, pg_tables: StateTables
) -> None:
    proxy.drop_next_reply(then=on_postgres(pg_tables, lambda o: o.delete_run(KEY)))
    with pytest.raises(StoreOutcomeUnknown, match="landed and the run was deleted"):
        await store.put_run(KEY, {"v": 1}, expected_version=0)
    assert proxy.dropped == 1
    assert await store.get_run(KEY) is None


@pytest.mark.asyncio
async def test_a_lost_create_deleted_and_created_again_is_outcome_unknown(
    store: AsyncPostgresStateStore, proxy: ReplyDroppingProxy, pg_tables: StateTables
) -> None:
    proxy.drop_next_reply(then=on_postgres(pg_tables, _delete_and_create))
    # Version 1 is another writer's, yet this write took version 1 first: not a conflict.
    with pytest.raises(StoreOutcomeUnknown, match="landed and the run was deleted"):
        await store.put_run(KEY, {"v": 1}, expected_version=0)
    stored = await store.get_run(KEY)
    assert stored is not None and (stored.version, stored.blob) == (1, {"v": "other"})


@pytest.mark.asyncio
async def test_a_lost_create_that_never_landed_is_sent_again_over_another_writers_delete(
    store: AsyncPostgresStateStore, proxy: ReplyDroppingProxy, pg_tables: StateTables
) -> None:
    proxy.drop_next_request(then=on_postgres(pg_tables, _create_and_delete))
    record = await store.put_run(KEY, {"v": 1}, expected_version=0)
    assert proxy.lost_requests == 1
    assert (record.version, record.blob) == (1, {"v": 1})
    stored = await store.get_run(KEY)
    assert stored is not None and stored.blob == {"v": 1}


@pytest.mark.asyncio
async def test_a_lost_create_reply_returns_the_run(
    store: AsyncPostgresStateStore, proxy: ReplyDroppingProxy
) -> None:
    proxy.drop_next_reply()
    record = await store.put_run(KEY, {"v": 1}, expected_version=0)
    assert proxy.dropped == 1
    assert (record.version, record.blob) == (1, {"v": 1})


@pytest.mark.asyncio
async def test_a_lost_session_create_deleted_before_the_read_back_stays_deleted(
    store: AsyncPostgresStateStore, proxy: ReplyDroppingProxy, pg_tables: StateTables
) -> None:
    delete = on_postgres(pg_tables, lambda other: other.delete_session("acme", "s"))
    proxy.drop_next_reply(then=delete)
    with pytest.raises(StoreOutcomeUnknown, match="landed and the session was deleted"):
        await store.put_session("acme", "s", {"v": 1}, expected_version=0)
    assert await store.get_session("acme", "s") is None


@pytest.mark.asyncio
async def test_a_lost_session_create_that_never_landed_is_sent_again(
    store: AsyncPostgresStateStore, proxy: ReplyDroppingProxy, pg_tables: StateTables
) -> None:
    proxy.drop_next_request(then=on_postgres(pg_tables, _create_and_delete_session))
    record = await store.put_session("acme", "s", {"v": 1}, expected_version=0)
    assert (record.version, record.blob) == (1, {"v": 1})


@pytest.mark.asyncio
async def test_a_lost_session_create_reply_returns_the_session(
    store: AsyncPostgresStateStore, proxy: ReplyDroppingProxy
) -> None:
    proxy.drop_next_reply()
    record = await store.put_session("acme", "s", {"v": 1}, expected_version=0)
    assert proxy.dropped == 1
    assert (record.version, record.blob) == (1, {"v": 1})


def _tombstones(tables: StateTables) -> list[tuple[Any, ...]]:
    with admin_connection() as conn:
        return conn.execute(
            f"SELECT kind, record_id FROM {tables.qualified(tables.tombstones)} ORDER BY 1, 2"
        ).fetchall()


@pytest.mark.asyncio
async def test_every_delete_leaves_a_tombstone_of_the_records_it_deleted(
    pg_tables: StateTables,
) -> None:
    async with await open_store(pg_tables) as store:
        await store.put_run(KEY, {}, expected_version=0)
        await store.delete_run(KEY)
        await store.put_session("acme", "s", {}, expected_version=0)
        for n in range(3):
            await store.put_run(RunKey("acme", f"in-s{n}"), {}, expected_version=0, session_id="s")
        await store.delete_session("acme", "s", cascade=True)
    assert _tombstones(pg_tables) == [
        ("run", "in-s0"),
        ("run", "in-s1"),
        ("run", "in-s2"),
        ("run", "r"),
        ("session", "s"),
    ]


@pytest.mark.asyncio
async def test_prune_removes_tombstones_past_the_retention_within_its_limit(
    pg_tables: StateTables,
) -> None:
    clock = ManualClock(1_000.0)
    async with await open_store(pg_tables, clock) as store:
        for n in range(3):
            key = RunKey("acme", f"r{n}")
            await store.put_run(key, {}, expected_version=0)
            await store.delete_run(key)
            clock.advance(1)
        assert await store.prune(limit=10) == 0  # every tombstone is younger than retention
        clock.advance(TOMBSTONE_SECONDS - 1)  # r0 and r1 are past it, r2 not yet
        assert await store.prune(limit=1) == 1
        assert await store.prune(limit=10) == 1
        assert _tombstones(pg_tables) == [("run", "r2")]
