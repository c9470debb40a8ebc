"""The execution state machine against the memory twin, the Redis and PostgreSQL stores."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test
from runyard import MemoryExecutionStore
from runyard.clock import ManualClock
from runyard.postgres import PostgresExecutionStore, StateTables, schema_sql
from runyard.redis import RedisStore, RedisStoreSettings

from tests._sync.postgres_support import open_pool
from tests.support.execution_machine import make_execution_machine
from tests.support.postgres_plugin import admin_connection, fresh_schema
from tests.support.redis_plugin import Clients, RedisTarget, fresh_namespace

RUNS = settings(
    max_examples=30, stateful_step_count=30, deadline=None, derandomize=True, database=None
)


def test_memory_execution_store_agrees_with_the_model() -> None:
    run_state_machine_as_test(
        make_execution_machine(
            lambda clock, trace_max: MemoryExecutionStore(clock=clock, trace_max=trace_max)
        ),
        settings=RUNS,
    )


@pytest.mark.parametrize("lane", ["fake_redis_target", "local_redis_target"])
def test_redis_execution_store_agrees_with_the_model(
    lane: str, request: pytest.FixtureRequest
) -> None:
    target: RedisTarget = request.getfixturevalue(lane)
    namespaces: list[str] = []

    def factory(clock: ManualClock, trace_max: int) -> RedisStore:
        config = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
        namespaces.append(config.namespace)
        return RedisStore(
            Clients.for_target(target),
            clock=clock,
            settings=config,
            shards=3,
            trace_max=trace_max,
            owns_client=True,
        )

    try:
        run_state_machine_as_test(make_execution_machine(factory), settings=RUNS)
    finally:
        for namespace in namespaces:
            target.purge(namespace)


class StoreThatSkipsTheCheck(MemoryExecutionStore):
    """A broken store: a commit loads the stored version first, so a stale commit wins."""

    def commit(self, exe, **kwargs):  # type: ignore[no-untyped-def]
        stored = self.load(exe.id)
        exe.version = stored.version if stored is not None else 0
        return super().commit(exe, **kwargs)


def _stale_commit_story(machine: Any) -> None:
    """Create exe-a at version 1, then commit it again from version 0."""
    quiet = dict(emits=0, mark=False, timer=None, path="wait", delay=0.0, spawn=False, trace=False)
    machine.commit(execution_id="exe-a", stale=False, status="running", **quiet)
    machine.commit(execution_id="exe-a", stale=True, status="done", **quiet)
    machine.processed_marks_agree()


def test_the_stale_commit_story_passes_on_a_correct_store() -> None:
    machine = make_execution_machine(
        lambda clock, trace_max: MemoryExecutionStore(clock=clock, trace_max=trace_max)
    )()
    _stale_commit_story(machine)
    machine.teardown()


def test_the_machine_catches_a_store_that_accepts_stale_commits() -> None:
    machine = make_execution_machine(
        lambda clock, trace_max: StoreThatSkipsTheCheck(clock=clock, trace_max=trace_max)
    )()
    with pytest.raises(AssertionError, match=r"model vs store.*StoreConflict.*'ok'"):
        _stale_commit_story(machine)
    machine.teardown()


def test_postgres_execution_store_agrees_with_the_model(pg_server: None) -> None:
    schemas: list[str] = []

    def factory(clock: ManualClock, trace_max: int) -> PostgresExecutionStore:
        schema = fresh_schema()
        tables = StateTables(schema=schema)
        schemas.append(schema)
        with admin_connection() as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
            conn.execute(schema_sql(tables))
        return PostgresExecutionStore.open(
            open_pool(2), tables=tables, clock=clock, trace_max=trace_max, close_source=True
        )

    try:
        run_state_machine_as_test(
            make_execution_machine(factory),
            settings=settings(
                max_examples=20,
                stateful_step_count=30,
                deadline=None,
                derandomize=True,
                database=None,
            ),
        )
    finally:
        with admin_connection() as conn:
            for schema in schemas:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
