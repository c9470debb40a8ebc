"""The queue state machine: SqliteWorkQueue (on a file) must agree with the memory model step
by step."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from hypothesis.stateful import invariant, run_state_machine_as_test
from runyard.clock import ManualClock
from runyard.policy import QueuePolicy
from runyard.sqlite import SqliteWorkQueue

from tests.support.queue_machine import machine_runs, make_queue_machine


def test_sqlite_queue_agrees_with_the_memory_model(tmp_path: Path) -> None:
    files: list[Path] = []

    def factory(policy: QueuePolicy, clock: ManualClock) -> SqliteWorkQueue:
        files.append(tmp_path / f"machine-{len(files)}.db")
        return SqliteWorkQueue.open(files[-1], create_schema=True, clock=clock, policy=policy)

    class Machine(make_queue_machine(factory)):  # type: ignore[misc]
        @invariant()
        def tenants_with_ready_work_are_in_the_rotation(self) -> None:
            # The claim walks only the turns: a tenant with a ready item must have its turn, or
            # be parked until no later than that item is due (a claim puts it back then); no
            # tenant is in both tables.
            with closing(sqlite3.connect(files[-1])) as inspector:
                hidden = inspector.execute(
                    "SELECT DISTINCT w.tenant FROM runyard_work_items w WHERE w.state = 'ready'"
                    " AND NOT EXISTS (SELECT 1 FROM runyard_tenant_turns t"
                    " WHERE t.tenant = w.tenant)"
                    " AND NOT EXISTS (SELECT 1 FROM runyard_tenant_turns_parked p"
                    " WHERE p.tenant = w.tenant AND p.due_at <= w.available_at)"
                ).fetchall()
                twice = inspector.execute(
                    "SELECT tenant FROM runyard_tenant_turns"
                    " INTERSECT SELECT tenant FROM runyard_tenant_turns_parked"
                ).fetchall()
            assert (hidden, twice) == ([], [])

    run_state_machine_as_test(Machine, settings=machine_runs(25))
