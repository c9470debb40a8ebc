"""The queue state machine: PostgresWorkQueue must agree with the memory model step by step."""

from __future__ import annotations

from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test
from runyard.clock import ManualClock
from runyard.policy import QueuePolicy
from runyard.postgres import PostgresWorkQueue, StateTables, schema_sql

from tests._sync.postgres_support import open_queue
from tests.support.postgres_plugin import admin_connection, fresh_schema
from tests.support.queue_machine import make_queue_machine


def test_postgres_queue_agrees_with_the_memory_model(pg_server: None) -> None:
    schemas: list[str] = []

    def factory(policy: QueuePolicy, clock: ManualClock) -> PostgresWorkQueue:
        tables = StateTables(schema=fresh_schema())
        schemas.append(tables.schema)
        with admin_connection() as conn:
            conn.execute(f'CREATE SCHEMA "{tables.schema}"')
            conn.execute(schema_sql(tables))
        return open_queue(tables, clock, policy, max_size=2)

    try:
        run_state_machine_as_test(
            make_queue_machine(factory),
            settings=settings(max_examples=25, stateful_step_count=30, deadline=None),
        )
    finally:
        with admin_connection() as conn:
            for schema in schemas:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
