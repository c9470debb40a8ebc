"""AsyncScriptRunner: EVALSHA with NOSCRIPT reload, and the store-owned retry loop."""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from runyard._flavours import async_sleep
from runyard.errors import (
    ConfigurationError,
    PoolExhaustedError,
    QueueUnavailableError,
    RunyardError,
)
from runyard.redis.clocks import clock_offset_warning, server_seconds
from runyard.redis.common import (
    CONFIG_SETTINGS,
    ReplyLost,
    check_cluster_url_options,
    check_connection_options,
    check_database,
    classify,
    client_retry_problem,
    config_unavailable_message,
    preflight_problems,
    refused_by_redis,
    retry_delay,
    text,
    unknown_keyword,
)
from runyard.redis.flavours import (
    AsyncBlockingConnectionPool,
    AsyncClientStartup,
    AsyncRedis,
    AsyncRedisClient,
    AsyncRedisCluster,
    AsyncRetry,
    NoBackoff,
    RedisClusterException,
    RedisError,
    ResponseError,
    client_kwargs,
)
from runyard.redis.scripts import LuaScript
from runyard.redis.settings import RedisStoreSettings

__all__ = ["AsyncScriptRunner", "client_from_url"]

T = TypeVar("T")
logger = logging.getLogger("runyard.redis")


def client_from_url(
    url: str | None,
    settings: RedisStoreSettings,
    unavailable: Callable[[str], RunyardError] = QueueUnavailableError,
) -> AsyncRedisClient:
    """A client for ``url`` (or ``settings.dsn``) with redis-py's own retries off.

    The store owns retries: redis-py's would re-send a write whose reply was lost. A single
    server's pool blocks: a command waits up to ``settings.pool_timeout_seconds`` for one of
    its ``max_connections`` connections before PoolExhaustedError. A client that connects as
    it is built (the blocking RedisCluster discovers its nodes there) raises as a store's
    first command would: ConfigurationError for a refusal (a server not in cluster mode),
    else ``unavailable`` (retryable) when no node answered.
    """
    dsn = url or settings.dsn.get_secret_value()
    check_database(dsn, settings.cluster)
    kwargs = client_kwargs(settings.socket_timeout, settings.max_connections)
    kwargs["retry"] = AsyncRetry(NoBackoff(), 0)
    try:
        if settings.cluster:
            check_cluster_url_options(dsn)
            return AsyncRedisCluster.from_url(dsn, **kwargs)
        pool = AsyncBlockingConnectionPool.from_url(
            dsn, timeout=settings.pool_timeout_seconds, **kwargs
        )
    except TypeError as exc:
        # The cluster client refuses a keyword it does not take (a query parameter such as
        # ?sslmode=require) as it is built: name it, never the URL.
        client_class = AsyncRedisCluster.__name__
        raise ConfigurationError(
            f"the Redis URL has a query parameter ({unknown_keyword(exc)}) that redis-py's "
            f"{client_class} does not take: remove it"
        ) from None
    except ValueError as exc:
        # redis-py's message may quote the URL, password included: name the problem only.
        raise ConfigurationError(
            "the Redis URL is malformed (a redis://, rediss:// or unix:// URL with a numeric "
            f"port is expected): {type(exc).__name__} while parsing it (details hidden: they "
            "could show the password)"
        ) from None
    except (RedisError, RedisClusterException, OSError) as exc:
        if classify(exc) == "configuration":
            raise refused_by_redis(exc) from exc
        raise unavailable(f"Redis did not answer: {exc}") from exc
    check_connection_options(pool.connection_class, pool.connection_kwargs)
    client = AsyncRedis(connection_pool=pool, retry=kwargs["retry"])
    client.auto_close_connection_pool = True  # as from_url does: closing the client closes it
    return client


class AsyncScriptRunner:
    """Sends commands and scripts for one store, owning every retry.

    A command that certainly did not run (refused connection, failover in progress) is sent
    again after a doubling, jittered pause, within ``settings.retry_attempts``; past that
    budget ``unavailable(message)`` is raised. A write whose reply was lost is never sent
    again here: it raises ReplyLost so the store can read back or give up. A pool with no free
    connection raises PoolExhaustedError (a blocking pool, as from_url builds, after waiting
    ``settings.pool_timeout_seconds``).
    """

    def __init__(
        self,
        client: AsyncRedisClient,
        settings: RedisStoreSettings,
        unavailable: Callable[[str], RunyardError],
    ) -> None:
        # redis-py's own retries would re-send a write whose reply was lost: refuse them here,
        # so direct construction, open() and from_url() all check it.
        problem = client_retry_problem(client)
        if problem is not None:
            raise ConfigurationError(problem)
        self.client = client
        self.settings = settings
        self._unavailable = unavailable
        self._started = False
        # Set by the store's close: every call after it is refused, where redis-py reconnected
        # on the next command (a closed yard's stores, and their followers, went on working).
        self.closed = False

    async def _evalsha(self, script: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        try:
            return await self.client.evalsha(script.sha, len(keys), *keys, *args)
        except RedisError as exc:
            if classify(exc) != "noscript":
                raise
        # The server has not seen this script yet (or restarted): EVAL runs it and caches it.
        return await self.client.eval(script.text, len(keys), *keys, *args)

    async def script(
        self, script: LuaScript, keys: Sequence[str], args: Sequence[Any], *, idempotent: bool
    ) -> Any:
        """Run ``script`` once (retried only as described on the class)."""
        return await self.call(lambda: self._evalsha(script, keys, args), idempotent=idempotent)

    async def call(self, operation: Callable[[], Awaitable[T]], *, idempotent: bool) -> T:
        """Run ``operation`` under the store's retry policy.

        Raises ReplyLost (non-idempotent only), PoolExhaustedError, the store's unavailable
        error past the budget, and any other redis-py error unchanged.
        """
        if self.closed:
            raise self._unavailable(
                "the Redis store is closed: nothing was sent; open the store again"
            )
        attempt = 0
        while True:
            try:
                if not self._started:
                    await AsyncClientStartup.ready(self.client)
                    self._started = True
                return await operation()
            except (RedisError, RedisClusterException, OSError) as exc:
                kind = classify(exc)
                if kind == "pool":
                    raise PoolExhaustedError(
                        f"every connection of the pool is in use ({exc}); raise max_connections "
                        "or pool_timeout_seconds, or lower the concurrency"
                    ) from exc
                if kind == "configuration":
                    raise refused_by_redis(exc) from exc
                if kind == "fatal" or kind == "noscript":
                    raise
                if kind == "ambiguous" and not idempotent:
                    raise ReplyLost(f"the reply to a write was lost ({exc})") from exc
                attempt += 1
                if attempt >= self.settings.retry_attempts:
                    raise self._unavailable(
                        f"Redis did not answer after {attempt} attempts: {exc}"
                    ) from exc
                await async_sleep(
                    retry_delay(
                        attempt, self.settings.retry_backoff_base, self.settings.retry_backoff_cap
                    )
                )

    async def check_clock(self) -> None:
        """Warn (logger ``runyard.redis`` and a RuntimeWarning) when the server's clock and this
        host's differ by more than CLOCK_WARN_SECONDS, naming both; changes nothing."""
        before = time.time()
        reply = await self.call(self.client.time, idempotent=True)
        after = time.time()
        message = clock_offset_warning(before, server_seconds(reply), after)
        if message is not None:
            logger.warning(message)
            warnings.warn(message, RuntimeWarning, stacklevel=3)

    async def _configs(self) -> list[tuple[str, dict[str, str]]]:
        """(where, settings) per server: where is "" for one server, "node host:port: " for
        each node of a cluster, so a refusal names the node."""
        client = self.client
        if isinstance(client, AsyncRedisCluster):
            configs = []
            for node in client.get_nodes():  # type: ignore[no-untyped-call,unused-ignore]
                config: dict[str, str] = {}
                for name in CONFIG_SETTINGS:
                    reply = await client.config_get(name, target_nodes=node)
                    config.update({text(k): text(v) for k, v in reply.items()})
                configs.append((f"node {node.host}:{node.port}: ", config))
            return configs
        config = {}
        for name in CONFIG_SETTINGS:
            reply = await client.config_get(name)
            config.update({text(k): text(v) for k, v in reply.items()})
        return [("", config)]

    async def preflight(self) -> None:
        """Refuse a server whose settings make the store unsafe; never changes anything.

        Raises ConfigurationError naming the setting, its value and why. Where CONFIG is
        disabled (managed Redis) it warns and names the settings to check by hand.
        """
        try:
            configs = await self.call(self._configs, idempotent=True)
        except ResponseError as exc:
            message = config_unavailable_message(str(exc))
            logger.warning(message)
            warnings.warn(message, RuntimeWarning, stacklevel=3)
            return
        problems = sorted(
            where + p
            for where, c in configs
            for p in preflight_problems(c, durable=self.settings.durable)
        )
        if problems:
            raise ConfigurationError("Redis refused by preflight: " + "; ".join(problems))
