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
import traceback
from collections.abc import Callable, Coroutine
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
    """Import ``module:attribute`` (the working directory on the import path, as arq, rq,
    dramatiq and celery put it); a coroutine function (or an object whose ``__call__`` is
    one) for the async twin, a plain function for ``--sync``. Raises
    ConfigurationError saying what to fix; a module that failed while importing (an import
    or attribute error inside it included) is named with its traceback."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError(f"handler {spec!r} must be written module:function")
    here = os.getcwd()
    if "" not in sys.path and here not in sys.path:
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise _import_failed(spec, module_name, here, exc) from None
    try:
        handler = getattr(module, attribute)
    except AttributeError:
        raise ConfigurationError(
            f"cannot load handler {spec!r}: module {module_name} has no attribute {attribute!r}"
        ) from None
    if not callable(handler):
        raise ConfigurationError(f"handler {spec!r} is not callable")
    coroutine = _is_async(handler)
    if sync and coroutine:
        raise ConfigurationError(f"handler {spec!r} is async: drop --sync, or pass a function")
    if not sync and coroutine is False:
        raise ConfigurationError(f"handler {spec!r} is not async: pass --sync to run it on threads")
    return handler  # type: ignore[no-any-return]


def _import_failed(spec: str, module_name: str, here: str, exc: Exception) -> ConfigurationError:
    """The refusal of a handler whose module did not import: one line when the module (or a
    package of its path) is not there; else what the module raised, with its traceback."""
    missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
    if missing is not None and (module_name == missing or module_name.startswith(missing + ".")):
        return ConfigurationError(
            f"cannot load handler {spec!r}: no module named {missing!r} on the import path "
            f"(the working directory {here} is on it; install the module, or run from the "
            "directory that holds it)"
        )
    trace = "".join(traceback.format_exception(exc)).rstrip()
    return ConfigurationError(
        f"cannot load handler {spec!r}: importing {module_name} raised "
        f"{type(exc).__name__}: {exc}\n{trace}"
    )


def _is_async(handler: Callable[..., Any]) -> bool | None:
    """True for a coroutine function (a ``functools.partial`` of one included) or an object
    whose ``__call__`` is one; False for a plain function; None for a ``functools.wraps``
    wrapper of a coroutine function, which may be either: a decorator that passes the
    coroutine on (served without ``--sync``) or a sync adapter that runs it itself
    (``asyncio.run``, syncer, asyncer: served with ``--sync``). Either twin fails a job whose
    handler turned out to be the other kind, saying so."""
    call = inspect.getattr_static(type(handler), "__call__", None)
    if inspect.iscoroutinefunction(handler) or (
        call is not None and inspect.iscoroutinefunction(call)
    ):
        return True
    try:
        wrapped = inspect.unwrap(handler)
    except ValueError:  # a __wrapped__ cycle
        return False
    return None if inspect.iscoroutinefunction(wrapped) else False


class _Signals:
    """The first SIGTERM/SIGINT stops the worker gracefully; the second exits at once.

    ``threaded``: the handler runs in the main thread between two of its bytecodes (the
    thread twin, ``signal.signal``), which may be inside a lock that ``stop()`` takes (an
    Event's): the call is made from a thread of its own. In the asyncio twin the handler is
    a callback of the loop and calls directly. A second signal before the worker exists (the
    store still being opened, which may block on a silent server) ends the process at once:
    nothing is held yet.

    Both signals also arm a deadline that ends the process even when the worker cannot end
    itself: a store call that hangs (a network partition, with no timeout on the connection)
    or an async handler that ignores its cancellation. The first allows ``bound`` seconds
    (the shutdown grace plus the hand-back time) and ``CLOSE_SECONDS`` more to close the
    store; the second ``EXIT_SECONDS``. What the worker still held then lapses and is
    recovered."""

    CLOSE_SECONDS = 5.0
    EXIT_SECONDS = 1.0
    SAY_SECONDS = 0.5  # what the exit waits for its log line

    def __init__(self, startup: _Stoppable, *, threaded: bool, bound: float) -> None:
        self.startup = startup
        self.threaded = threaded
        self.bound = bound
        self.count = 0

    def __call__(self, *_: object) -> None:
        # Each deadline is armed before anything that may block (a log line waits for the
        # terminal or the pipe it writes to).
        self.count += 1
        if self.count == 1:
            self._exit_after(self.bound + self.CLOSE_SECONDS)
            log.info("signal received: finishing in-flight jobs (again to exit at once)")
            self._call(self.startup.stop)
            return
        if self.count == 2:
            self._exit_after(self.EXIT_SECONDS)
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

    def _exit_after(self, seconds: float) -> None:
        """End the process in ``seconds`` unless it has ended by then (a daemon thread)."""

        def exit_late() -> None:
            time.sleep(seconds)
            said = threading.Thread(
                target=log.warning,
                args=(
                    "the worker did not end within %.1f s of the signal (a store call that "
                    "hangs, or a handler that ignores its cancellation): exiting; held leases "
                    "lapse and are recovered",
                    seconds,
                ),
                daemon=True,
            )
            said.start()
            said.join(self.SAY_SECONDS)  # a blocked stderr must not hold the exit up
            os._exit(0)

        threading.Thread(target=exit_late, name="runyard-exit", daemon=True).start()


class _StatusLine:
    """On a terminal: one line rewritten every second (jobs/s, in flight, failures), with the
    log's lines written above it (``write_line``: the status line is cleared first)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.worker: _Stoppable | None = None
        # Re-entrant, as logging's own locks are: the thread twin's signal handler logs from
        # the main thread, which may be inside write_line when the signal lands.
        self.lock = threading.RLock()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="runyard-status", daemon=True)

    def start(self, worker: _Stoppable) -> None:
        self.worker = worker
        self.thread.start()

    def write_line(self, text: str) -> None:
        """Write ``text`` as a line of its own; the status line comes back within a second."""
        with self.lock:
            self.out.write("\r\x1b[K" + text + "\n")
            self.out.flush()

    def close(self) -> None:
        """Stop rewriting and clear the status line (what is printed next starts clean)."""
        self.done.set()
        if self.thread.is_alive():
            self.thread.join()
        with self.lock:
            self.out.write("\r\x1b[K")
            self.out.flush()

    def _run(self) -> None:
        last, then = 0, time.monotonic()
        while not self.done.wait(1.0):
            assert self.worker is not None
            stats, now = self.worker.stats(), time.monotonic()
            settled = stats.completed + stats.failed
            rate = (settled - last) / max(now - then, 1e-9)
            last, then = settled, now
            with self.lock:
                self.out.write(
                    f"\r{rate:8.1f} jobs/s  {stats.in_flight:4d} in flight  "
                    f"{stats.completed} done  {stats.failed} failed  {stats.dead} dead  "
                )
                self.out.flush()


class _AboveStatus(logging.Handler):
    """A logging handler that writes each record as a line above the status line."""

    def __init__(self, status: _StatusLine) -> None:
        super().__init__()
        self.status = status

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.status.write_line(self.format(record))
        except Exception:
            self.handleError(record)


_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
STATUS_OFF_LINE = "status line off: the application's logging writes to the terminal"


def _writes_to_a_terminal(handler: logging.Handler) -> bool:
    """Whether ``handler`` may write to the terminal: a stream handler on one (not on a file
    or a pipe), or one whose output the command cannot see (another kind of handler, a
    stream that cannot say whether it is a terminal)."""
    if isinstance(handler, logging.NullHandler):
        return False
    if not isinstance(handler, logging.StreamHandler):
        return True
    if handler.stream is None:  # a file handler that opens its file on the first line
        return False
    return _on_a_terminal(handler.stream)


def _on_a_terminal(stream: object) -> bool:
    """Whether ``stream`` is a terminal: True too for one that cannot say, False once closed."""
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except AttributeError:
        return True
    except ValueError:  # a closed file
        return False


def _writes_to_the_console(handler: logging.Handler, stderr: TextIO) -> bool:
    """Whether ``handler`` writes where the command's own handler does, or to a terminal: a
    stream handler on ``stderr``, on stdout or on a terminal (or on a stream that cannot say).
    A runyard line propagated to it would come twice there. Other handlers (files, log
    shippers, queues) are taken not to."""
    if not isinstance(handler, logging.StreamHandler) or handler.stream is None:
        return False
    stream = handler.stream
    return stream in (stderr, sys.stderr, sys.stdout) or _on_a_terminal(stream)


class _CommandLogs:
    """Where the command's log lines go, set up once the handler's module is imported (it
    may configure logging itself). runyard's own lines, INFO and up, always reach stderr,
    once each: through the command's handler on the ``runyard`` logger; they propagate to
    the application's root handlers (a file, a log shipper) unless one of those writes to the
    console, where they would come twice (``close`` restores it); on a terminal they come
    above the status line. The root logger is the application's once its module configured
    it (it has handlers), else the command's: INFO and up, above the status line too. A
    status line runs only on a terminal, and not when the application's root handlers may
    write to it (their lines would land in the middle of it): then ``STATUS_OFF_LINE``."""

    def __init__(self, stderr: TextIO) -> None:
        root = logging.getLogger()
        theirs = [h for h in root.handlers if _writes_to_a_terminal(h)]
        on_terminal = stderr.isatty()
        self.status = _StatusLine(stderr) if on_terminal and not theirs else None
        self.runyard = logging.getLogger("runyard")
        self._saved = (self.runyard.level, self.runyard.propagate)
        self.handler = self._handler(stderr)
        self.runyard.addHandler(self.handler)
        if self.runyard.level == logging.NOTSET or self.runyard.level > logging.INFO:
            self.runyard.setLevel(logging.INFO)  # a DEBUG the application set stays
        # Propagated too, to the application's root handlers (a file, a log shipper): they get
        # runyard's lines as well. Not when one of them writes to the console (stderr, stdout,
        # a terminal), nor to the command's own root handler: the line would come twice.
        self.runyard.propagate = bool(root.handlers) and not any(
            _writes_to_the_console(h, stderr) for h in root.handlers
        )
        if not root.handlers:
            logging.basicConfig(level=logging.INFO, handlers=[self._handler(stderr)])
        if on_terminal and theirs:
            log.info(STATUS_OFF_LINE)

    def _handler(self, stderr: TextIO) -> logging.Handler:
        handler: logging.Handler
        if self.status is not None:
            handler = _AboveStatus(self.status)
        else:
            handler = logging.StreamHandler(stderr)
        handler.setFormatter(logging.Formatter(_LOG_FORMAT))
        return handler

    def close(self) -> None:
        """Clear the status line; give the ``runyard`` logger back its level and propagation."""
        if self.status is not None:
            self.status.close()
        self.runyard.removeHandler(self.handler)
        self.runyard.setLevel(self._saved[0])
        self.runyard.propagate = self._saved[1]


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
    # One line per failure, retry, dead letter and lost lease: the worker's own log lines
    # (stdlib logging, INFO and up), above the status line on a terminal.
    logs = _CommandLogs(sys.stderr)
    status = logs.status
    bound = settings.shutdown_grace + settings.handback_seconds

    def started(worker: _Stoppable) -> None:
        if threading.current_thread() is threading.main_thread():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                stopper = _Signals(worker, threaded=True, bound=bound)
                signal.signal(signal.SIGTERM, stopper)
                signal.signal(signal.SIGINT, stopper)
            else:
                stopper = _Signals(worker, threaded=False, bound=bound)
                loop.add_signal_handler(signal.SIGTERM, stopper)
                loop.add_signal_handler(signal.SIGINT, stopper)
        if status is not None:
            status.start(worker)

    try:
        if sync:
            from runyard._sync.cli.worker import serve as serve_sync

            return serve_sync(url, handler, settings, WorkerHooks(), started, policy)
        from runyard._async.cli.worker import serve as serve_async

        return _run_async(serve_async(url, handler, settings, WorkerHooks(), started, policy))
    finally:
        logs.close()


def _run_async(main: Coroutine[Any, Any, WorkerStats]) -> WorkerStats:
    """``asyncio.run(main)``, except that tasks still running at the end (jobs whose
    handlers ignore their cancellation, which the worker left running) are waited for at
    most a second: ``asyncio.run`` would cancel them again and wait for good. The process
    exits with them unfinished; their items were handed back or lapse."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(main)
    finally:
        left = asyncio.all_tasks(loop)
        stuck: set[asyncio.Task[Any]] = set()
        for task in left:
            task.cancel()
        if left:
            _, stuck = loop.run_until_complete(asyncio.wait(left, timeout=1.0))
        asyncio.set_event_loop(None)
        if stuck:
            log.warning("exiting with %d task(s) that ignored their cancellation", len(stuck))
            loop.set_exception_handler(lambda *_: None)  # no "Task was destroyed" at exit
        else:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()
