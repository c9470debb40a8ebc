"""AsyncYard: a state store, a work queue and an execution store opened from one URL.

The scheme table ``OPENERS`` maps each URL scheme to the coroutine that opens its stores; a
backend is added with one entry (``OPENERS["sqlite"] = open_sqlite``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from runyard._async.closing import AsyncClosing
from runyard._async.execution_protocol import AsyncExecutionStore
from runyard._async.protocols import AsyncStateStore, AsyncWorkQueue
from runyard.clock import Clock
from runyard.policy import QueuePolicy
from runyard.yard import (
    YardURL,
    flag,
    parse_yard_url,
    postgres_settings,
    redis_settings,
    refuse_unknown,
    sqlite_options,
    sqlite_path,
)

__all__ = ["OPENERS", "AsyncYard", "Opener", "YardOptions"]


@dataclass(frozen=True)
class YardOptions:
    """What from_url passes every opener besides the URL."""

    clock: Clock | None = None
    policy: QueuePolicy | None = None


class AsyncYard(AsyncClosing):
    """The three stores of one backend, and what closes them (``aclose()``, ``async with``)."""

    def __init__(
        self,
        state: AsyncStateStore,
        queue: AsyncWorkQueue,
        executions: AsyncExecutionStore,
        *,
        url: YardURL | None = None,
        closers: Sequence[Callable[[], Awaitable[None]]] = (),
    ) -> None:
        self.state, self.queue, self.executions = state, queue, executions
        self.url = url
        self._closers = list(closers)

    def __repr__(self) -> str:
        shown = self.url.redacted if self.url is not None else None
        return f"{type(self).__name__}({shown!r})"

    @classmethod
    async def from_url(
        cls,
        url: str | None = None,
        *,
        clock: Clock | None = None,
        policy: QueuePolicy | None = None,
    ) -> AsyncYard:
        """Open the stores ``url`` names (``$RUNYARD_URL`` when None), running each backend's
        checks (preflight, verify).

        Raises InvalidArgumentError (a ValueError) for an unknown scheme (naming the known
        ones) and ConfigurationError for a bad option or a server unfit to use; no error shows
        the password.
        """
        parsed = parse_yard_url(url, OPENERS)
        return await OPENERS[parsed.scheme](parsed, YardOptions(clock=clock, policy=policy))

    async def aclose(self) -> None:
        """Close the stores and the connections the yard opened, last opened first."""
        closers, self._closers = self._closers, []
        for close in reversed(closers):
            await close()


async def _open_memory(url: YardURL, options: YardOptions) -> AsyncYard:
    from runyard._async.memory import (
        AsyncMemoryExecutionStore,
        AsyncMemoryStateStore,
        AsyncMemoryWorkQueue,
    )

    _, given = url.split({"live_updates"})
    refuse_unknown((name for name, _ in url.query), {"live_updates"}, "memory")
    state = AsyncMemoryStateStore(clock=options.clock, live_updates=flag(given, "live_updates"))
    queue = AsyncMemoryWorkQueue(clock=options.clock, policy=options.policy)
    return AsyncYard(state, queue, AsyncMemoryExecutionStore(clock=options.clock), url=url)


async def _open_redis(url: YardURL, options: YardOptions) -> AsyncYard:
    from runyard._async.redis import (
        AsyncRedisStateStore,
        AsyncRedisStore,
        AsyncRedisWorkQueue,
    )
    from runyard._async.redis.scripts import client_from_url
    from runyard.redis.common import state_unavailable

    dsn, settings, live = redis_settings(url)
    client = client_from_url(dsn, settings, state_unavailable)
    # Closed last opened first: the state store (its live updates' own connection, when the
    # URL asks for them), then the client the stores share.
    closers: list[Callable[[], Awaitable[None]]] = [client.aclose]
    try:
        state = AsyncRedisStateStore(
            client, clock=options.clock, settings=settings, live_updates=live
        )
        closers.append(state.aclose)
        await state.preflight()
        queue = await AsyncRedisWorkQueue.open(
            client, clock=options.clock, settings=settings, policy=options.policy
        )
        closers.append(queue.aclose)  # the client is the yard's: each store is marked closed
        executions = await AsyncRedisStore.open(client, clock=options.clock, settings=settings)
        closers.append(executions.aclose)
    except BaseException:
        for close in reversed(closers):
            await close()
        raise
    return AsyncYard(state, queue, executions, url=url, closers=closers)


async def _open_postgres(url: YardURL, options: YardOptions) -> AsyncYard:
    from runyard._async.postgres import (
        AsyncPostgresExecutionStore,
        AsyncPostgresStateStore,
        AsyncPostgresWorkQueue,
    )

    settings, live = postgres_settings(url)
    # The state store opens (and owns) the pool; the queue and execution store share it.
    state = await AsyncPostgresStateStore.from_settings(
        settings, clock=options.clock, live_updates=live
    )
    shared: dict[str, Any] = {
        "tables": settings.tables(),
        "clock": options.clock,
        "max_value_bytes": settings.max_value_bytes,
        "retry_attempts": settings.retry_attempts,
        "retry_backoff_seconds": settings.retry_backoff_seconds,
        "prepare": settings.prepare,
    }
    try:
        queue = await AsyncPostgresWorkQueue.open(state.executor, policy=options.policy, **shared)
        executions = await AsyncPostgresExecutionStore.open(state.executor, **shared)
    except BaseException:
        await state.aclose()
        raise
    return AsyncYard(state, queue, executions, url=url, closers=[state.aclose])


async def _open_sqlite(url: YardURL, options: YardOptions) -> AsyncYard:
    import sqlite3

    from runyard._async.sqlite import (
        AsyncSqliteStateStore,
        AsyncSqliteStore,
        AsyncSqliteWorkQueue,
        create_schema,
    )
    from runyard._async.sqlite.connecting import connect_yard
    from runyard.sqlite.errors import open_error
    from runyard.sqlite.settings import DEFAULT_BUSY_TIMEOUT_SECONDS

    path = sqlite_path(url)
    durable, live, tables = sqlite_options(url)
    # The stores' options are checked before the file is opened (or made, with its schema).
    AsyncSqliteStateStore._check_options(
        {"tables": tables, "clock": options.clock, "live_updates": live}
    )
    AsyncSqliteWorkQueue._check_options(
        {"tables": tables, "clock": options.clock, "policy": options.policy}
    )
    try:
        # A new (empty) database is taken; one holding other tables must have the schema,
        # else it is refused before anything is written (WAL included).
        connection = await connect_yard(str(path), tables, durable=durable)
    except sqlite3.Error as exc:  # a path that cannot be opened, a file that is no database
        raise open_error(exc, str(path), DEFAULT_BUSY_TIMEOUT_SECONDS) from None
    try:
        if not (await connection.fetch("SELECT count(*) FROM sqlite_master"))[0][0]:
            await create_schema(connection, tables)
        state = await AsyncSqliteStateStore.open(
            connection, tables=tables, clock=options.clock, live_updates=live
        )
        queue = await AsyncSqliteWorkQueue.open(
            connection, tables=tables, clock=options.clock, policy=options.policy
        )
        executions = await AsyncSqliteStore.open(connection, tables=tables, clock=options.clock)
    except BaseException as exc:
        await connection.close()
        if isinstance(exc, sqlite3.Error):  # reading the catalog, creating the schema
            raise open_error(exc, str(path), DEFAULT_BUSY_TIMEOUT_SECONDS) from None
        raise
    return AsyncYard(state, queue, executions, url=url, closers=[connection.close])


Opener = Callable[[YardURL, YardOptions], Awaitable[AsyncYard]]
OPENERS: dict[str, Opener] = {
    "memory": _open_memory,
    "redis": _open_redis,
    "rediss": _open_redis,
    "redis+cluster": _open_redis,
    "rediss+cluster": _open_redis,
    "postgresql": _open_postgres,
    "sqlite": _open_sqlite,
    "postgres": _open_postgres,
}
