"""What the PostgreSQL state store and work queue share: executors, retries, verify, bound."""

from __future__ import annotations

import copy
import logging
import random
import time
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import psycopg
import psycopg_pool
from psycopg.conninfo import conninfo_to_dict
from pydantic import SecretStr
from typing_extensions import Self

from runyard._async.closing import AsyncClosing
from runyard._async.postgres.executor import (
    AsyncBoundExecutor,
    AsyncExecutor,
    AsyncPsycopgExecutor,
)
from runyard._flavours import async_sleep
from runyard.clock import Clock, SystemClock
from runyard.errors import (
    ConfigurationError,
    QueueUnavailableError,
    RunyardError,
    StatePersistenceError,
)
from runyard.postgres.connecting import connect_budget, connect_refusal
from runyard.postgres.errors import FIX_SCHEMA, NotSent, map_error, verify_refusal
from runyard.postgres.flavours import AsyncConnection, AsyncConnectionPool
from runyard.postgres.schema import SCHEMA_VERSIONS, StateTables, index_names
from runyard.postgres.server_clock import CLOCK_SAMPLES, ClockSample, closest_sample, take_sample
from runyard.postgres.settings import PostgresStoreSettings
from runyard.postgres.statements import Statements, statements
from runyard.validation import DEFAULT_MAX_VALUE_BYTES

__all__ = ["CLOCK_OFFSET_WARNING_SECONDS", "Source"]

Source = AsyncExecutor | AsyncConnectionPool[Any] | AsyncConnection[Any]

# verify() warns when this machine's clock and the server's differ by more than this.
CLOCK_OFFSET_WARNING_SECONDS = 1.0
logger = logging.getLogger("runyard.postgres")


def _settings_options(settings: PostgresStoreSettings, options: dict[str, Any]) -> None:
    """Fill the construction options ``settings`` gives that the caller did not pass."""
    options.setdefault("tables", settings.tables())
    options.setdefault("max_value_bytes", settings.max_value_bytes)
    options.setdefault("retry_attempts", settings.retry_attempts)
    options.setdefault("retry_backoff_seconds", settings.retry_backoff_seconds)
    options.setdefault("schema_version", settings.schema_version)
    options.setdefault("prepare", settings.prepare)


class _AsyncPostgresAdapter(AsyncClosing):
    """The plumbing of a PostgreSQL adapter; subclasses add the protocol's methods.

    ``source`` is a psycopg pool or connection (wrapped in AsyncPsycopgExecutor) or any
    executor; ``close_source`` makes aclose() close it.
    """

    _kind: ClassVar[Literal["state", "queue", "executions"]]

    def __init__(
        self,
        source: Source,
        *,
        tables: StateTables | None = None,
        clock: Clock | None = None,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        retry_attempts: int = 3,
        retry_backoff_seconds: float = 0.05,
        schema_version: int | None = None,
        prepare: bool = True,
        close_source: bool = False,
    ) -> None:
        if isinstance(source, (AsyncConnectionPool, AsyncConnection)):
            self._executor: AsyncExecutor = AsyncPsycopgExecutor(source, prepare=prepare)
        elif isinstance(source, AsyncExecutor):
            self._executor = source
        else:
            raise ConfigurationError(
                f"a PostgreSQL store needs a psycopg pool, a psycopg connection or an executor "
                f"(anything with fetch(statement, *args)), not {type(source).__name__}"
            )
        self.tables = tables or StateTables()
        self.clock: Clock = clock or SystemClock()
        # With the machine's clock (no injected Clock), time is the server's: verify() reads
        # the server's clock, and _now() is that reading plus the monotonic seconds since, so
        # a step of this machine's wall clock after open() does not move it. An injected Clock
        # is used as is.
        self._server_time = isinstance(self.clock, SystemClock)
        self._server_clock: ClockSample | None = None
        self.clock_offset = 0.0
        self.max_value_bytes = max_value_bytes
        self.retry_attempts = retry_attempts
        self.retry_backoff_seconds = retry_backoff_seconds
        self.schema_version = schema_version or SCHEMA_VERSIONS[self._kind]
        self.prepare = prepare
        self._sql: Statements = statements(self.tables)
        self._bound = False
        self._owns_source = close_source
        self._secret: str | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(tables={self.tables!r}, bound={self._bound})"

    @property
    def executor(self) -> AsyncExecutor:
        """What the statements run on: pass it to another adapter's ``open()`` to share it."""
        return self._executor

    # -- construction ------------------------------------------------------------------------
    @classmethod
    async def open(
        cls, source: Source, *, settings: PostgresStoreSettings | None = None, **options: Any
    ) -> Self:
        """Build the adapter on ``source`` (a pool, a connection or an executor you own) and
        run verify() (direct construction skips it).

        With ``settings``, its table names, limits, retry budget, schema version and ``prepare``
        are the defaults of ``options`` (its DSN and pool sizes are not used: ``source`` is
        already connected). Raises ConfigurationError when the schema or the connection is not
        fit to use.
        """
        if settings is not None:
            _settings_options(settings, options)
        adapter = cls(source, **options)
        await adapter.verify()
        return adapter

    @classmethod
    async def from_url(
        cls,
        url: str | None = None,
        *,
        settings: PostgresStoreSettings | None = None,
        **options: Any,
    ) -> Self:
        """Open a pool for ``url`` (or ``settings.dsn``) as from_settings() does; the adapter
        owns the pool. Raises ConfigurationError when neither gives a DSN."""
        if url is not None:
            settings = (
                PostgresStoreSettings(dsn=SecretStr(url))
                if settings is None
                else settings.model_copy(update={"dsn": SecretStr(url)})
            )
        if settings is None:
            raise ConfigurationError("from_url needs a url or settings with a dsn")
        return await cls.from_settings(settings, **options)

    @classmethod
    async def from_settings(cls, settings: PostgresStoreSettings, **options: Any) -> Self:
        """Open a psycopg pool from ``settings``, build the adapter on it and verify() it.

        The adapter owns the pool and closes it in aclose(). Errors never show the DSN.
        """
        settings.check_coherent()  # again: model_copy(update=...) skips the validators
        dsn = settings.dsn.get_secret_value()
        try:
            given = conninfo_to_dict(dsn)
        except psycopg.Error:
            # libpq's message quotes the DSN, password included: say less.
            raise ConfigurationError(
                "settings.dsn is not a valid PostgreSQL connection string "
                "(details hidden: they would show the DSN)"
            ) from None
        # One direct connection first: a wrong setting fails at once with libpq's reason,
        # instead of as a pool timeout with the reason only in psycopg_pool's log.
        try:
            probe = await AsyncConnection.connect(
                dsn, **connect_budget(given, settings.pool_timeout_seconds)
            )
        except psycopg.Error as exc:
            raise connect_refusal(exc, kind=cls._kind, secret=dsn) from None
        await probe.close()
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            dsn,
            min_size=settings.pool_min_size,
            max_size=settings.pool_max_size,
            timeout=settings.pool_timeout_seconds,
            open=False,
        )
        _settings_options(settings, options)
        adapter = cls(pool, **options)
        adapter._owns_source = True
        adapter._secret = dsn
        try:
            await pool.open(wait=True, timeout=settings.pool_timeout_seconds)
        except psycopg_pool.PoolTimeout:
            await pool.close()
            raise map_error(
                NotSent(f"could not connect within {settings.pool_timeout_seconds} s"),
                kind=cls._kind,
                idempotent=True,
            ) or ConfigurationError("could not connect") from None
        try:
            await adapter.verify()
        except Exception as exc:
            await pool.close()
            error = map_error(exc, kind=cls._kind, idempotent=True, secret=dsn)
            if error is None or error is exc:
                raise
            raise error from None
        return adapter

    def bound(self, session: AsyncConnection[Any]) -> Self:
        """Return this adapter working inside the transaction the caller opened on ``session``.

        Everything it writes commits or rolls back with the caller's transaction; it retries
        nothing. Raises ConfigurationError for a connection in autocommit mode.
        """
        twin = copy.copy(self)
        twin._executor = AsyncBoundExecutor(session, prepare=self.prepare)
        twin._bound = True
        twin._owns_source = False
        return twin

    # -- verify ------------------------------------------------------------------------------
    def _relations(self) -> Sequence[str]:
        raise NotImplementedError

    async def verify(self) -> None:
        """Check the connection and the schema this adapter needs.

        Raises ConfigurationError for a missing table or sequence, a schema version this
        runyard was not written for (named first when a table of the newer version is
        missing too), an INVALID index of runyard's, or a connection whose
        ``statement_timeout`` is 0.
        """
        sent, monotonic_sent = time.time(), time.monotonic()
        rows = await self._fetch(
            "verify_relations",
            list(self._relations()),
            list(index_names(self.tables)),
            idempotent=True,
        )
        received, monotonic_received = time.time(), time.monotonic()
        timeout, missing, server = rows[0][0], list(rows[0][1] or []), float(rows[0][2])
        first = take_sample(sent, received, server, monotonic_sent, monotonic_received)
        self._measure_offset(await self._sample_clock(first))
        schema_table = self.tables.qualified(self.tables.schema_table)
        if schema_table in missing:
            raise ConfigurationError(f"table {schema_table} does not exist: {FIX_SCHEMA}")
        versions = {str(r[0]): int(r[1]) for r in await self._fetch("verify_versions")}
        found = versions.get(self._kind)
        if missing and found in (None, self.schema_version):
            # At another version, a table missing is a table of this version: say which.
            raise ConfigurationError(f"table {missing[0]} does not exist: {FIX_SCHEMA}")
        refusal = verify_refusal(
            schema_table,
            self._kind,
            found,
            self.schema_version,
            list(rows[0][3] or []),
            timeout,
        )
        if refusal is not None:
            raise refusal

    async def _sample_clock(self, first: ClockSample) -> ClockSample:
        """``first`` and more reads of the server's clock (with the machine's clock only:
        an injected Clock needs no offset); the one with the shortest round trip."""
        samples = [first]
        if self._server_time:
            for _ in range(CLOCK_SAMPLES - 1):
                sent, monotonic_sent = time.time(), time.monotonic()
                rows = await self._fetch("server_clock")
                received, monotonic_received = time.time(), time.monotonic()
                server = float(rows[0][0])
                samples.append(
                    take_sample(sent, received, server, monotonic_sent, monotonic_received)
                )
        return closest_sample(samples)

    def _measure_offset(self, clock: ClockSample) -> None:
        """Adopt the server's time (unless a Clock was injected); warn when the clocks differ."""
        local, server, offset = clock.local, clock.server, clock.offset
        if abs(offset) > CLOCK_OFFSET_WARNING_SECONDS:
            logger.warning(
                "this machine's clock reads %.3f and the PostgreSQL server's clock_timestamp() "
                "reads %.3f (the server is %+.3f s ahead); %s",
                local,
                server,
                offset,
                "runyard uses the server's time for leases and delays"
                if self._server_time
                else "runyard uses the injected clock, so leases are judged by it",
            )
        if self._server_time:
            self.clock_offset = offset
            self._server_clock = clock

    # -- statements --------------------------------------------------------------------------
    def _now(self) -> float:
        """The time statements are given: the server's (from the sample verify() took) or the
        injected Clock's; the machine's own clock before verify() has run."""
        if self._server_clock is not None:
            return self._server_clock.server_now(time.monotonic())
        return float(self.clock.now())

    async def _fetch(
        self, name: str, *args: Any, idempotent: bool = True
    ) -> Sequence[Sequence[Any]]:
        """Run the named statement; map driver errors; retry what is safe to retry.

        A bound adapter retries nothing. Otherwise contended statements, statement timeouts
        and unreachable servers are retried within the budget; a write whose reply was lost
        is retried only when ``idempotent``, else StoreOutcomeUnknown is raised.
        """
        statement = getattr(self._sql, name)
        attempt = 0
        while True:
            try:
                return await self._executor.fetch(statement, *args)
            except Exception as exc:
                error = map_error(exc, kind=self._kind, idempotent=idempotent, secret=self._secret)
                if error is None:
                    raise
                if error is exc:
                    raise
                if self._bound or not self._retryable(error) or attempt >= self.retry_attempts:
                    raise error from (None if self._secret else exc)
            attempt += 1
            ceiling = self.retry_backoff_seconds * 2 ** (attempt - 1)
            await async_sleep(ceiling * random.random())

    @staticmethod
    def _retryable(error: RunyardError) -> bool:
        if isinstance(error, StatePersistenceError):
            return error.reason in ("contended", "unavailable")
        return isinstance(error, QueueUnavailableError)

    # -- lifecycle ---------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Close the pool when this adapter opened it (from_settings); otherwise nothing."""
        if self._owns_source:
            self._owns_source = False
            close = getattr(self._executor, "aclose", None)
            if close is not None:
                await close()
