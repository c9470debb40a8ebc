"""What one operation of each SQLite twin does in the SQLite benchmark (benchmarks/bench_sqlite.py):
put_run, patch_run, enqueue, claim+complete, an execution commit, and the batched enqueue_many
and claim_many+complete_many (BATCH items a call; their figures count items); and, for the
single-statement operations, the store's own SQL sent through bare ``sqlite3`` (SqlOnly)."""

from __future__ import annotations

import sqlite3
from typing import Any

from runyard import CounterDelta, RunKey
from runyard.executions.models import Event, Execution
from runyard.models import NewItem
from runyard.sqlite import (
    AsyncSqliteStateStore,
    AsyncSqliteStore,
    AsyncSqliteWorkQueue,
    SqliteStateStore,
    SqliteStore,
    SqliteTables,
    SqliteWorkQueue,
)
from runyard.sqlite.schema import DATABASE_NOW
from runyard.sqlite.statements_queue import queue_statements
from runyard.sqlite.statements_state import state_statements

__all__ = [
    "BATCH",
    "CLAIM_MANY",
    "ENQUEUE_MANY",
    "OPERATIONS",
    "SQL_ONLY",
    "AsyncOperations",
    "SqlOnly",
    "SyncOperations",
]

BATCH = 16  # items per call of the batched operations (their figures count items)
ENQUEUE_MANY, CLAIM_MANY = f"enqueue_many ({BATCH})", f"claim_many+complete_many ({BATCH})"
OPERATIONS = (
    "put_run",
    "patch_run",
    "enqueue",
    "claim+complete",
    "execution commit",
    ENQUEUE_MANY,
    CLAIM_MANY,
)


class SyncOperations:
    """``k`` operations of the sync twin per call."""

    def __init__(self, path: str, operation: str, me: int) -> None:
        self.operation, self.me, self.done = operation, me, 0
        self.key = RunKey("bench", f"run-{me}")
        self.exe = Execution(id=f"exe-{me}", definition_id="bench")
        self.state = SqliteStateStore.open(path)
        self.queue = SqliteWorkQueue.open(path)
        self.store = SqliteStore.open(path)

    def run(self, k: int) -> None:
        if self.operation in (ENQUEUE_MANY, CLAIM_MANY):
            return self._run_batched(k)
        for _ in range(k):
            self.done += 1
            i = self.done
            if self.operation == "put_run":
                self.state.put_run(self.key, {"step": i}, expected_version=i)
            elif self.operation == "patch_run":
                self.state.patch_run(self.key, CounterDelta(input_tokens=1, iterations=1))
            elif self.operation == "enqueue":
                self.queue.enqueue(f"tenant-{i % 16}", {"i": i})
            elif self.operation == "claim+complete":
                lease = self.queue.claim(f"w{self.me}")
                assert lease is not None
                self.queue.complete(lease.tenant, lease.item_id, token=lease.token)
            else:
                self.exe.context["i"] = i
                event = Event(id=f"e-{self.me}-{i}", name="tick")
                self.store.commit(self.exe, emits=[("target", event)])

    def _run_batched(self, k: int) -> None:
        """``k`` items in calls of up to BATCH."""
        while k > 0:
            size = min(BATCH, k)
            k, first, self.done = k - size, self.done, self.done + size
            if self.operation == ENQUEUE_MANY:
                items = [NewItem(payload={"i": first + j}) for j in range(size)]
                self.queue.enqueue_many(f"tenant-{first % 16}", items)
            else:
                leases = self.queue.claim_many(f"w{self.me}", limit=size)
                assert len(leases) == size
                assert self.queue.complete_many(leases) == [None] * size

    def close(self) -> None:
        for store in (self.state, self.queue, self.store):
            store.close()


class AsyncOperations:
    """``k`` operations of the async twin per call."""

    def __init__(self, operation: str, me: int) -> None:
        self.operation, self.me, self.done = operation, me, 0
        self.key = RunKey("bench", f"run-{me}")
        self.exe = Execution(id=f"exe-{me}", definition_id="bench")

    async def open(self, path: str) -> None:
        self.state = await AsyncSqliteStateStore.open(path)
        self.queue = await AsyncSqliteWorkQueue.open(path)
        self.store = await AsyncSqliteStore.open(path)

    async def run(self, k: int) -> None:
        if self.operation in (ENQUEUE_MANY, CLAIM_MANY):
            return await self._run_batched(k)
        for _ in range(k):
            self.done += 1
            i = self.done
            if self.operation == "put_run":
                await self.state.put_run(self.key, {"step": i}, expected_version=i)
            elif self.operation == "patch_run":
                await self.state.patch_run(self.key, CounterDelta(input_tokens=1, iterations=1))
            elif self.operation == "enqueue":
                await self.queue.enqueue(f"tenant-{i % 16}", {"i": i})
            elif self.operation == "claim+complete":
                lease = await self.queue.claim(f"w{self.me}")
                assert lease is not None
                await self.queue.complete(lease.tenant, lease.item_id, token=lease.token)
            else:
                self.exe.context["i"] = i
                event = Event(id=f"e-{self.me}-{i}", name="tick")
                await self.store.commit(self.exe, emits=[("target", event)])

    async def _run_batched(self, k: int) -> None:
        """``k`` items in calls of up to BATCH."""
        while k > 0:
            size = min(BATCH, k)
            k, first, self.done = k - size, self.done, self.done + size
            if self.operation == ENQUEUE_MANY:
                items = [NewItem(payload={"i": first + j}) for j in range(size)]
                await self.queue.enqueue_many(f"tenant-{first % 16}", items)
            else:
                leases = await self.queue.claim_many(f"w{self.me}", limit=size)
                assert len(leases) == size
                assert await self.queue.complete_many(leases) == [None] * size

    async def close(self) -> None:
        for store in (self.state, self.queue, self.store):
            await store.aclose()


SQL_ONLY = ("put_run", "patch_run", "enqueue")


class SqlOnly:
    """``k`` single-statement operations as the sync twin sends them (the same SQL text, the
    same parameters, ``BEGIN IMMEDIATE`` ... ``COMMIT``, the run read back after a run write,
    the time pinned before an enqueue) on a bare ``sqlite3`` connection with the stores'
    settings, and nothing of runyard's Python around them: the floor a twin's operation
    cannot go under."""

    def __init__(self, path: str, operation: str, me: int) -> None:
        if operation not in SQL_ONLY:
            raise ValueError(f"no SQL-only form of {operation!r}; one of {SQL_ONLY}")
        self.operation, self.me, self.done = operation, me, 0
        self.conn = sqlite3.connect(path, timeout=30, isolation_level="IMMEDIATE")
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = FULL")
        statements = {**state_statements(SqliteTables()), **queue_statements(SqliteTables())}
        name = {"put_run": "update_run", "patch_run": "patch_run", "enqueue": "enqueue"}
        self.sql, self.read = statements[name[operation]], statements["get_run"]

    def _params(self, i: int) -> dict[str, Any]:
        if self.operation == "put_run":
            return {
                "tenant": "bench",
                "run_id": f"run-{self.me}",
                "blob": f'{{"step":{i}}}',
                "session_id": None,
                "now": None,
                "status": None,
                "expected": i,
            }
        if self.operation == "patch_run":
            counters = ("input_tokens", "output_tokens", "cost_micros", "iterations", "cursor")
            delta = dict.fromkeys(counters, 0) | {"input_tokens": 1, "iterations": 1}
            return {"tenant": "bench", "run_id": f"run-{self.me}", "status": None, "now": None} | (
                delta
            )
        return {
            "tenant": f"tenant-{i % 16}",
            "item_id": f"{self.me:04d}{i:028x}",
            "payload": f'{{"i":{i}}}',
            "priority": 0,
            "delay_seconds": 0.0,
            "run_at": None,
            "dedupe_key": None,
            "max_attempts": None,
            "now": None,
        }

    def run(self, k: int) -> None:
        for _ in range(k):
            self.done += 1
            params = self._params(self.done)
            if self.operation == "enqueue":
                # The queue begins explicitly (the state store not), pins the time and reads
                # the insert's change count: its statement returns no rows.
                self.conn.execute("BEGIN IMMEDIATE")
                params["now"] = now = self.conn.execute(f"SELECT {DATABASE_NOW}").fetchone()[0]
                params["available_at"] = now + params["delay_seconds"]  # rows.due_at's, no run_at
                assert self.conn.execute(self.sql, params).rowcount == 1
            else:
                # The run writes return nothing: the store reads the run back before COMMIT.
                assert self.conn.execute(self.sql, params).rowcount == 1
                assert self.conn.execute(self.read, params).fetchall()
            self.conn.commit()

    def close(self) -> None:
        self.conn.close()
