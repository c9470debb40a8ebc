"""AsyncYard: a state store, a work queue and an execution store opened from one URL."""

from __future__ import annotations

from typing_extensions import Self

from runyard._async.closing import AsyncClosing
from runyard._async.executions import AsyncExecutionStore
from runyard._async.memory import (
    AsyncMemoryExecutionStore,
    AsyncMemoryStateStore,
    AsyncMemoryWorkQueue,
)
from runyard._async.protocols import AsyncStateStore, AsyncWorkQueue
from runyard._async.sqlite import (
    AsyncSqliteStateStore,
    AsyncSqliteStore,
    AsyncSqliteWorkQueue,
    connect,
    create_schema,
)
from runyard.clock import Clock
from runyard.policy import QueuePolicy
from runyard.sqlite.flavours import AsyncConnection
from runyard.yard.urls import default_url, parse_url

__all__ = ["AsyncYard"]


class AsyncYard(AsyncClosing):
    """The three stores of one deployment, opened together: ``state``, ``queue`` and
    ``executions``. ``aclose()`` closes what the yard opened."""

    def __init__(
        self,
        state: AsyncStateStore,
        queue: AsyncWorkQueue,
        executions: AsyncExecutionStore,
        *,
        url: str,
        connection: AsyncConnection | None = None,
    ) -> None:
        self.state = state
        self.queue = queue
        self.executions = executions
        self.url = url
        self._connection = connection

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self.url!r})"

    @classmethod
    async def from_url(
        cls,
        url: str | None = None,
        *,
        clock: Clock | None = None,
        policy: QueuePolicy | None = None,
    ) -> Self:
        """Open the stores ``url`` names (``RUNYARD_URL``, else ``sqlite:///runyard.db``).

        A new (empty) SQLite database gets runyard's schema; one that holds other tables must
        have it already. Raises ConfigurationError for an unsupported URL or a file without the
        schema (the message names the repair).
        """
        url = url if url is not None else default_url()
        target = parse_url(url)
        if target.backend == "memory":
            return cls(
                AsyncMemoryStateStore(clock=clock),
                AsyncMemoryWorkQueue(policy=policy, clock=clock),
                AsyncMemoryExecutionStore(clock=clock),
                url=url,
            )
        connection = await connect(target.path or ":memory:")
        try:
            # A new (empty) database gets the schema; one holding other tables must have it.
            if not (await connection.fetch("SELECT count(*) FROM sqlite_master"))[0][0]:
                await create_schema(connection)
            return cls(
                await AsyncSqliteStateStore.open(connection, clock=clock),
                await AsyncSqliteWorkQueue.open(connection, clock=clock, policy=policy),
                await AsyncSqliteStore.open(connection, clock=clock),
                url=url,
                connection=connection,
            )
        except BaseException:
            await connection.close()
            raise

    async def aclose(self) -> None:
        """Close the stores and the connection the yard opened."""
        for store in (self.state, self.queue, self.executions):
            await store.aclose()
        if self._connection is not None:
            connection, self._connection = self._connection, None
            await connection.close()
