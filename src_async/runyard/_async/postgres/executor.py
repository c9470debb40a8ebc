"""Executors: what the PostgreSQL adapters send statements through."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import PoolClosed, PoolTimeout

from runyard._flavours import AsyncLock
from runyard.errors import ConfigurationError
from runyard.postgres.connecting import connect_budget, probe_problem
from runyard.postgres.errors import NotSent
from runyard.postgres.flavours import (
    AsyncConnection,
    AsyncConnectionPool,
    AsyncRawCursor,
    ExecStatus,
    TransactionStatus,
)

__all__ = ["AsyncBoundExecutor", "AsyncExecutor", "AsyncPsycopgExecutor"]


@runtime_checkable
class AsyncExecutor(Protocol):
    """Anything with ``fetch(statement, *args)`` returning the rows as sequences.

    Statements use ``$1``-style placeholders. Outside ``bound()``, each statement must commit
    on its own (autocommit); asyncpg's ``Pool`` and ``Connection`` already behave so.
    """

    async def fetch(self, statement: str, *args: Any) -> Sequence[Sequence[Any]]:
        """Run ``statement`` with ``args``; return its rows (empty when it returns none)."""
        ...


async def _run(
    conn: AsyncConnection[Any], statement: str, args: Sequence[Any], prepare: bool
) -> list[tuple[Any, ...]]:
    cursor = AsyncRawCursor(conn)
    try:
        await cursor.execute(statement, args, prepare=prepare)
        # The result's status, not cursor.description: that builds a Column object per column
        # on every call (about 7 us each, 70 us for a claim's reply, measured).
        result = cursor.pgresult
        if result is None or result.status != ExecStatus.TUPLES_OK:
            return []
        return await cursor.fetchall()
    finally:
        await cursor.close()


class AsyncPsycopgExecutor:
    """Runs each statement in its own transaction (autocommit) on a psycopg pool or connection.

    Pool connections are switched to autocommit while in use and switched back before they
    return to the pool, so one statement is one round trip. A single connection is shared by
    taking turns. Statements are prepared on each connection (``prepare=True``); pass
    ``prepare=False`` behind a transaction-pooling PgBouncer.
    """

    def __init__(
        self,
        source: AsyncConnectionPool[Any] | AsyncConnection[Any],
        *,
        prepare: bool = True,
        timeout: float | None = None,
    ) -> None:
        self.source = source
        self.prepare = prepare
        self.timeout = timeout
        self._lock = AsyncLock()
        self._probed_at = float("-inf")  # when a PoolTimeout last made it try a connection
        self._probe_problem: str | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({type(self.source).__name__}, prepare={self.prepare})"

    async def fetch(self, statement: str, *args: Any) -> list[tuple[Any, ...]]:
        """Run ``statement`` in autocommit; return its rows.

        Raises the driver's error (the adapters map it), psycopg_pool.PoolTimeout when the
        pool has no free connection, NotSent when no connection could be made.
        """
        if isinstance(self.source, AsyncConnectionPool):
            conn = await self._getconn(self.source)
            try:
                return await self._autocommit(conn, statement, args)
            finally:
                await self.source.putconn(conn)
        async with self._lock:
            if self.source.closed:
                raise NotSent("the connection is closed")
            return await self._autocommit(self.source, statement, args)

    async def _getconn(self, pool: AsyncConnectionPool[Any]) -> AsyncConnection[Any]:
        """A connection of ``pool``. Its PoolTimeout is raised as is when a connection can be
        made (so the pool's are all in use: raise max_size or lower the concurrency), else as
        NotSent with libpq's reason (the server down or unreachable), which had told a user
        in an outage to enlarge the pool. A closed pool is NotSent saying so."""
        try:
            conn: AsyncConnection[Any] = await pool.getconn(self.timeout)
            return conn
        except PoolClosed:
            # Not a connection lost before a write's reply (StoreOutcomeUnknown, as psycopg's
            # OperationalError mapped): nothing left.
            raise NotSent(
                "the store is closed (its pool closed with the store): nothing was sent; "
                "open the store again"
            ) from None
        except PoolTimeout:
            problem = await self._connect_problem(pool)
            if problem is None:
                raise
            raise NotSent(
                f"no connection within the pool's timeout: it could not connect ({problem})"
            ) from None

    async def _connect_problem(self, pool: AsyncConnectionPool[Any]) -> str | None:
        """Why a connection with the pool's conninfo and keywords cannot be made (libpq's
        first line), or None when one can (closed at once) or the server refuses more
        (53300: the pool is full, at the server's limit). Asked only after a PoolTimeout,
        at most once a second (the answer is kept meanwhile): the pool's own counts cannot
        tell (its pool_size counts connections it is still trying to make, so an outage
        showed as a full pool); they decide only for a conninfo made per connection."""
        conninfo, keywords = pool.conninfo, pool.kwargs
        if not isinstance(conninfo, str) or not isinstance(keywords, dict | None):
            if pool.get_stats().get("pool_size", pool.max_size) >= pool.max_size:
                return None
            return "the pool holds fewer connections than its max_size"
        now = time.monotonic()
        if now < self._probed_at + 1.0:
            return self._probe_problem
        problem: str | None = None
        try:
            budget = connect_budget(conninfo_to_dict(conninfo), self.timeout or pool.timeout)
            probe = await AsyncConnection.connect(conninfo, **{**budget, **(keywords or {})})
        except psycopg.Error as exc:
            problem = probe_problem(exc)
        else:
            await probe.close()
        self._probed_at, self._probe_problem = now, problem
        return problem

    async def _autocommit(
        self, conn: AsyncConnection[Any], statement: str, args: Sequence[Any]
    ) -> list[tuple[Any, ...]]:
        if conn.autocommit:
            return await _run(conn, statement, args, self.prepare)
        if conn.info.transaction_status != TransactionStatus.IDLE:
            raise ConfigurationError(
                "the connection has a transaction open: to work inside it use "
                "store.bound(connection); otherwise commit or roll it back first"
            )
        await conn.set_autocommit(True)
        try:
            return await _run(conn, statement, args, self.prepare)
        finally:
            # Only an idle connection can leave autocommit: one a failed statement left
            # ACTIVE (its socket closed before psycopg marked it broken) would raise
            # ProgrammingError here over the driver's error; the pool discards it anyway.
            idle = conn.info.transaction_status == TransactionStatus.IDLE
            if idle and not conn.broken and not conn.closed:
                await conn.set_autocommit(False)

    async def aclose(self) -> None:
        """Close the pool or connection."""
        await self.source.close()


class AsyncBoundExecutor:
    """Runs statements inside the transaction the caller opened on ``connection``.

    Never commits, rolls back or retries: the caller's transaction decides. Raises
    ConfigurationError for a connection in autocommit mode outside a transaction block,
    where every statement would commit on its own.
    """

    def __init__(self, connection: AsyncConnection[Any], *, prepare: bool = True) -> None:
        if not isinstance(connection, AsyncConnection):
            raise ConfigurationError(
                "bound() needs a psycopg "
                + AsyncConnection.__name__
                + ", not "
                + type(connection).__name__
            )
        self.connection = connection
        self.prepare = prepare
        self._check()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(prepare={self.prepare})"

    def _check(self) -> None:
        conn = self.connection
        if conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
            raise ConfigurationError(
                "bound() refuses a connection in autocommit mode: each statement would commit "
                "on its own; use a connection with autocommit=False (or open "
                "connection.transaction() first)"
            )

    async def fetch(self, statement: str, *args: Any) -> list[tuple[Any, ...]]:
        """Run ``statement`` in the caller's transaction; return its rows."""
        self._check()
        return await _run(self.connection, statement, args, self.prepare)
