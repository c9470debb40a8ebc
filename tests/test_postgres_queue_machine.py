"""The queue state machine: PostgresWorkQueue must agree with the memory model step by step."""

from __future__ import annotations

from hypothesis.stateful import invariant, run_state_machine_as_test
from runyard.clock import ManualClock
from runyard.policy import QueuePolicy
from runyard.postgres import PostgresWorkQueue, StateTables, schema_sql

from tests._sync.postgres_support import open_queue
from tests.support.postgres_plugin import admin_connection, fresh_schema
from tests.support.queue_machine import machine_runs, make_queue_machine


def test_postgres_queue_agrees_with_the_memory_model(pg_server: None) -> None:
    schemas: list[str] = []

    def factory(policy: QueuePolicy, clock: ManualClock) -> PostgresWorkQueue:
        tables = StateTables(schema=fresh_schema())
        schemas.append(str(tables.schema))
        with admin_connection() as conn:
            conn.execute(f'CREATE SCHEMA "{tables.schema}"')
            conn.execute(schema_sql(tables))
        return open_queue(tables, clock, policy, max_size=2)

    inspector = admin_connection()

    class Machine(make_queue_machine(factory)):  # type: ignore[misc]
        @invariant()
        def tenants_with_ready_work_are_in_the_rotation(self) -> None:
            # The claim walks only the rotation: a tenant with an item in state 'ready' must
            # have its row there, or be parked until no later than that item is due (a claim
            # puts it back then), after every step.
            tables: StateTables = self.queue.tables
            work, turns = tables.qualified(tables.work), tables.qualified(tables.turns)
            parked = tables.qualified(tables.turns_parked)
            hidden = inspector.execute(
                f"SELECT DISTINCT w.tenant FROM {work} w WHERE w.state = 'ready'"
                f" AND NOT EXISTS (SELECT 1 FROM {turns} t WHERE t.tenant = w.tenant)"
                f" AND NOT EXISTS (SELECT 1 FROM {parked} p WHERE p.tenant = w.tenant"
                "                  AND p.due_at <= w.available_at)"
            ).fetchall()
            assert hidden == []

    try:
        run_state_machine_as_test(Machine, settings=machine_runs(25))
    finally:
        inspector.close()
        with admin_connection() as conn:
            for schema in schemas:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
