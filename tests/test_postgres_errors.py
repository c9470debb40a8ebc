"""SQLSTATE mapping, checked against errors the real server raises."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from runyard import (
    ConfigurationError,
    PoolExhaustedError,
    QueueUnavailableError,
    RunKey,
    StatePersistenceError,
    StoreOutcomeUnknown,
)
from runyard.postgres import PostgresStateStore, StateTables
from runyard.postgres.errors import NotSent, map_error

from tests.support.postgres_plugin import PG_BASE_DSN, PG_DSN, admin_connection


def _server_error(sql: str) -> psycopg.Error:
    with admin_connection() as conn:
        try:
            conn.execute(sql)
        except psycopg.Error as exc:
            return exc
    raise AssertionError(f"{sql!r} did not fail")


def _raise(sqlstate: str) -> str:
    return f"DO $$ BEGIN RAISE EXCEPTION 'simulated' USING ERRCODE = '{sqlstate}'; END $$"


@pytest.mark.parametrize("sqlstate", ["40001", "40P01"])
def test_serialization_failure_and_deadlock_are_contended(pg_server: None, sqlstate: str) -> None:
    exc = _server_error(_raise(sqlstate))
    error = map_error(exc, kind="state", idempotent=False)
    assert isinstance(error, StatePersistenceError)
    assert error.reason == "contended" and error.retryable
    # A queue call raises what every backend's queue raises for trouble that passes.
    queue = map_error(exc, kind="queue", idempotent=False)
    assert isinstance(queue, QueueUnavailableError) and queue.retryable


def test_too_many_connections_is_pool_exhausted(pg_server: None) -> None:
    error = map_error(_server_error(_raise("53300")), kind="queue", idempotent=True)
    assert isinstance(error, PoolExhaustedError) and error.retryable


def test_a_missing_table_or_column_names_it(pg_server: None) -> None:
    table = map_error(_server_error("SELECT * FROM no_such_table"), kind="state", idempotent=True)
    assert isinstance(table, ConfigurationError)
    assert "no_such_table" in str(table) and "EXPECTED_SCHEMA" in str(table)
    column = map_error(_server_error("SELECT no_such_column"), kind="state", idempotent=True)
    assert isinstance(column, ConfigurationError) and "no_such_column" in str(column)


def test_a_statement_timeout_is_retryable(pg_server: None) -> None:
    with admin_connection() as conn:
        conn.execute("SET statement_timeout = '20ms'")
        with pytest.raises(psycopg.Error) as caught:
            conn.execute("SELECT pg_sleep(1)")
    error = map_error(caught.value, kind="state", idempotent=False)
    assert isinstance(error, StatePersistenceError) and error.retryable
    queue = map_error(caught.value, kind="queue", idempotent=False)
    assert isinstance(queue, QueueUnavailableError) and "timed out" in str(queue)


def test_refused_data_is_a_permanent_error(pg_server: None) -> None:
    error = map_error(_server_error("SELECT 'x'::int"), kind="state", idempotent=False)
    assert isinstance(error, StatePersistenceError)
    assert error.reason == "invalid" and not error.retryable


def test_a_lost_connection_is_unknown_for_a_write_and_retryable_for_a_read() -> None:
    lost = psycopg.OperationalError("server closed the connection unexpectedly")
    assert isinstance(map_error(lost, kind="state", idempotent=False), StoreOutcomeUnknown)
    assert isinstance(map_error(lost, kind="queue", idempotent=True), QueueUnavailableError)
    never_sent = NotSent("pool closed")
    assert map_error(never_sent, kind="state", idempotent=False).retryable  # type: ignore[union-attr]


def test_secrets_are_scrubbed_from_messages() -> None:
    lost = psycopg.OperationalError("connection to host=db password=s3cret failed")
    error = map_error(lost, kind="state", idempotent=True, secret="s3cret")
    assert error is not None and "s3cret" not in str(error)


@pytest.mark.parametrize(
    ("sqlstate", "error_class"),
    [
        ("53100", psycopg.errors.DiskFull),
        ("53200", psycopg.errors.OutOfMemory),
        ("57P01", psycopg.errors.AdminShutdown),
        ("57P02", psycopg.errors.CrashShutdown),
        ("57P03", psycopg.errors.CannotConnectNow),
    ],
)
def test_passing_server_trouble_is_retryable(
    pg_server: None, sqlstate: str, error_class: type[psycopg.Error]
) -> None:
    exc = _server_error(_raise(sqlstate))
    assert isinstance(exc, error_class)
    state = map_error(exc, kind="state", idempotent=False)
    assert isinstance(state, StatePersistenceError) and state.reason == "unavailable"
    assert state.retryable
    queue = map_error(exc, kind="queue", idempotent=False)
    assert isinstance(queue, QueueUnavailableError) and queue.retryable


def test_a_lock_not_available_is_contended(pg_tables: StateTables) -> None:
    runs = pg_tables.qualified(pg_tables.runs)
    with admin_connection() as holder, admin_connection() as waiter:
        holder.execute(
            f"INSERT INTO {runs} (tenant, run_id, blob, version, status, created_at, updated_at)"
            " VALUES ('acme', 'r', '{}', 1, 'running', 0, 0)"
        )
        with holder.transaction():
            holder.execute(f"SELECT 1 FROM {runs} WHERE run_id = 'r' FOR UPDATE")
            with pytest.raises(psycopg.errors.LockNotAvailable) as nowait:
                waiter.execute(f"SELECT 1 FROM {runs} WHERE run_id = 'r' FOR UPDATE NOWAIT")
            waiter.execute("SET lock_timeout = '10ms'")
            with pytest.raises(psycopg.errors.LockNotAvailable) as timed_out:
                waiter.execute(f"UPDATE {runs} SET status = 'x' WHERE run_id = 'r'")
    for exc in (nowait.value, timed_out.value):
        error = map_error(exc, kind="state", idempotent=False)
        assert isinstance(error, StatePersistenceError)
        assert error.reason == "contended" and error.retryable
        queue = map_error(exc, kind="queue", idempotent=False)
        assert isinstance(queue, QueueUnavailableError) and queue.retryable


def test_a_store_retries_a_lock_timeout_within_its_budget(pg_tables: StateTables) -> None:
    key = RunKey("acme", "r")
    runs = pg_tables.qualified(pg_tables.runs)
    options = "options='-c statement_timeout=30s -c lock_timeout=10ms'"
    conn = psycopg.connect(f"{PG_BASE_DSN} {options}", autocommit=True)
    store = PostgresStateStore(conn, tables=pg_tables, retry_attempts=2, close_source=True)
    with store, admin_connection() as holder:
        store.put_run(key, {}, expected_version=0)
        with holder.transaction():
            holder.execute(f"SELECT 1 FROM {runs} WHERE run_id = 'r' FOR UPDATE")
            with pytest.raises(StatePersistenceError) as caught:
                store.put_run(key, {"v": 2}, expected_version=1)
        assert caught.value.reason == "contended" and caught.value.retryable
        assert isinstance(caught.value.__cause__, psycopg.errors.LockNotAvailable)
        assert store.put_run(key, {"v": 2}, expected_version=1).version == 2


@pytest.fixture
def unprivileged_role(pg_tables: StateTables) -> Iterator[str]:
    """A role with USAGE on the test's schema and no privilege on its tables, dropped after."""
    role = f"ry_noperm_{uuid.uuid4().hex[:8]}"
    with admin_connection() as conn:
        conn.execute(f'CREATE ROLE "{role}" NOLOGIN')
        conn.execute(f'GRANT USAGE ON SCHEMA "{pg_tables.schema}" TO "{role}"')
    try:
        yield role
    finally:
        with admin_connection() as conn:
            conn.execute(f'REVOKE ALL ON SCHEMA "{pg_tables.schema}" FROM "{role}"')
            conn.execute(f'DROP ROLE "{role}"')


def test_insufficient_privilege_is_a_configuration_error_naming_the_object(
    pg_tables: StateTables, unprivileged_role: str
) -> None:
    conn = psycopg.connect(PG_DSN, autocommit=True)
    conn.execute(f'SET ROLE "{unprivileged_role}"')
    store = PostgresStateStore(conn, tables=pg_tables, close_source=True)
    with store, pytest.raises(ConfigurationError, match=pg_tables.runs) as caught:
        store.get_run(RunKey("acme", "r"))
    assert "permission denied" in str(caught.value)
    assert isinstance(caught.value.__cause__, psycopg.errors.InsufficientPrivilege)
    assert not caught.value.retryable
