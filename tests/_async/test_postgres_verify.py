"""open() runs verify(); driver errors reach the caller as runyard errors."""

from __future__ import annotations

import json
import socket
from typing import Any

import psycopg
import pytest
from runyard import (
    ConfigurationError,
    CounterDelta,
    PoolExhaustedError,
    QueueUnavailableError,
    RunKey,
    StatePersistenceError,
    StoreOutcomeUnknown,
)
from runyard._flavours import async_sleep
from runyard.executions import Event, Execution, SpawnIntent, TraceStep
from runyard.postgres import (
    AsyncPostgresExecutionStore,
    AsyncPostgresStateStore,
    AsyncPostgresWorkQueue,
    AsyncPsycopgExecutor,
    StateTables,
)
from runyard.postgres.errors import map_error

from tests._async.postgres_support import CountingExecutor, open_pool, open_store
from tests.support.postgres_migrations import (
    migration_sql,
    migration_statements,
    undo_executions_3,
    undo_queue_5,
)
from tests.support.postgres_plugin import PG_BASE_DSN, PG_PORT, admin_connection

REFUSED = [
    {"x": float("nan")},
    {"x": float("inf")},
    {"x": float("-inf")},
    {"x": "nul\x00"},
    {"x": "lone\ud800surrogate"},
    {"nul\x00key": 1},
]


@pytest.mark.asyncio
async def test_a_wrong_schema_version_is_refused(pg_tables: StateTables) -> None:
    # Queue version 2 has no per-item max_attempts column: the error names both versions.
    with admin_connection() as conn:
        conn.execute(
            f"UPDATE {pg_tables.qualified(pg_tables.schema_table)} SET version = 2"
            " WHERE component = 'queue'"
        )
    pool = await open_pool()
    try:
        with pytest.raises(
            ConfigurationError,
            match="at schema version 2, but this runyard was written for version 5",
        ):
            await AsyncPostgresWorkQueue.open(pool, tables=pg_tables)
        store = await AsyncPostgresStateStore.open(pool, tables=pg_tables)
        assert await store.get_run(RunKey("acme", "r")) is None
    finally:
        await pool.close()


@pytest.mark.asyncio
async def test_queue_version_3_is_refused_until_its_due_index_is_migrated(
    pg_tables: StateTables,
) -> None:
    # Queue version 3's due index served any statement with a tenant and state = 'ready': the
    # claim's head too, read in a sort of the tenant's whole due backlog wherever the planner
    # guessed few rows. Refused at version 3; docs/postgres.md's migration (run here as
    # written, statement by statement, then version 5's) makes it open, and the index is
    # version 4's.
    work = pg_tables.qualified(pg_tables.work)
    due = f"{pg_tables.work}_due"
    schema = pg_tables.schema
    assert schema is not None
    with admin_connection() as conn:
        conn.execute(f'DROP INDEX "{schema}"."{due}"')
        conn.execute(
            f"CREATE INDEX \"{due}\" ON {work} (tenant, available_at) WHERE state = 'ready'"
        )
        undo_queue_5(conn, pg_tables)
        conn.execute(
            f"UPDATE {pg_tables.qualified(pg_tables.schema_table)} SET version = 3"
            " WHERE component = 'queue'"
        )
    pool = await open_pool()
    try:
        with pytest.raises(ConfigurationError) as refused:
            await AsyncPostgresWorkQueue.open(pool, tables=pg_tables)
        assert "'queue' is at schema version 3" in str(refused.value)
        assert "written for version 5: migrate the schema" in str(refused.value)
        with admin_connection() as conn:
            conn.execute(f'SET search_path TO "{schema}"')
            for statement in migration_statements("Queue version 4"):
                conn.execute(statement)
            conn.execute(migration_sql("Queue version 5"))
            defined = conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND indexname = %s",
                (schema, due),
            ).fetchone()
        assert defined is not None
        assert (
            "WHERE ((state = 'ready'::text) AND (priority > '-9223372036854775808'::bigint))"
            in str(defined[0])
        )
        queue = await AsyncPostgresWorkQueue.open(pool, tables=pg_tables)
        await queue.enqueue("acme", {"n": 1})
        lease = await queue.claim("w")
        assert lease is not None and lease.tenant == "acme"
    finally:
        await pool.close()


@pytest.mark.asyncio
async def test_a_schema_with_jsonb_blobs_is_refused(pg_tables: StateTables) -> None:
    # State version 2 and queue version 1 stored blobs and payloads as jsonb, which rewrites
    # 1e16, -0.0 and key order: this runyard refuses them until the schema is migrated.
    with admin_connection() as conn:
        table = pg_tables.qualified(pg_tables.schema_table)
        conn.execute(f"UPDATE {table} SET version = 2 WHERE component = 'state'")
        conn.execute(f"UPDATE {table} SET version = 1 WHERE component = 'queue'")
    pool = await open_pool()
    try:
        with pytest.raises(ConfigurationError) as state:
            await AsyncPostgresStateStore.open(pool, tables=pg_tables)
        assert "'state' is at schema version 2" in str(state.value)
        assert "written for version 6: migrate the schema" in str(state.value)
        with pytest.raises(ConfigurationError) as queue:
            await AsyncPostgresWorkQueue.open(pool, tables=pg_tables)
        assert "'queue' is at schema version 1" in str(queue.value)
        assert "written for version 5: migrate the schema" in str(queue.value)
    finally:
        await pool.close()


@pytest.mark.asyncio
async def test_an_executions_2_schema_is_refused_until_migrated_as_documented(
    pg_tables: StateTables,
) -> None:
    # Executions version 2 stored contexts and event data as jsonb, which rewrote 1e16, -0.0
    # and key order; version 3 stores the client's text.
    t = pg_tables
    value = {"b": 1, "a": -0.0, "f": 1e16}
    pool = await open_pool()
    try:
        before = await AsyncPostgresExecutionStore.open(pool, tables=t)
        await before.save(Execution(id="old", definition_id="d", context=value))
        await before.aclose()
        with admin_connection() as conn:
            undo_executions_3(conn, t)  # the row as version 2 held it: jsonb's rendering
        with pytest.raises(ConfigurationError) as refused:
            await AsyncPostgresExecutionStore.open(pool, tables=t)
        assert "'executions' is at schema version 2" in str(refused.value)
        assert "written for version 3: migrate the schema" in str(refused.value)
        with admin_connection() as conn:
            conn.execute(f'SET search_path TO "{t.schema}"')
            with conn.transaction():
                conn.execute(migration_sql("Executions version 3"))
        store = await AsyncPostgresExecutionStore.open(pool, tables=t)
        try:
            old = await store.load("old")  # loads, keeping jsonb's rendering (docs/postgres.md)
            assert old is not None and old.context == value
            assert json.dumps(old.context) == '{"a": 0.0, "b": 1, "f": 10000000000000000}'
            exe = Execution(id="e", definition_id="d", context=value)
            await store.save(exe)
            saved = await store.load("e")
            assert saved is not None
            await store.commit(
                saved,
                emits=[("t", Event(id="ev", name="n", data=value))],
                spawns=[SpawnIntent(child_id="kid", context=value)],
                trace=TraceStep(data=value),
            )
            loaded = await store.load("e")
            [entry] = await store.pending_outbox()
            [spawn] = await store.pending_spawns()
            [step] = await store.read_trace("e")
            read = [loaded.context if loaded else None, entry.event.data, spawn.context, step.data]
            assert [json.dumps(v) for v in read] == [json.dumps(value)] * 4
        finally:
            await store.aclose()
    finally:
        await pool.close()


@pytest.mark.asyncio
async def test_a_missing_table_is_refused_saying_how_to_fix_it(pg_tables: StateTables) -> None:
    with admin_connection() as conn:
        conn.execute(f"DROP TABLE {pg_tables.qualified(pg_tables.runs)}")
    pool = await open_pool()
    try:
        with pytest.raises(ConfigurationError) as caught:
            await AsyncPostgresStateStore.open(pool, tables=pg_tables)
        message = str(caught.value)
        assert pg_tables.runs in message and "does not exist" in message
        assert "apply runyard.postgres.EXPECTED_SCHEMA with your migration tool" in message
        assert "docs/postgres.md" in message
    finally:
        await pool.close()


@pytest.mark.asyncio
async def test_an_invalid_index_is_refused_until_it_is_rebuilt(pg_tables: StateTables) -> None:
    # A unique index built CONCURRENTLY over duplicates fails and stays behind INVALID, under
    # its own name: the planner ignores it. open() names it and the repair, which then works.
    work = pg_tables.qualified(pg_tables.work)
    dedupe = f'"{pg_tables.schema}"."{pg_tables.work}_dedupe"'
    columns = "tenant, item_id, payload, priority, state, attempts, available_at, enqueued_at"
    with admin_connection() as conn:
        conn.execute(f"DROP INDEX {dedupe}")
        for item_id in ("a", "b"):
            conn.execute(
                f"INSERT INTO {work} ({columns}, dedupe_key) "
                f"VALUES ('acme', '{item_id}', '{{}}', 0, 'ready', 0, 0, 0, 'same')"
            )
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(
                f'CREATE UNIQUE INDEX CONCURRENTLY "{pg_tables.work}_dedupe" '
                f"ON {work} (tenant, dedupe_key) WHERE dedupe_key IS NOT NULL"
            )
    pool = await open_pool()
    try:
        with pytest.raises(ConfigurationError) as refused:
            await AsyncPostgresWorkQueue.open(pool, tables=pg_tables)
        message, named = str(refused.value), f"{pg_tables.schema}.{pg_tables.work}_dedupe"
        assert f"index {named} is INVALID" in message
        assert f"REINDEX INDEX CONCURRENTLY {named}" in message
        # the state store needs no index of the work table: it opens
        await AsyncPostgresStateStore.open(pool, tables=pg_tables)
        with admin_connection() as conn:
            conn.execute(f"DELETE FROM {work} WHERE item_id = 'b'")
            conn.execute(f"REINDEX INDEX CONCURRENTLY {dedupe}")
        queue = await AsyncPostgresWorkQueue.open(pool, tables=pg_tables)
        item = await queue.enqueue("acme", {"n": 1}, dedupe_key="same")
        assert item.item_id == "a"  # the rebuilt index serves the dedupe again
    finally:
        await pool.close()


@pytest.mark.asyncio
async def test_a_table_dropped_after_open_is_named_in_the_error(pg_tables: StateTables) -> None:
    store = await open_store(pg_tables)
    async with store:
        with admin_connection() as conn:
            conn.execute(f"DROP TABLE {pg_tables.qualified(pg_tables.runs)} CASCADE")
        with pytest.raises(ConfigurationError, match=f"{pg_tables.runs}.*EXPECTED_SCHEMA"):
            await store.get_run(RunKey("acme", "r"))


@pytest.mark.asyncio
async def test_a_connection_without_statement_timeout_is_refused(
    pg_tables: StateTables,
) -> None:
    from psycopg_pool import AsyncConnectionPool

    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        PG_BASE_DSN, min_size=1, max_size=2, open=False
    )
    await pool.open(wait=True)
    try:
        with pytest.raises(ConfigurationError, match="statement_timeout is 0"):
            await AsyncPostgresStateStore.open(pool, tables=pg_tables)
    finally:
        await pool.close()


@pytest.mark.asyncio
async def test_an_exhausted_pool_raises_pool_exhausted(pg_tables: StateTables) -> None:
    pool = await open_pool(max_size=1, timeout=0.2)
    store = AsyncPostgresStateStore(pool, tables=pg_tables, close_source=True)
    async with store:
        held = await pool.getconn()
        try:
            with pytest.raises(PoolExhaustedError) as caught:
                await store.get_run(RunKey("acme", "r"))
            assert caught.value.retryable
        finally:
            await pool.putconn(held)
        assert await store.get_run(RunKey("acme", "r")) is None


@pytest.mark.asyncio
async def test_a_closed_store_refuses_its_calls_saying_so_nothing_sent(
    pg_tables: StateTables,
) -> None:
    # After close a write raised StoreOutcomeUnknown ("connection lost before the reply to a
    # write: it may or may not have been applied"), and a read a retryable "connection lost"
    # error, as in an outage; the closed pool had sent nothing.
    store = AsyncPostgresStateStore(await open_pool(), tables=pg_tables, close_source=True)
    queue = await AsyncPostgresWorkQueue.open(
        await open_pool(), tables=pg_tables, close_source=True
    )
    await store.aclose()
    await queue.aclose()
    with pytest.raises(StatePersistenceError, match="store is closed") as caught:
        await store.put_run(RunKey("acme", "r"), {}, expected_version=0)
    assert not isinstance(caught.value, StoreOutcomeUnknown)
    assert caught.value.reason == "unavailable"
    with pytest.raises(StatePersistenceError, match="store is closed"):
        await store.get_run(RunKey("acme", "r"))
    with pytest.raises(QueueUnavailableError, match="store is closed"):
        await queue.claim("w")
    with pytest.raises(QueueUnavailableError, match="store is closed"):
        await queue.enqueue("acme", {})


@pytest.mark.asyncio
@pytest.mark.parametrize(("min_size", "max_size"), [(0, 2), (1, 2), (2, 2), (1, 1)])
async def test_a_pool_that_cannot_connect_is_unavailable_not_exhausted(
    pg_tables: StateTables, min_size: int, max_size: int
) -> None:
    # In an outage the pool's getconn times out too: that was reported as "every connection
    # of the pool is in use: raise max_size or lower concurrency", the wrong repair. A pool
    # holding fewer connections than its max_size could not make them: the store is
    # unavailable (retryable), as when no connection can be made at all. The pool's own
    # counts cannot tell: its pool_size counts the connections it is still trying to make
    # (a pool of min_size=max_size looked full through the outage).
    from psycopg_pool import AsyncConnectionPool

    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # nothing listens here once the socket closes
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        f"host=127.0.0.1 port={port} user=postgres dbname=test connect_timeout=1 "
        "options='-c statement_timeout=30s'",
        min_size=min_size,
        max_size=max_size,
        timeout=0.3,
        open=False,
        reconnect_timeout=60,
    )
    await pool.open()
    store = AsyncPostgresStateStore(pool, tables=pg_tables, retry_attempts=0, close_source=True)
    async with store:
        with pytest.raises(StatePersistenceError) as caught:
            await store.get_run(RunKey("acme", "r"))
        assert not isinstance(caught.value, PoolExhaustedError)
        assert caught.value.reason == "unavailable" and caught.value.retryable
        assert "could not connect" in str(caught.value)
        assert "Connection refused" in str(caught.value)  # libpq's reason
        assert "raise max_size" not in str(caught.value)


async def _timed_out_fetch(pool: Any) -> Exception:
    """What a statement on ``pool`` raises (mapped as the stores map it) once its getconn times
    out."""
    executor = AsyncPsycopgExecutor(pool)
    with pytest.raises(Exception) as caught:
        await executor.fetch("SELECT 1")
    return map_error(caught.value, kind="state", idempotent=True, secret=None) or caught.value


async def _timed_out_on(conninfo: Any) -> Exception:
    """``_timed_out_fetch`` on a pool of ``conninfo`` (0 to 2 connections, 0.3 s timeout)."""
    from psycopg_pool import AsyncConnectionPool

    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        conninfo, min_size=0, max_size=2, timeout=0.3, open=False
    )
    await pool.open()
    try:
        return await _timed_out_fetch(pool)
    finally:
        await pool.close()


@pytest.mark.asyncio
async def test_a_timed_out_pool_is_judged_without_showing_the_password_or_the_server_limit(
    pg_tables: StateTables,
) -> None:
    # The re-review of the probe after a PoolTimeout: libpq's refusal of a conninfo it cannot
    # parse quotes it (the password); a server at its connection limit (53300) is a full pool,
    # not an outage; a conninfo made per connection cannot be probed (the pool's counts then
    # decide); the conninfo's own connect_timeout is kept.
    from psycopg_pool import AsyncConnectionPool

    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    secret = "Pa%zzS3cr3tPw"
    error = await _timed_out_on(f"postgresql://postgres:{secret}@127.0.0.1:{PG_PORT}/test")
    assert secret not in str(error) and "S3cr3t" not in str(error)
    assert "conninfo is not valid" in str(error)
    error = await _timed_out_on(
        lambda: f"host=127.0.0.1 port={port} user=postgres dbname=test connect_timeout=1"
    )
    assert isinstance(error, StatePersistenceError) and error.reason == "unavailable"
    assert not isinstance(error, PoolExhaustedError)
    role = f"rv_limit_{pg_tables.schema}"
    with admin_connection() as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT 1')
    try:
        limited: AsyncConnectionPool[Any] = AsyncConnectionPool(
            f"host=127.0.0.1 port={PG_PORT} user={role} dbname=test",
            min_size=1,
            max_size=1,
            timeout=0.3,
            open=False,
        )
        await limited.open(wait=True)
        held = await limited.getconn()
        try:
            error = await _timed_out_fetch(limited)
            assert isinstance(error, PoolExhaustedError), error
        finally:
            await limited.putconn(held)
            await limited.close()
    finally:
        with admin_connection() as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (role,),
            )
            admin.execute(f'DROP ROLE "{role}"')


@pytest.mark.asyncio
async def test_a_statement_timeout_is_a_retryable_persistence_error(
    pg_tables: StateTables,
) -> None:
    from psycopg_pool import AsyncConnectionPool

    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        f"{PG_BASE_DSN} options='-c statement_timeout=200ms'", min_size=1, open=False
    )
    await pool.open(wait=True)
    store = AsyncPostgresStateStore(pool, tables=pg_tables, retry_attempts=0, close_source=True)
    async with store:
        key = RunKey("acme", "r")
        await store.put_run(key, {}, expected_version=0)
        with admin_connection() as locker, locker.transaction():
            locker.execute(f"SELECT 1 FROM {pg_tables.qualified(pg_tables.runs)} FOR UPDATE")
            with pytest.raises(StatePersistenceError) as caught:
                await store.patch_run(key, CounterDelta(iterations=1))
        assert caught.value.retryable and "statement_timeout" in str(caught.value)
        record = await store.get_run(key)
        assert record is not None and record.iterations == 0


@pytest.mark.asyncio
async def test_values_jsonb_refuses_are_refused_before_sending(pg_tables: StateTables) -> None:
    pool = await open_pool()
    executor = CountingExecutor(AsyncPsycopgExecutor(pool))
    store = AsyncPostgresStateStore(executor, tables=pg_tables)
    queue = AsyncPostgresWorkQueue(executor, tables=pg_tables)
    try:
        for bad in REFUSED:
            with pytest.raises(StatePersistenceError) as caught:
                await store.put_run(RunKey("acme", "r"), bad, expected_version=0)
            assert caught.value.reason == "invalid" and not caught.value.retryable
            with pytest.raises(StatePersistenceError):
                await store.put_session("acme", "s", bad, expected_version=0)
            with pytest.raises(StatePersistenceError):
                await queue.enqueue("acme", bad)
        assert executor.sent == 0
        assert await store.get_run(RunKey("acme", "r")) is None
    finally:
        await pool.close()


@pytest.mark.asyncio
async def test_an_oversized_value_is_refused_before_sending(pg_tables: StateTables) -> None:
    pool = await open_pool()
    executor = CountingExecutor(AsyncPsycopgExecutor(pool))
    store = AsyncPostgresStateStore(executor, tables=pg_tables, max_value_bytes=1_000)
    try:
        with pytest.raises(StatePersistenceError) as caught:
            await store.put_run(RunKey("acme", "r"), {"x": "y" * 2_000}, expected_version=0)
        assert caught.value.reason == "too_large" and executor.sent == 0
    finally:
        await pool.close()


class SlowFirstReply(CountingExecutor):
    """The real executor, whose first reply comes back ``delay`` seconds late."""

    delay = 0.2

    async def fetch(self, statement: str, *args: Any) -> Any:
        reply = await super().fetch(statement, *args)
        if self.sent == 1:
            await async_sleep(self.delay)
        return reply


@pytest.mark.asyncio
async def test_the_clock_offset_comes_from_the_fastest_of_several_reads(
    pg_tables: StateTables,
) -> None:
    # The queue's "now" is the server's clock. Measured from the first round trip alone (its
    # reply 0.2 s late) it came out near 0.1 s behind, so a claim's "now" ran behind the
    # enqueue's and a just-enqueued item (its hint just read) was not due.
    pool = await open_pool()
    executor = SlowFirstReply(AsyncPsycopgExecutor(pool))
    queue = AsyncPostgresWorkQueue(executor, tables=pg_tables)
    read_server = "SELECT extract(epoch FROM clock_timestamp())::float8"
    try:
        await queue.verify()
        assert executor.sent > 2  # verify_relations, then more reads of the server's clock
        async with pool.connection() as conn:
            before = (await (await conn.execute(read_server)).fetchall())[0][0]
            now = queue._now()
            after = (await (await conn.execute(read_server)).fetchall())[0][0]
        margin = SlowFirstReply.delay / 4
        assert before - margin < now < after + margin
    finally:
        await pool.close()
