"""SQLSTATE mapping, checked against errors the real server raises."""

from __future__ import annotations

import psycopg
import pytest
from runyard import (
    ConfigurationError,
    PoolExhaustedError,
    QueueUnavailableError,
    StatePersistenceError,
    StoreOutcomeUnknown,
)
from runyard._postgres_errors import NotSent, map_error

from tests.support.postgres_plugin import admin_connection


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
    error = map_error(_server_error(_raise(sqlstate)), kind="state", idempotent=False)
    assert isinstance(error, StatePersistenceError)
    assert error.reason == "contended" and error.retryable


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
