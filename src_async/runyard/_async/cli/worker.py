"""Opening the worker's queue from a URL and running it (the I/O of ``runyard worker``)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from runyard._async.protocols import AsyncWorkQueue
from runyard._async.worker.loop import AsyncWorker
from runyard._async.worker.wakeup import AsyncWakeup
from runyard._flavours import AsyncEvent
from runyard.errors import ConfigurationError, RunyardError
from runyard.policy import QueuePolicy
from runyard.worker.job import Job
from runyard.worker.outcomes import WorkerHooks, WorkerStats
from runyard.worker.settings import WorkerSettings
from runyard.yard import (
    POSTGRES_SCHEMES,
    REDIS_SCHEMES,
    flag,
    parse_yard_url,
    postgres_queue_settings,
    redis_queue_settings,
    refuse_unknown,
)

__all__ = ["AsyncStartup", "open_queue", "serve"]

log = logging.getLogger("runyard.worker")
Opened = tuple[AsyncWorkQueue, AsyncWakeup | None, Callable[[], Awaitable[None]]]


async def open_queue(url: str, policy: QueuePolicy | None = None) -> Opened:
    """The queue for ``url``, its wake-up (None: the worker polls) and what closes them:
    ``memory://``, ``sqlite:///path`` (the schema created in a new file, as
    ``Yard.from_url`` does; no wake-up across processes, so the worker polls), ``redis://``,
    ``rediss://``, ``redis+cluster://``, ``rediss+cluster://``, ``postgresql://``; each with
    the options ``Yard.from_url`` takes in its query (``table_prefix``, ``schema``,
    ``namespace``, ...), parsed as it parses them. Settings the URL does not give come from
    the backends' ``RUNYARD_REDIS_*``/``RUNYARD_POSTGRES_*`` environment. Raises
    ConfigurationError, or the store's error when it cannot be reached."""
    scheme = _scheme(url)
    if scheme == "memory":
        from runyard._async.memory.queue import AsyncMemoryWorkQueue

        # As Yard.from_url: an unknown option (a typo such as namespce) is refused, not ignored.
        parsed = parse_yard_url(url, ["memory"])
        refuse_unknown((name for name, _ in parsed.query), {"live_updates"}, "memory")
        flag(parsed.split({"live_updates"})[1], "live_updates")  # its value checked too
        memory = AsyncMemoryWorkQueue(policy=policy)
        return memory, None, memory.aclose
    if scheme == "sqlite":
        from runyard._async.yard import AsyncYard

        try:
            yard = await AsyncYard.from_url(url, policy=policy)
        except ValueError as exc:  # a bad option in the URL
            raise ConfigurationError(str(exc)) from None
        return yard.queue, None, yard.aclose
    if scheme in REDIS_SCHEMES:
        from runyard._async.redis.queue import AsyncRedisWorkQueue
        from runyard._async.redis.wakeup import AsyncRedisWakeup

        dsn, settings = redis_queue_settings(url)
        redis_queue = await AsyncRedisWorkQueue.from_url(dsn, settings=settings, policy=policy)
        return redis_queue, AsyncRedisWakeup.from_url(dsn, settings=settings), redis_queue.aclose
    if scheme in POSTGRES_SCHEMES:
        from runyard._async.postgres.queue import AsyncPostgresWorkQueue
        from runyard._async.postgres.wakeup import AsyncPostgresWakeup

        pg = postgres_queue_settings(url)
        pg_queue = await AsyncPostgresWorkQueue.from_settings(pg, policy=policy)
        try:
            wakeup = await AsyncPostgresWakeup.connect(
                pg.dsn.get_secret_value(), tables=pg.tables()
            )
        except BaseException:
            await pg_queue.aclose()
            raise
        return pg_queue, wakeup, pg_queue.aclose
    raise ConfigurationError(
        f"unknown queue URL scheme {scheme!r}: use memory://, sqlite:///path, redis://, "
        "rediss://, redis+cluster://, rediss+cluster:// or postgresql://"
    )


def _scheme(url: str) -> str:
    """The URL's scheme, what comes before the first ``:`` (``sqlite:runyard.db`` is a sqlite
    URL, refused by its parser naming the forms it takes); never more of the URL, which may
    hold a password."""
    return url.partition(":")[0].lower()


class AsyncStartup:
    """What the command's signal handlers and status line hold from the start: a stop before
    the worker exists ends the startup (the store may still be down); once it runs, every
    call goes to the worker. ``stopped`` is set before the worker is looked at and ``serve``
    hands the worker over before it looks at ``stopped`` (a stop from another thread, the
    thread twin's signal, is seen by one side or the other)."""

    def __init__(self) -> None:
        self.worker: AsyncWorker | None = None
        self.stopped = AsyncEvent()

    def stop(self) -> None:
        self.stopped.set()  # first: serve checks it after handing the worker over
        if self.worker is not None:
            self.worker.stop()

    def abort(self) -> None:
        self.stopped.set()
        if self.worker is not None:
            self.worker.abort()

    def stats(self) -> WorkerStats:
        return WorkerStats() if self.worker is None else self.worker.stats()


async def _open_until_up(
    url: str, policy: QueuePolicy | None, settings: WorkerSettings, startup: AsyncStartup
) -> Opened | None:
    """``open_queue``, retried with the worker's jittered store backoff while the store is
    unreachable (a retryable runyard error, an OSError): a worker started before its store
    waits for it, as a running one waits out an outage. None when stopped meanwhile."""
    failures = 0
    while not startup.stopped.is_set():
        try:
            return await open_queue(url, policy)
        except (RunyardError, OSError) as exc:
            if isinstance(exc, RunyardError) and not exc.retryable:
                raise
            failures += 1
            delay = settings.store_backoff(failures)
            log.warning(
                "store unavailable at startup (%s); retrying in %.2f s",
                exc,
                delay,
                extra={"operation": "open", "failures": failures},
            )
            await startup.stopped.wait(delay)
    return None


async def serve(
    url: str,
    handler: Callable[[Job], Awaitable[None]],
    settings: WorkerSettings,
    hooks: WorkerHooks,
    started: Callable[[AsyncStartup], None],
    policy: QueuePolicy | None = None,
) -> WorkerStats:
    """Open the queue (waiting for the store while it is unreachable), run a worker until it
    is stopped, close the queue.

    ``started(startup)`` is called first, before the queue opens (the CLI installs its
    signal handlers and status line there): a stop while the store is still down ends the
    startup cleanly; once the worker runs, ``startup`` passes every call to it."""
    startup = AsyncStartup()
    started(startup)
    # The scheme only: a URL may hold a password.
    log.info("opening the %s queue", _scheme(url))
    opened = await _open_until_up(url, policy, settings, startup)
    if opened is None:
        return WorkerStats()
    queue, wakeup, close = opened
    worker: AsyncWorker | None = None
    try:
        if startup.stopped.is_set():  # stopped while the store was being opened
            return WorkerStats()
        worker = AsyncWorker(queue, handler, settings=settings, wakeup=wakeup, hooks=hooks)
        startup.worker = worker
        if startup.stopped.is_set():  # stopped while the worker was being made
            worker.stop()
        return await worker.run()
    finally:
        if worker is None and wakeup is not None:
            await wakeup.aclose()  # never handed to a worker (which closes its own)
        await close()
