"""``runyard worker`` ends when it is told to, whatever holds it up: a signal before its own
handlers are in (the handler's module still importing) exits 0 at once; an async handler
that ignores its cancellation does not keep the worker from ending; a store call that hangs
(a network partition) ends in the first signal's bound, or at once after a second signal."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runyard import QueuePolicy
from runyard.cli import EARLY_SIGNAL_LINE
from runyard.postgres import StateTables
from runyard.sqlite import SqliteWorkQueue

from tests._sync.postgres_support import open_queue
from tests.support.postgres_plugin import PG_HOST, PG_PORT
from tests.support.proxy import ReplyDroppingProxy
from tests.test_worker_cli import finish
from tests.test_worker_process import ROOT, SAFETY, rest_of_log, wait_for_line, wait_for_starts

HARD_EXIT_LINE = "the worker did not end within"


_SLOW_IMPORT = """
import sys, time
print("handler module importing", file=sys.stderr, flush=True)
time.sleep({seconds})

async def handle(job):
    pass

def handle_sync(job):
    pass
"""


def start_console(directory: Path, flavour: str, seconds: float) -> subprocess.Popen[bytes]:
    """The console script's own entry point, ``runyard.cli:main``, serving memory:// with a
    handler whose module takes ``seconds`` to import (a web app's often takes seconds)."""
    (directory / "slow_handler.py").write_text(_SLOW_IMPORT.format(seconds=seconds))
    handler = "slow_handler:" + ("handle_sync" if flavour == "sync" else "handle")
    command = [sys.executable, "-c", "from runyard.cli import main; main()", "worker", handler]
    command += ["--url", "memory://", *(["--sync"] if flavour == "sync" else [])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(directory), str(ROOT)])}
    return subprocess.Popen(command, cwd=directory, env=env, stderr=subprocess.PIPE)


@pytest.mark.parametrize("flavour", ["async", "sync"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_before_the_worker_starts_exits_0_at_once(
    tmp_path: Path, flavour: str, signum: int
) -> None:
    # The handler's module is still being imported (for longer than the test waits): Python's
    # default would end the process with 143 (SIGTERM) or a KeyboardInterrupt traceback.
    process = start_console(tmp_path, flavour, SAFETY * 2)
    try:
        wait_for_line(process, "handler module importing")
        process.send_signal(signum)
        err = rest_of_log(process)
        log = err.decode()
        assert process.returncode == 0, log
        assert EARLY_SIGNAL_LINE in log and "Traceback" not in log, log
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.parametrize("flavour", ["async", "sync"])
def test_once_the_worker_starts_its_own_signal_handlers_take_over(
    tmp_path: Path, flavour: str
) -> None:
    process = start_console(tmp_path, flavour, 0)
    try:
        wait_for_line(process, "serving")
        code, log = finish(process)
        assert code == 0 and "finishing in-flight jobs" in log, log
        assert EARLY_SIGNAL_LINE not in log and "stopped: 0 completed" in log, log
    finally:
        if process.poll() is None:
            process.kill()


def start_handler(
    directory: Path, handler: str, url: str, *options: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``runyard worker tests.support.worker_jobs:<handler>`` on ``url``."""
    command = [sys.executable, "-c", "from runyard.cli import main; main()", "worker"]
    command += [f"tests.support.worker_jobs:{handler}", "--url", url, *options]
    command += ["--sync"] if handler.endswith("_sync") else []
    full = {**os.environ, **(env or {}), "RUNYARD_TEST_WORKER_DIR": str(directory)}
    full["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen(command, cwd=directory, env=full, stderr=subprocess.PIPE)


def test_an_async_handler_that_ignores_its_cancellation_does_not_hold_the_worker(
    tmp_path: Path,
) -> None:
    # Past the grace the job is given up (cancelled) and its item handed back; the handler
    # catches every cancellation. The worker waits a moment for it, then ends anyway.
    url = f"sqlite:///{tmp_path / 'q.db'}"
    queue = SqliteWorkQueue.open(tmp_path / "q.db", create_schema=True)
    item = queue.enqueue("acme", {"n": 1})
    process = start_handler(tmp_path, "stubborn", url, "--shutdown-grace", "0.2")
    try:
        assert wait_for_starts(tmp_path, 1, process) == [item.item_id]
        code, log = finish(process)
        assert code == 0 and "Traceback" not in log, log
        assert "ignored their cancellation" in log and "1 handed back" in log, log
        back = queue.get_item("acme", item.item_id)
        assert back is not None and back.state == "ready" and back.attempts == 0
    finally:
        if process.poll() is None:
            process.kill()
        queue.close()


def _stuck(proxy: ReplyDroppingProxy, process: subprocess.Popen[bytes]) -> None:
    """Wait until the partitioned proxy swallowed a request or a reply: a store call of the
    worker's loop then waits for good (nothing else talks to PostgreSQL here: the job waits
    at its gate, and the wake-up connection only listens)."""
    deadline = time.monotonic() + SAFETY
    while proxy.swallowed == 0:
        if process.poll() is not None or time.monotonic() > deadline:
            err = process.stderr.read().decode() if process.stderr else ""
            raise AssertionError(f"no store call sent:\n{err}")
        time.sleep(0.01)


@pytest.mark.parametrize("flavour", ["async", "sync"])
@pytest.mark.parametrize("signals", [1, 2], ids=["one signal", "two signals"])
def test_a_worker_whose_store_hangs_still_ends(
    pg_tables: StateTables, tmp_path: Path, flavour: str, signals: int
) -> None:
    # PostgreSQL through a proxy that then partitions the network: every store call the
    # worker sends waits for good (no socket timeout). After the grace its hand-back hangs.
    # One signal: the process ends once the grace, the hand-back time and the close
    # allowance have passed. Two: the second ends it at once.
    proxy = ReplyDroppingProxy(PG_PORT, PG_HOST)
    proxy.start()
    queue = open_queue(pg_tables, policy=QueuePolicy())
    url = f"postgresql://postgres@127.0.0.1:{proxy.port}/test?options=-c%20statement_timeout%3D30s"
    handback = "0.5" if signals == 1 else "600"
    handler = "gated_sync" if flavour == "sync" else "gated"
    env = {"RUNYARD_POSTGRES_DB_SCHEMA": pg_tables.schema}
    options = ("--shutdown-grace", "0", "--handback-seconds", handback)
    process = start_handler(tmp_path, handler, url, *options, env=env)
    try:
        item = queue.enqueue("acme", {"n": 1})
        assert wait_for_starts(tmp_path, 1, process) == [item.item_id]
        proxy.partition()
        process.send_signal(signal.SIGTERM)
        wait_for_line(process, "signal received")
        _stuck(proxy, process)  # the hand-back (or a call sent before it) waits for good
        if signals == 2:
            process.send_signal(signal.SIGTERM)
        err = rest_of_log(process)
        log = err.decode()
        assert process.returncode == 0 and HARD_EXIT_LINE in log, log
        if signals == 2:
            assert "within 1.0 s" in log, log
    finally:
        if process.poll() is None:
            process.kill()
        queue.close()
        proxy.stop()


_FORKING = """
import os, sys, time
pid = os.fork()
if pid == 0:  # the child: as a process pool's worker would, it outlives the import
    time.sleep(60)
    os._exit(3)
with open("child.pid", "w") as out:
    out.write(str(pid))

async def handle(job):
    pass
"""


def test_a_child_forked_while_the_handler_imports_keeps_the_default_signal_action(
    tmp_path: Path,
) -> None:
    # The early handler is the worker process's: a child forked during the import (its
    # handlers inherited) ends on SIGTERM as Python's default says, and says nothing.
    (tmp_path / "forking_handler.py").write_text(_FORKING)
    command = [sys.executable, "-c", "from runyard.cli import main; main()", "worker"]
    command += ["forking_handler:handle", "--url", "memory://"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE)
    try:
        wait_for_line(process, "serving")
        child = int((tmp_path / "child.pid").read_text())
        os.kill(child, signal.SIGTERM)
        # The child is the worker's, which never waits for it: it stays a zombie, whose
        # wait status /proc shows (the last field of its stat line).
        deadline = time.monotonic() + SAFETY
        while (stat := Path(f"/proc/{child}/stat").read_text()).rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child did not end on SIGTERM"
            time.sleep(0.01)
        assert int(stat.split()[-1]) & 0x7F == signal.SIGTERM  # ended by the signal itself
        code, log = finish(process)
        assert code == 0 and EARLY_SIGNAL_LINE not in log, log
    finally:
        if process.poll() is None:
            process.kill()
        with contextlib.suppress(FileNotFoundError, ProcessLookupError, ValueError):
            os.kill(int((tmp_path / "child.pid").read_text()), signal.SIGKILL)


_SIGNAL_WHILE_WRITING = """
import logging, os, signal, sys
from runyard.cli.worker import _AboveStatus, _LOG_FORMAT, _Signals, _StatusLine

class Terminal:  # the signal lands while the main thread writes a log line to it
    signalled = False
    def write(self, text):
        if not Terminal.signalled:
            Terminal.signalled = True
            os.kill(os.getpid(), signal.SIGTERM)
        sys.stdout.write(text.replace("\\r\\x1b[K", ""))
    def flush(self):
        sys.stdout.flush()

class Startup:
    worker = object()
    def stop(self):
        print("stopped", flush=True)
        os._exit(0)
    def abort(self):
        pass

status = _StatusLine(Terminal())
logging.basicConfig(level=logging.INFO, format=_LOG_FORMAT, handlers=[_AboveStatus(status)])
signal.signal(signal.SIGTERM, _Signals(Startup(), threaded=True, bound=60.0))
logging.getLogger("runyard.worker").warning("the main thread logs")
signal.pause()  # the handler's thread calls stop()
"""


def test_a_signal_while_the_main_thread_writes_above_the_status_line_still_stops(
    tmp_path: Path,
) -> None:
    # The thread twin's handler runs in the main thread and logs: a log line it interrupted
    # holds the status line's lock, which the handler's own line takes again.
    (tmp_path / "script.py").write_text(_SIGNAL_WHILE_WRITING)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(tmp_path / "script.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=SAFETY,
    )
    assert done.returncode == 0 and "stopped" in done.stdout, (done.stdout, done.stderr)
    assert "signal received" in done.stdout


_STDERR_BLOCKED = """
import logging, threading
from runyard.cli.worker import _AboveStatus, _LOG_FORMAT, _Signals, _StatusLine

class Stuck:  # a terminal paused for good: every write waits
    def write(self, text):
        threading.Event().wait()
    def flush(self):
        pass

status = _StatusLine(Stuck())
logging.basicConfig(level=logging.INFO, format=_LOG_FORMAT, handlers=[_AboveStatus(status)])
threading.Thread(target=status.write_line, args=("held",), daemon=True).start()
_Signals(None, threaded=True, bound=0.0)._exit_after(0.2)
threading.Event().wait()  # only the deadline ends this process
"""


def test_the_exit_deadline_holds_when_the_log_cannot_be_written(tmp_path: Path) -> None:
    (tmp_path / "script.py").write_text(_STDERR_BLOCKED)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(tmp_path / "script.py")], env=env, capture_output=True, timeout=SAFETY
    )
    assert done.returncode == 0, done.stderr
