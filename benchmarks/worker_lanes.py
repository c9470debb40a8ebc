"""The worker benchmark's backends (``Lane``: queues, wake-ups and a namespace of their own
per backend, emptied between burn-downs) and ``Counting``, which counts the calls a worker
makes. Used by ``benchmarks/bench_worker.py``."""

from __future__ import annotations

import inspect
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import redis
from pydantic import SecretStr
from runyard import AsyncMemoryWorkQueue, MemoryWorkQueue
from runyard._async.postgres.wakeup import AsyncPostgresWakeup
from runyard._async.redis.wakeup import AsyncRedisWakeup
from runyard._sync.postgres.wakeup import PostgresWakeup
from runyard._sync.redis.wakeup import RedisWakeup
from runyard.postgres import (
    AsyncPostgresWorkQueue,
    PostgresStoreSettings,
    PostgresWorkQueue,
    StateTables,
    schema_sql,
)
from runyard.postgres.wake import wake_channel
from runyard.redis import AsyncRedisWorkQueue, RedisStoreSettings, RedisWorkQueue
from runyard.redis.keys import cleanup_patterns
from runyard.redis.wake import wake_key

REDIS_URL = "redis://127.0.0.1:6379/0"
PG_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=test options='-c statement_timeout=30s'"


def cuts(delays: list[float]) -> dict[str, float]:
    """The p50 and p99 of ``delays`` (seconds), in milliseconds."""
    delays = sorted(delays)
    return {
        "p50_ms": statistics.median(delays) * 1e3,
        "p99_ms": delays[min(len(delays) - 1, int(len(delays) * 0.99))] * 1e3,
    }


class Counting:
    """Delegates to a queue or wake-up and counts the calls the worker makes; notes when a
    wake-up wait returned with a hint, how long each claim took, and how many calls are in
    flight now (``busy``: the benchmark enqueues only once the worker is idle)."""

    def __init__(self, inner: Any) -> None:
        self._inner, self.calls, self.busy = inner, 0, 0
        self.woke: list[float] = []
        self.claims: list[float] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr) or name in ("aclose", "close"):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            self.busy += 1
            start = time.perf_counter()
            try:
                result = attr(*args, **kwargs)
            except BaseException:
                self.busy -= 1
                raise
            if inspect.isawaitable(result):
                return self._noted(name, start, result)
            self.busy -= 1
            self._note(name, start, result)
            return result

        return counted

    async def _noted(self, name: str, start: float, result: Awaitable[Any]) -> Any:
        try:
            value = await result
        finally:
            self.busy -= 1
        self._note(name, start, value)
        return value

    def _note(self, name: str, start: float, value: Any) -> None:
        if name == "wait" and value:
            self.woke.append(time.perf_counter())
        elif name in ("claim", "claim_many"):
            self.claims.append(time.perf_counter() - start)


class Lane:
    """One backend: opens its twins' queues and wake-ups in a namespace (schema) of its own."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.tag = f"benchw_{uuid.uuid4().hex[:8]}"
        self.tables = StateTables(schema=self.tag)
        if name == "postgres":
            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                conn.execute(f'CREATE SCHEMA "{self.tag}"')
                conn.execute(schema_sql(self.tables))  # type: ignore[arg-type]
        self.enqueue_hints = self._enqueue_sends_hint()

    def pg_settings(self) -> PostgresStoreSettings:
        return PostgresStoreSettings(dsn=SecretStr(PG_DSN), db_schema=self.tag, pool_max_size=20)

    def redis_settings(self) -> RedisStoreSettings:
        return RedisStoreSettings(namespace=self.tag, durable=False)

    async def open_async(self, *, wakeup: bool = True) -> tuple[Any, Any]:
        """The async queue, and its wake-up (None without ``wakeup``, and on memory)."""
        if self.name == "memory":
            return AsyncMemoryWorkQueue(), None
        if self.name == "redis":
            queue: Any = await AsyncRedisWorkQueue.from_url(
                REDIS_URL, settings=self.redis_settings()
            )
        else:
            queue = await AsyncPostgresWorkQueue.from_settings(self.pg_settings())
        return queue, (await self.wakeup_async()) if wakeup else None

    async def wakeup_async(self) -> Any:
        if self.name == "redis":
            return AsyncRedisWakeup.from_url(REDIS_URL, settings=self.redis_settings())
        if self.name == "postgres":
            return await AsyncPostgresWakeup.connect(PG_DSN, tables=self.tables)
        return None

    def open_sync(self, *, wakeup: bool = True) -> tuple[Any, Any]:
        """The sync queue, and its wake-up (None without ``wakeup``, and on memory)."""
        if self.name == "memory":
            return MemoryWorkQueue(), None
        if self.name == "redis":
            queue: Any = RedisWorkQueue.from_url(REDIS_URL, settings=self.redis_settings())
        else:
            queue = PostgresWorkQueue.from_settings(self.pg_settings())
        return queue, self.wakeup_sync() if wakeup else None

    def wakeup_sync(self) -> Any:
        if self.name == "redis":
            return RedisWakeup.from_url(REDIS_URL, settings=self.redis_settings())
        if self.name == "postgres":
            return PostgresWakeup.connect(PG_DSN, tables=self.tables)
        return None

    def _enqueue_sends_hint(self) -> bool:
        """Whether this backend's enqueue sends the wake-up hint (memory's always does)."""
        if self.name == "memory":
            return True
        queue, wakeup = self.open_sync()
        try:
            queue.enqueue("probe", {})
            woke = wakeup.wait(0.5)
            lease = queue.claim("probe")
            if lease is not None:
                queue.complete(lease)
            return bool(woke)
        finally:
            wakeup.close()
            queue.close()

    def hint(self) -> Callable[[], None] | None:
        """What the enqueue will send, for a backend whose enqueue does not send it yet."""
        if self.enqueue_hints:
            return None
        if self.name == "redis":
            client = redis.Redis.from_url(REDIS_URL)
            key = wake_key(self.tag)
            return lambda: client.lpush(key, "1") and None
        conn = psycopg.connect(PG_DSN, autocommit=True)
        channel = wake_channel(self.tables)
        return lambda: conn.execute("SELECT pg_notify(%s, '')", (channel,)) and None

    def fresh(self) -> None:
        """Before each burn-down: PostgreSQL's tables emptied by TRUNCATE (new files), so no
        burn runs on the dead rows and index entries of the ones before it (autovacuum does
        not run on this machine; see docs/worker.md for what that did to the figures), and
        the count shards seeded again as a new schema has them (0 to 15)."""
        if self.name != "postgres":
            return
        counts = self.tables.qualified(self.tables.counts)
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            tables = conn.execute(
                "SELECT quote_ident(schemaname) || '.' || quote_ident(tablename) "
                "FROM pg_tables WHERE schemaname = %s AND tablename <> %s",
                (self.tag, self.tables.schema_table),
            ).fetchall()
            with conn.transaction():
                conn.execute("TRUNCATE " + ", ".join(t[0] for t in tables))  # type: ignore[arg-type]
                conn.execute(
                    f"INSERT INTO {counts} (shard) SELECT g FROM generate_series(0, 15) AS g"  # type: ignore[arg-type]
                )

    def drop(self) -> None:
        if self.name == "redis":
            client = redis.Redis.from_url(REDIS_URL)
            for pattern in cleanup_patterns(self.tag):
                keys = list(client.scan_iter(match=pattern, count=1000))
                if keys:
                    client.delete(*keys)
        elif self.name == "postgres":
            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{self.tag}" CASCADE')
