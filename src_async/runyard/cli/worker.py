"""``runyard worker module:handler``: loading the handler, signals, the status line."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TextIO

from runyard.errors import ConfigurationError
from runyard.policy import QueuePolicy
from runyard.worker.job import Job
from runyard.worker.outcomes import WorkerHooks, WorkerStats
from runyard.worker.settings import WorkerSettings

__all__ = ["load_handler", "run_worker"]

log = logging.getLogger("runyard.worker")


class _Stoppable(Protocol):
    """The serve's startup (``AsyncStartup``/``Startup``): its ``worker`` once made."""

    @property
    def worker(self) -> object | None: ...

    def stop(self) -> None: ...
    def abort(self) -> None: ...
    def stats(self) -> WorkerStats: ...


def load_handler(spec: str, *, sync: bool) -> Callable[[Job], Any]:
    """Import ``module:attribute``; a coroutine function for the async twin, a plain function
    for ``--sync``. Raises ConfigurationError saying what to fix."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError(f"handler {spec!r} must be written module:function")
    try:
        handler = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"cannot load handler {spec!r}: {exc}") from None
    if not callable(handler):
        raise ConfigurationError(f"handler {spec!r} is not callable")
    coroutine = inspect.iscoroutinefunction(handler)
    if sync and coroutine:
        raise ConfigurationError(f"handler {spec!r} is async: drop --sync, or pass a function")
    if not sync and not coroutine:
        raise ConfigurationError(f"handler {spec!r} is not async: pass --sync to run it on threads")
    return handler  # type: ignore[no-any-return]


class _Signals:
    """The first SIGTERM/SIGINT stops the worker gracefully; the second exits at once.

    ``threaded``: the handler runs in the main thread between two of its bytecodes (the
    thread twin, ``signal.signal``), which may be inside a lock that ``stop()`` takes (an
    Event's): the call is made from a thread of its own. In the asyncio twin the handler is
    a callback of the loop and calls directly. A second signal before the worker exists (the
    store still being opened, which may block on a silent server) ends the process at once:
    nothing is held yet."""

    def __init__(self, startup: _Stoppable, *, threaded: bool) -> None:
        self.startup = startup
        self.threaded = threaded
        self.count = 0

    def __call__(self, *_: object) -> None:
        self.count += 1
        if self.count == 1:
            log.info("signal received: finishing in-flight jobs (again to exit at once)")
            self._call(self.startup.stop)
            return
        log.warning("second signal: exiting now; held leases lapse and are recovered")
        if self.startup.worker is None:
            logging.shutdown()
            os._exit(0)
        self._call(self.startup.abort)

    def _call(self, call: Callable[[], None]) -> None:
        if self.threaded:
            threading.Thread(target=call, name="runyard-signal", daemon=True).start()
        else:
            call()


class _StatusLine:
    """Rewrites one terminal line every second: jobs/s, in flight, failures."""

    def __init__(self, worker: _Stoppable, out: TextIO) -> None:
        self.worker, self.out = worker, out
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="runyard-status", daemon=True)

    def _run(self) -> None:
        last, then = 0, time.monotonic()
        while not self.done.wait(1.0):
            stats, now = self.worker.stats(), time.monotonic()
            settled = stats.completed + stats.failed
            rate = (settled - last) / max(now - then, 1e-9)
            last, then = settled, now
            self.out.write(
                f"\r{rate:8.1f} jobs/s  {stats.in_flight:4d} in flight  "
                f"{stats.completed} done  {stats.failed} failed  {stats.dead} dead  "
            )
            self.out.flush()


def _hooks() -> WorkerHooks:
    def failed(job: Job, exc: BaseException) -> None:
        print(f"failed {job.tenant}/{job.item_id} attempt {job.attempt}: {exc!r}", file=sys.stderr)

    def dead(job: Job, exc: BaseException) -> None:
        print(f"dead-lettered {job.tenant}/{job.item_id}: {exc!r}", file=sys.stderr)

    return WorkerHooks(on_failure=failed, on_dead=dead)


def run_worker(
    spec: str,
    url: str,
    settings: WorkerSettings,
    *,
    sync: bool,
    policy: QueuePolicy | None = None,
) -> WorkerStats:
    """Run a worker until SIGTERM/SIGINT; signal handlers are installed in the main thread.

    Raises ConfigurationError (the command then exits non-zero)."""
    handler = load_handler(spec, sync=sync)
    tty = sys.stderr.isatty()
    if not tty:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s"
        )
    status: list[_StatusLine] = []

    def started(worker: _Stoppable) -> None:
        if threading.current_thread() is threading.main_thread():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                stopper = _Signals(worker, threaded=True)
                signal.signal(signal.SIGTERM, stopper)
                signal.signal(signal.SIGINT, stopper)
            else:
                stopper = _Signals(worker, threaded=False)
                loop.add_signal_handler(signal.SIGTERM, stopper)
                loop.add_signal_handler(signal.SIGINT, stopper)
        if tty:
            status.append(_StatusLine(worker, sys.stderr))
            status[0].thread.start()

    try:
        if sync:
            from runyard._sync.cli.worker import serve as serve_sync

            return serve_sync(url, handler, settings, _hooks(), started, policy)
        from runyard._async.cli.worker import serve as serve_async

        return asyncio.run(serve_async(url, handler, settings, _hooks(), started, policy))
    finally:
        for line in status:
            line.done.set()
