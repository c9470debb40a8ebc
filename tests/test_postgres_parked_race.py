"""An enqueue racing a claim's park step: the enqueue waits for the rotation row the park
holds; when the park commits (the row gone, the tenant parked), the enqueue puts the tenant
back with its parked turn, read with a fresh snapshot. With the enqueue's snapshot (taken
before the park committed) it missed the parked row: the tenant joined at the back, lost its
turn, and stayed parked too, where a claim putting it back would wait on the enqueue's
transaction."""

from __future__ import annotations

import threading
import time

import psycopg
from runyard import ManualClock
from runyard.models import NewItem
from runyard.postgres import StateTables

from tests._sync.postgres_support import open_queue
from tests.support.postgres_plugin import PG_DSN, admin_connection

T0 = 1_700_000_000.0


def _wait_for_lock(pid: int, seconds: float = 10.0) -> None:
    """Until the backend ``pid`` waits on a lock (pg_stat_activity), at most ``seconds``."""
    deadline = time.monotonic() + seconds
    with admin_connection() as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
            ).fetchone()
            if row is not None and row[0] == "Lock":
                return
            time.sleep(0.01)
    raise AssertionError(f"backend {pid} did not wait on a lock within {seconds} s")


def test_an_enqueue_that_waited_on_a_park_puts_the_tenant_back_with_its_turn(
    pg_tables: StateTables,
) -> None:
    t, clock = pg_tables, ManualClock(T0)
    queue = open_queue(t, clock)
    park = psycopg.connect(PG_DSN)
    caller = psycopg.connect(PG_DSN)
    try:
        queue.enqueue_many("zz", [NewItem(payload={"n": k}) for k in range(5)])
        for _ in range(2):
            assert queue.claim("w") is not None  # the claim counter is at 2
        queue.enqueue("x", {"n": "x-later"}, delay_seconds=10)  # joins with turn 2
        with psycopg.connect(PG_DSN) as bound_conn, bound_conn.transaction():
            assert queue.bound(bound_conn).claim("w") is not None  # bound: parks nothing
        with admin_connection() as conn:
            turns = dict(conn.execute(f"SELECT tenant, turn FROM {t.qualified(t.turns)}"))
        assert turns == {"x": 2, "zz": 3}
        # A claim's park step, held open as the claim statement holds it until it commits.
        park_fn = t.qualified(t.turns + "_park")
        assert park.execute(f"SELECT {park_fn}('x', %s)", (T0,)).fetchone() == (True,)
        done = threading.Event()

        def enqueue() -> None:
            queue.bound(caller).enqueue("x", {"n": "x-now"})
            done.set()

        thread = threading.Thread(target=enqueue)
        thread.start()
        _wait_for_lock(caller.info.backend_pid)
        assert not done.is_set()
        park.commit()
        thread.join(10)
        assert done.is_set()
        caller.commit()
        with admin_connection() as conn:
            turns = dict(conn.execute(f"SELECT tenant, turn FROM {t.qualified(t.turns)}"))
            parked = conn.execute(f"SELECT tenant FROM {t.qualified(t.turns_parked)}").fetchall()
        assert turns == {"x": 2, "zz": 3} and parked == []
        lease = queue.claim("w")
        assert lease is not None and lease.item.payload == {"n": "x-now"}
    finally:
        park.close()
        caller.close()
        queue.close()
