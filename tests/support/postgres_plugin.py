"""PostgreSQL fixtures for both twins: the machine's server, and a fresh schema per test.

Each test that asks for ``pg_tables`` gets its own schema with runyard's tables applied from
``schema_sql`` (the tests apply the DDL; the library never does), dropped afterwards.
Under ``CI=true`` a missing server fails the test instead of skipping it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from runyard.postgres import StateTables, schema_sql

from tests.support.servers import require_server

__all__ = ["PG_DSN", "PG_HOST", "PG_PORT", "admin_connection", "fresh_schema"]

PG_HOST = os.environ.get("RUNYARD_TEST_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("RUNYARD_TEST_PG_PORT", "5432"))
PG_BASE_DSN = f"host={PG_HOST} port={PG_PORT} user=postgres dbname=test"
# The stores refuse a connection without statement_timeout, so the tests' connections set one.
PG_DSN = f"{PG_BASE_DSN} options='-c statement_timeout=30s'"


def admin_connection() -> psycopg.Connection[tuple[object, ...]]:
    """A sync autocommit connection for setting up and inspecting a test's schema."""
    return psycopg.connect(PG_DSN, autocommit=True)


def fresh_schema() -> str:
    """A schema name no other test uses."""
    return f"ry_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def pg_server() -> None:
    """Skip (or, under CI, fail) when PostgreSQL is not reachable."""
    require_server("PostgreSQL", PG_HOST, PG_PORT)


@pytest.fixture
def pg_schema(pg_server: None) -> Iterator[str]:
    """An empty schema of its own for the test, dropped afterwards."""
    name = fresh_schema()
    with admin_connection() as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    try:
        yield name
    finally:
        with admin_connection() as conn:
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')


@pytest.fixture
def pg_tables(pg_schema: str) -> StateTables:
    """runyard's tables, applied to the test's own schema."""
    tables = StateTables(schema=pg_schema)
    with admin_connection() as conn:
        conn.execute(schema_sql(tables))
    return tables
