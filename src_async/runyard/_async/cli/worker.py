"""Opening the worker's queue from a URL and running it (the I/O of ``runyard worker``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from runyard._async.protocols import AsyncWorkQueue
from runyard._async.worker.loop import AsyncWorker
from runyard._async.worker.wakeup import AsyncWakeup
from runyard.errors import ConfigurationError
from runyard.policy import QueuePolicy
from runyard.worker.job import Job
from runyard.worker.outcomes import WorkerHooks, WorkerStats
from runyard.worker.settings import WorkerSettings

__all__ = ["open_queue", "serve"]


async def open_queue(
    url: str, policy: QueuePolicy | None = None
) -> tuple[AsyncWorkQueue, AsyncWakeup | None]:
    """The queue and the wake-up for ``url``: ``memory://``, ``redis://``, ``rediss://``,
    ``postgresql://``. Other settings (namespace, schema) come from the backends'
    ``RUNYARD_REDIS_*``/``RUNYARD_POSTGRES_*`` environment. The one place a URL is opened,
    so ``Yard.from_url`` can replace it. Raises ConfigurationError."""
    scheme = url.split("://", 1)[0].lower()
    if scheme == "memory":
        from runyard._async.memory.queue import AsyncMemoryWorkQueue

        return AsyncMemoryWorkQueue(policy=policy), None
    if scheme in ("redis", "rediss"):
        from runyard._async.redis.queue import AsyncRedisWorkQueue
        from runyard._async.redis.wakeup import AsyncRedisWakeup
        from runyard.redis.settings import RedisStoreSettings

        settings = RedisStoreSettings()
        redis_queue = await AsyncRedisWorkQueue.from_url(url, settings=settings, policy=policy)
        return redis_queue, AsyncRedisWakeup.from_url(url, settings=settings)
    if scheme in ("postgresql", "postgres"):
        from pydantic import SecretStr

        from runyard._async.postgres.queue import AsyncPostgresWorkQueue
        from runyard._async.postgres.wakeup import AsyncPostgresWakeup
        from runyard.postgres.settings import PostgresStoreSettings

        pg = PostgresStoreSettings(dsn=SecretStr(url))
        pg_queue = await AsyncPostgresWorkQueue.from_settings(pg, policy=policy)
        try:
            wakeup = await AsyncPostgresWakeup.connect(url, tables=pg.tables())
        except BaseException:
            await pg_queue.aclose()
            raise
        return pg_queue, wakeup
    raise ConfigurationError(
        f"unknown queue URL scheme {scheme!r}: use memory://, redis://, rediss:// or postgresql://"
    )


async def serve(
    url: str,
    handler: Callable[[Job], Awaitable[None]],
    settings: WorkerSettings,
    hooks: WorkerHooks,
    started: Callable[[AsyncWorker], None],
    policy: QueuePolicy | None = None,
) -> WorkerStats:
    """Open the queue, run a worker until it is stopped, close the queue.

    ``started(worker)`` is called before the worker runs (the CLI installs its signal
    handlers and status line there)."""
    queue, wakeup = await open_queue(url, policy)
    try:
        worker = AsyncWorker(queue, handler, settings=settings, wakeup=wakeup, hooks=hooks)
        started(worker)
        return await worker.run()
    finally:
        await queue.aclose()
