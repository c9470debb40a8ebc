"""``runyard worker``'s log on a terminal (a pseudo-terminal), both twins: each of runyard's
failure lines comes once, above the status line; when the handler's module configured logging
at import time, runyard's lines still come once each in the command's format, and the status
line is off (one line says so) rather than cut by the application's lines."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import threading
import tty
from pathlib import Path

import pytest
from runyard.cli.worker import STATUS_OFF_LINE
from runyard.sqlite import SqliteWorkQueue

from tests.test_worker_process import ROOT, SAFETY, rest_of_log

_HANDLERS = """
import logging

from runyard.worker import PermanentFailure

if {configure}:  # at import time, before the command sets its logging up
    logging.basicConfig(level=logging.WARNING, format="APP %(levelname)s %(name)s %(message)s")
log = logging.getLogger("app")


def handle_sync(job):
    log.warning("app line for %s attempt %d", job.item_id, job.attempt)
    if job.payload.get("permanent"):
        raise PermanentFailure("refused")
    if job.attempt == 1:
        raise RuntimeError("first attempt")


async def handle(job):
    handle_sync(job)
"""


class Terminal:
    """A command run with its stderr on a pseudo-terminal in raw mode (what it writes is read
    back byte for byte); ``wait_for`` reads until a text has come."""

    def __init__(self, command: list[str], cwd: Path, env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        tty.setraw(slave)
        self.process = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stderr=slave
        )
        os.close(slave)
        self._master = master
        self._output = b""
        self._changed = threading.Condition()
        self._ended = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:  # EIO: every copy of the slave side is closed
                chunk = b""
            with self._changed:
                self._output += chunk
                self._ended = not chunk
                self._changed.notify_all()
            if not chunk:
                return

    @property
    def output(self) -> str:
        with self._changed:
            return self._output.decode(errors="replace")

    def wait_for(self, text: str) -> None:
        with self._changed:
            came = self._changed.wait_for(
                lambda: text.encode() in self._output or self._ended, SAFETY
            )
        assert came and text in self.output, (text, self.output)

    def finish(self) -> int:
        """SIGTERM, then the exit code once the whole output is read."""
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(SAFETY)
        self._reader.join(SAFETY)
        os.close(self._master)
        return code


def _worker_command(tmp_path: Path, flavour: str, db: Path) -> tuple[list[str], dict[str, str]]:
    """``runyard worker`` on the handlers in ``tmp_path/app_handlers.py`` and the SQLite file
    ``db``, and its environment (no RUNYARD_URL)."""
    handler = "app_handlers:" + ("handle_sync" if flavour == "sync" else "handle")
    command = [sys.executable, "-c", "from runyard.cli.app import app; app()", "worker", handler]
    command += ["--url", f"sqlite:///{db}", *(["--sync"] if flavour == "sync" else [])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    env.pop("RUNYARD_URL", None)
    return command, env


@pytest.mark.parametrize("flavour", ["async", "sync"])
@pytest.mark.parametrize("configured", [True, False], ids=["app-configured", "not-configured"])
def test_on_a_terminal_each_failure_line_comes_once_and_nothing_cuts_the_status_line(
    tmp_path: Path, flavour: str, configured: bool
) -> None:
    (tmp_path / "app_handlers.py").write_text(_HANDLERS.format(configure=configured))
    db = tmp_path / "q.db"
    queue = SqliteWorkQueue.open(db, create_schema=True)
    retried = queue.enqueue("acme", {})
    dead = queue.enqueue("acme", {"permanent": True})
    command, env = _worker_command(tmp_path, flavour, db)
    terminal = Terminal(command, tmp_path, env)
    try:
        terminal.wait_for("dead-lettered item")
        # The retry, due a second after its failure: the status line has been drawn by then.
        terminal.wait_for(f"app line for {retried.item_id} attempt 2")
        if not configured:
            terminal.wait_for("jobs/s")
        code = terminal.finish()
    finally:
        if terminal.process.poll() is None:
            terminal.process.kill()
        queue.close()
    out = terminal.output
    assert code == 0, out
    lines = out.replace("\r\x1b[K", "\n").replace("\r", "\n").splitlines()
    about_retried = [line for line in lines if retried.item_id in line and "app line" not in line]
    about_dead = [line for line in lines if dead.item_id in line and "app line" not in line]
    # runyard's lines, in its own format (never the application's), once each.
    assert len(about_retried) == 1 and "WARNING runyard.worker item" in about_retried[0], out
    assert "will retry" in about_retried[0], out
    assert len(about_dead) == 1 and "ERROR runyard.worker dead-lettered" in about_dead[0], out
    assert sum("runyard.worker worker" in line and "serving" in line for line in lines) == 1, out
    app_lines = [line for line in lines if "app line for" in line]
    assert len(app_lines) == 3, out  # the retried item twice, the dead one once
    if configured:
        assert all(line.startswith("APP WARNING app ") for line in app_lines), out
        assert sum(STATUS_OFF_LINE in line for line in lines) == 1, out
        assert "jobs/s" not in out, out
    else:
        assert STATUS_OFF_LINE not in out, out
        # Each status line is drawn over the last and cleared before any line is written:
        # nothing is ever written after its text on the same row.
        for drawn in out.split("\r"):
            if "jobs/s" in drawn:
                assert "\n" not in drawn and "app line" not in drawn, out
        # Every log line, the application's too, starts a cleared row (the status line's).
        for line in app_lines + about_retried + about_dead:
            assert f"\r\x1b[K{line}\n" in out, (line, out)


def test_which_root_handlers_may_write_to_the_terminal(tmp_path: Path) -> None:
    import io
    import logging
    import logging.handlers
    import queue

    from runyard.cli.worker import _writes_to_a_terminal

    master, slave = pty.openpty()
    with open(slave, "w") as on_terminal:
        assert _writes_to_a_terminal(logging.StreamHandler(on_terminal))
        assert _writes_to_a_terminal(logging.handlers.QueueHandler(queue.Queue()))  # unknown
        assert not _writes_to_a_terminal(logging.StreamHandler(io.StringIO()))  # a pipe, say
        assert not _writes_to_a_terminal(logging.NullHandler())
        to_file = logging.FileHandler(tmp_path / "app.log")
        assert not _writes_to_a_terminal(to_file)
        to_file.close()
        assert not _writes_to_a_terminal(logging.FileHandler(tmp_path / "late.log", delay=True))
    os.close(master)


@pytest.mark.parametrize("flavour", ["async", "sync"])
@pytest.mark.parametrize("to_file", [True, False], ids=["app-logs-to-a-file", "app-logs-to-stderr"])
def test_off_a_terminal_runyards_lines_come_once_and_reach_an_applications_file(
    tmp_path: Path, flavour: str, to_file: bool
) -> None:
    # stderr is a pipe. The application logs to a file: runyard's lines come once on the
    # command's stderr, in its format, and reach the file as well. It logs to stderr (the
    # pipe): runyard's lines come once there all the same (not once more through its handler).
    handlers = _HANDLERS
    if to_file:
        handlers = handlers.replace(
            "logging.basicConfig(level=logging.WARNING, ",
            f"logging.basicConfig(level=logging.WARNING, filename={str(tmp_path / 'app.log')!r}, ",
        )
    (tmp_path / "app_handlers.py").write_text(handlers.format(configure=True))
    db = tmp_path / "q.db"
    queue = SqliteWorkQueue.open(db, create_schema=True)
    dead = queue.enqueue("acme", {"permanent": True})
    command, env = _worker_command(tmp_path, flavour, db)
    process = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        assert process.stderr is not None
        seen: list[str] = []
        for raw in process.stderr:  # until the dead letter's line (bounded by the process)
            seen.append(raw.decode())
            if "dead-lettered item" in seen[-1]:
                break
        process.send_signal(signal.SIGTERM)
        rest = rest_of_log(process)
    finally:
        if process.poll() is None:
            process.kill()
        queue.close()
    err = "".join(seen) + rest.decode()
    assert process.returncode == 0, err
    on_stderr = [
        line for line in err.splitlines() if dead.item_id in line and "app line" not in line
    ]
    assert len(on_stderr) == 1 and "ERROR runyard.worker dead-lettered" in on_stderr[0], err
    if not to_file:
        assert f"app line for {dead.item_id}" in err  # the application's, on stderr too
        return
    assert "app line for" not in err  # the application's lines go to its file only
    in_file = (tmp_path / "app.log").read_text()
    assert f"APP ERROR runyard.worker dead-lettered item {dead.item_id}" in in_file, in_file
    assert f"app line for {dead.item_id}" in in_file, in_file
