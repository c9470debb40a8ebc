"""put_run, put_session, append_event and finalize are one statement each: create, update and
refusal alike."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
import pytest
from runyard import LeaseLostError, ManualClock, RunKey, StateConflictError
from runyard.postgres import PostgresStateStore, PsycopgExecutor, StateTables

from tests.support.postgres_plugin import PG_DSN, admin_connection


class CountingExecutor:
    """Counts the statements (round trips) sent through it."""

    def __init__(self, inner: PsycopgExecutor) -> None:
        self.inner = inner
        self.sent = 0

    def fetch(self, statement: str, *args: Any) -> Sequence[Sequence[Any]]:
        self.sent += 1
        return self.inner.fetch(statement, *args)

    def close(self) -> None:
        self.inner.close()


@pytest.fixture
def counted(pg_tables: StateTables) -> Iterator[tuple[PostgresStateStore, CountingExecutor]]:
    executor = CountingExecutor(PsycopgExecutor(psycopg.connect(PG_DSN, autocommit=True)))
    store = PostgresStateStore(executor, tables=pg_tables, clock=ManualClock(), close_source=True)
    with store:
        yield store, executor


def _sent(executor: CountingExecutor, call: Any) -> tuple[int, Any]:
    before = executor.sent
    try:
        result = call()
    except Exception as exc:
        result = exc
    return executor.sent - before, result


def test_put_run_is_one_round_trip_written_or_refused(
    counted: tuple[PostgresStateStore, CountingExecutor],
) -> None:
    store, executor = counted
    key = RunKey("acme", "r")
    sent, created = _sent(executor, lambda: store.put_run(key, {"v": 1}, expected_version=0))
    assert sent == 1 and created.version == 1 and created.status == "running"
    sent, updated = _sent(
        executor, lambda: store.put_run(key, {"v": 2}, expected_version=1, status="done")
    )
    assert sent == 1 and (updated.version, updated.status, updated.blob) == (2, "done", {"v": 2})
    sent, stale = _sent(executor, lambda: store.put_run(key, {}, expected_version=1))
    assert sent == 1 and isinstance(stale, StateConflictError)
    assert (stale.expected, stale.actual) == (1, 2)
    sent, exists = _sent(executor, lambda: store.put_run(key, {}, expected_version=0))
    assert sent == 1 and isinstance(exists, StateConflictError)
    assert (exists.expected, exists.actual) == (0, 2)
    sent, missing = _sent(
        executor, lambda: store.put_run(RunKey("acme", "nope"), {}, expected_version=3)
    )
    assert sent == 1 and isinstance(missing, StateConflictError)
    assert (missing.expected, missing.actual) == (3, 0)


def test_a_fenced_put_run_is_one_round_trip_written_or_refused(
    counted: tuple[PostgresStateStore, CountingExecutor],
) -> None:
    store, executor = counted
    key = RunKey("acme", "r")
    lease = store.acquire_lease(key, "h1", ttl_seconds=30)
    sent, created = _sent(
        executor, lambda: store.put_run(key, {}, expected_version=0, fence=lease.epoch)
    )
    assert sent == 1 and created.version == 1
    sent, stale = _sent(
        executor, lambda: store.put_run(key, {}, expected_version=1, fence=lease.epoch + 1)
    )
    assert sent == 1 and isinstance(stale, LeaseLostError) and stale.reason == "taken"
    store.clock.advance(31)  # type: ignore[attr-defined]
    sent, lapsed = _sent(
        executor, lambda: store.put_run(key, {}, expected_version=1, fence=lease.epoch)
    )
    assert sent == 1 and isinstance(lapsed, LeaseLostError) and lapsed.reason == "expired"
    # The version is checked first, as the memory backend does.
    sent, both = _sent(
        executor, lambda: store.put_run(key, {}, expected_version=7, fence=lease.epoch)
    )
    assert sent == 1 and isinstance(both, StateConflictError) and both.actual == 1


def test_put_session_is_one_round_trip_written_or_refused(
    counted: tuple[PostgresStateStore, CountingExecutor],
) -> None:
    store, executor = counted
    sent, created = _sent(
        executor, lambda: store.put_session("acme", "s", {"v": 1}, expected_version=0)
    )
    assert sent == 1 and created.version == 1
    sent, updated = _sent(
        executor, lambda: store.put_session("acme", "s", {"v": 2}, expected_version=1)
    )
    assert sent == 1 and updated.version == 2 and updated.created_at == created.created_at
    sent, stale = _sent(executor, lambda: store.put_session("acme", "s", {}, expected_version=1))
    assert sent == 1 and isinstance(stale, StateConflictError)
    assert (stale.expected, stale.actual) == (1, 2)
    sent, exists = _sent(executor, lambda: store.put_session("acme", "s", {}, expected_version=0))
    assert sent == 1 and isinstance(exists, StateConflictError) and exists.actual == 2


def test_append_event_is_one_round_trip_with_or_without_an_event_id(
    counted: tuple[PostgresStateStore, CountingExecutor],
) -> None:
    store, executor = counted
    key = RunKey("acme", "r")
    store.put_run(key, {}, expected_version=0)
    sent, first = _sent(executor, lambda: store.append_event(key, "step", {"n": 1}))
    assert sent == 1 and first.seq == 1
    sent, second = _sent(executor, lambda: store.append_event(key, "step", {"n": 2}, event_id="e2"))
    assert sent == 1 and second.seq == 2
    # The same event_id and content again: the stored event, in the same one statement.
    sent, again = _sent(executor, lambda: store.append_event(key, "step", {"n": 2}, event_id="e2"))
    assert sent == 1 and again == second
    assert [(e.seq, e.event_id) for e in store.read_events(key)] == [(1, None), (2, "e2")]


def test_finalize_is_one_round_trip_with_or_without_an_event_id(
    counted: tuple[PostgresStateStore, CountingExecutor],
) -> None:
    store, executor = counted
    plain, named = RunKey("acme", "a"), RunKey("acme", "b")
    for key in (plain, named):
        store.put_run(key, {}, expected_version=0)
    store.append_event(named, "step", {})
    sent, ended = _sent(
        executor,
        lambda: store.finalize(plain, status="completed", event_type="done", event_data={}),
    )
    assert sent == 1 and (ended.status, ended.version) == ("completed", 2)
    sent, failed = _sent(
        executor,
        lambda: store.finalize(
            named, status="error", event_type="crashed", event_data={"e": 1}, event_id="end"
        ),
    )
    assert sent == 1 and (failed.status, failed.version) == ("error", 2)
    events = store.read_events(named)
    assert [(e.seq, e.type, e.event_id, e.terminal) for e in events] == [
        (1, "step", None, False),
        (2, "crashed", "end", True),
    ]


def _wait_until_blocked(application_name: str) -> None:
    with admin_connection() as conn:
        for _ in range(1000):
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE application_name = %s AND wait_event_type = 'Lock'",
                (application_name,),
            ).fetchone()
            if row is not None and row[0]:
                return
            time.sleep(0.01)
    raise AssertionError("the second writer never waited for the first")


@pytest.mark.parametrize("expected", [0, 1])
def test_a_write_that_loses_a_race_reports_the_winners_version(
    pg_tables: StateTables, expected: int
) -> None:
    key = RunKey("acme", "r")
    name = "runyard-race-test"
    conn = psycopg.connect(f"{PG_DSN} application_name={name}", autocommit=True)
    store = PostgresStateStore(conn, tables=pg_tables, close_source=True)
    with store, psycopg.connect(PG_DSN) as winner_conn:
        if expected:
            store.put_run(key, {"v": 1}, expected_version=0)
        winner = store.bound(winner_conn)
        winner.put_run(key, {"v": "winner"}, expected_version=expected)  # not committed yet
        outcome: list[BaseException] = []

        def lose() -> None:
            try:
                store.put_run(key, {"v": "loser"}, expected_version=expected)
            except BaseException as exc:
                outcome.append(exc)

        loser = threading.Thread(target=lose)
        loser.start()
        _wait_until_blocked(name)
        winner_conn.commit()
        loser.join()
        assert len(outcome) == 1 and isinstance(outcome[0], StateConflictError)
        assert (outcome[0].expected, outcome[0].actual) == (expected, expected + 1)
        stored = store.get_run(key)
        assert stored is not None and stored.blob == {"v": "winner"}
