"""Opening pools and stores on a test's schema."""

from __future__ import annotations

from typing import Any

from psycopg_pool import AsyncConnectionPool
from runyard import ManualClock, QueuePolicy
from runyard.executions import Event, SpawnIntent, TimerOp, TraceStep
from runyard.postgres import (
    AsyncPostgresExecutionStore,
    AsyncPostgresStateStore,
    AsyncPostgresWorkQueue,
    AsyncPsycopgExecutor,
    StateTables,
)

from tests.support.postgres_plugin import PG_DSN

__all__ = [
    "T0",
    "CountingExecutor",
    "full_commit_kwargs",
    "open_executions",
    "open_pool",
    "open_queue",
    "open_store",
]

T0 = 1_700_000_000.0  # the fire time full_commit_kwargs schedules its timers from


async def open_pool(max_size: int = 10, **kwargs: Any) -> AsyncConnectionPool[Any]:
    """An open pool on the test database, with a statement timeout set."""
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        PG_DSN, min_size=1, max_size=max_size, open=False, **kwargs
    )
    await pool.open(wait=True)
    return pool


async def open_store(
    tables: StateTables, clock: ManualClock | None = None, max_size: int = 10, **options: Any
) -> AsyncPostgresStateStore:
    """A verified state store that owns its pool (``options`` go to the store)."""
    return await AsyncPostgresStateStore.open(
        await open_pool(max_size), tables=tables, clock=clock, close_source=True, **options
    )


async def open_queue(
    tables: StateTables,
    clock: ManualClock | None = None,
    policy: QueuePolicy | None = None,
    max_size: int = 10,
) -> AsyncPostgresWorkQueue:
    """A verified work queue that owns its pool."""
    return await AsyncPostgresWorkQueue.open(
        await open_pool(max_size), tables=tables, clock=clock, policy=policy, close_source=True
    )


async def open_executions(
    tables: StateTables, clock: ManualClock | None = None, **options: Any
) -> AsyncPostgresExecutionStore:
    """A verified execution store that owns its pool."""
    return await AsyncPostgresExecutionStore.open(
        await open_pool(), tables=tables, clock=clock, close_source=True, **options
    )


def full_commit_kwargs(n: int) -> dict[str, Any]:
    """The keywords of a commit that writes every kind of entry (the full path), named by ``n``."""
    return {
        "emits": [("t", Event(id=f"out-{n}", name="go", data={"n": n}))],
        "processed_event_id": f"in-{n}",
        "timers": [TimerOp.schedule("wait", T0 + n)],
        "spawns": [SpawnIntent(child_id=f"kid-{n}")],
        "trace": TraceStep(event_id=f"in-{n}", event_name="go"),
    }


class CountingExecutor:
    """The real executor, keeping the statements (round trips) that reach the server."""

    def __init__(self, inner: AsyncPsycopgExecutor) -> None:
        self.inner = inner
        self.statements: list[str] = []
        self.arguments: list[tuple[Any, ...]] = []  # each statement's, in order

    @property
    def sent(self) -> int:
        """How many statements were sent."""
        return len(self.statements)

    async def fetch(self, statement: str, *args: Any) -> Any:
        self.statements.append(statement)
        self.arguments.append(args)
        return await self.inner.fetch(statement, *args)

    async def aclose(self) -> None:
        await self.inner.aclose()
