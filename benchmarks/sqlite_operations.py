"""What one operation of each SQLite twin does in the SQLite benchmark (benchmarks/bench_sqlite.py):
put_run, patch_run, enqueue, claim+complete, an execution commit, and the batched enqueue_many
and claim_many+complete_many (BATCH items a call; their figures count items)."""

from __future__ import annotations

from runyard import CounterDelta, RunKey
from runyard.executions.models import Event, Execution
from runyard.models import NewItem
from runyard.sqlite import (
    AsyncSqliteStateStore,
    AsyncSqliteStore,
    AsyncSqliteWorkQueue,
    SqliteStateStore,
    SqliteStore,
    SqliteWorkQueue,
)

__all__ = ["BATCH", "CLAIM_MANY", "ENQUEUE_MANY", "OPERATIONS", "AsyncOperations", "SyncOperations"]

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
