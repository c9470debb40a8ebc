"""``runyard worker`` as a process: started before its store it waits for it (a SIGTERM meanwhile
exits 0, a second one at once even while an open hangs), a stop while the store opens ends
the worker, an unopenable SQLite file is a configuration error, with no URL it serves the
embedded default, ``sqlite:///runyard.db``, and a URL's ``table_prefix`` picks the tables."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import runyard._async.cli.worker as async_cli
import runyard._sync.cli.worker as sync_cli
from runyard.cli.app import app
from runyard.redis import RedisStoreSettings, RedisWorkQueue
from runyard.sqlite import SqliteTables, SqliteWorkQueue, connect
from runyard.worker import Job, WorkerHooks, WorkerSettings
from typer.testing import CliRunner

from tests.support.proxy import ReplyDroppingProxy
from tests.support.redis_plugin import Clients, RedisTarget, fresh_namespace
from tests.support.worker_jobs import notes
from tests.test_worker_process import ROOT, SAFETY, rest_of_log, wait_for_line, wait_for_starts


def start(
    directory: Path, flavour: str, env: dict[str, str], *options: str
) -> subprocess.Popen[bytes]:
    handler = "tests.support.worker_jobs:" + ("gated_sync" if flavour == "sync" else "gated")
    command = [sys.executable, "-c", "from runyard.cli.app import app; app()", "worker", handler]
    command += [*options, *(["--sync"] if flavour == "sync" else [])]
    env = {**os.environ, **env, "RUNYARD_TEST_WORKER_DIR": str(directory)}
    env["PYTHONPATH"] = str(ROOT)
    env.pop("RUNYARD_URL", None)
    return subprocess.Popen(command, cwd=directory, env=env, stderr=subprocess.PIPE)


def finish(process: subprocess.Popen[bytes]) -> tuple[int, str]:
    """SIGTERM, then the exit code and the rest of the log."""
    process.send_signal(signal.SIGTERM)
    err = rest_of_log(process)
    return process.returncode, err.decode()


@pytest.mark.parametrize("flavour", ["async", "sync"])
def test_a_worker_started_before_its_store_waits_and_then_serves(
    local_redis_target: RedisTarget, tmp_path: Path, flavour: str
) -> None:
    # Nothing listens on the proxy's port until the test starts it: the worker's opens are
    # refused, it logs and retries with its backoff instead of exiting; once the proxy
    # forwards to Redis it serves the queue. Then SIGTERM: a clean exit.
    namespace = fresh_namespace()
    proxy = ReplyDroppingProxy(local_redis_target.port, local_redis_target.host)
    env = {"RUNYARD_REDIS_NAMESPACE": namespace, "RUNYARD_REDIS_DURABLE": "false"}
    url = f"redis://127.0.0.1:{proxy.port}/0"
    process = start(tmp_path, flavour, env, "--url", url)
    queue = RedisWorkQueue(
        Clients.for_target(local_redis_target),
        settings=RedisStoreSettings(namespace=namespace, durable=False),
        owns_client=True,
    )
    try:
        wait_for_line(process, "store unavailable at startup")
        proxy.start()
        item = queue.enqueue("acme", {"n": 1})
        assert wait_for_starts(tmp_path, 1, process) == [item.item_id]
        (tmp_path / "release").touch()
        code, log = finish(process)
        assert code == 0 and "Traceback" not in log, log
        assert ("done", item.item_id) in notes(tmp_path)
        assert queue.get_item("acme", item.item_id) is None  # completed
    finally:
        if process.poll() is None:
            process.kill()
        queue.close()
        proxy.stop()
        local_redis_target.purge(namespace)


@pytest.mark.parametrize("flavour", ["async", "sync"])
def test_a_worker_stopped_while_its_store_is_down_exits_0(tmp_path: Path, flavour: str) -> None:
    proxy = ReplyDroppingProxy(1)  # never started: every connection is refused
    process = start(tmp_path, flavour, {}, "--url", f"redis://127.0.0.1:{proxy.port}/0")
    try:
        wait_for_line(process, "store unavailable at startup")
        code, log = finish(process)
        assert code == 0 and "Traceback" not in log, log
        assert "stopped: 0 completed" in log
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.parametrize("flavour", ["async", "sync"])
def test_a_worker_without_a_url_serves_the_default_sqlite_file(
    tmp_path: Path, flavour: str
) -> None:
    # No --url and no RUNYARD_URL: sqlite:///runyard.db in the working directory, its
    # schema created on first use; a queue opened on that file afterwards sees the item done.
    process = start(tmp_path, flavour, {})
    try:
        wait_for_line(process, "serving")  # the store is open: the file has its schema
        connection = connect(tmp_path / "runyard.db")
        queue = SqliteWorkQueue.open(connection)
        item = queue.enqueue("acme", {"n": 1})
        assert wait_for_starts(tmp_path, 1, process) == [item.item_id]
        (tmp_path / "release").touch()
        code, log = finish(process)
        assert code == 0 and "Traceback" not in log, log
        assert queue.get_item("acme", item.item_id) is None  # completed
        connection.close()
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.parametrize("flavour", ["async", "sync"])
def test_a_worker_serves_a_sqlite_file_with_the_urls_table_prefix(
    tmp_path: Path, flavour: str
) -> None:
    db = tmp_path / "app.db"
    queue = SqliteWorkQueue.open(db, create_schema=True, tables=SqliteTables.with_prefix("app_"))
    item = queue.enqueue("acme", {"n": 1})
    process = start(tmp_path, flavour, {}, "--url", f"sqlite:///{db}?table_prefix=app_")
    try:
        assert wait_for_starts(tmp_path, 1, process) == [item.item_id]
        (tmp_path / "release").touch()
        code, log = finish(process)
        assert code == 0 and "Traceback" not in log, log
        assert queue.get_item("acme", item.item_id) is None  # completed
    finally:
        if process.poll() is None:
            process.kill()
        queue.close()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers (a hung server)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not done.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    done.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.parametrize("flavour", ["async", "sync"])
def test_a_second_signal_while_the_store_hangs_exits_at_once(
    silent_port: int, tmp_path: Path, flavour: str
) -> None:
    # The open waits on a server that never answers (Redis: up to its retries x its socket
    # timeout, half a minute). The first SIGTERM stops the startup once that open returns;
    # the second ends the process at once: nothing is held yet.
    process = start(tmp_path, flavour, {}, "--url", f"redis://127.0.0.1:{silent_port}/0")
    try:
        wait_for_line(process, "opening the redis queue")  # logged once the handlers are in
        process.send_signal(signal.SIGTERM)
        wait_for_line(process, "signal received")
        process.send_signal(signal.SIGTERM)
        err = rest_of_log(process)
        log = err.decode()
        # Ended before the open gave up: that would have logged the outage (and taken about
        # 30 s, the open's retries times its socket timeout).
        assert "store unavailable at startup" not in log, log
        assert process.returncode == 0 and "Traceback" not in log, log
    finally:
        if process.poll() is None:
            process.kill()


class _StopWhileOpening:
    """``open_queue`` replaced: the stop (a signal) lands while the queue is being opened."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.startups: list[Any] = []

    def started(self, startup: Any) -> None:
        self.startups.append(startup)

    def opening(self, url: str, policy: Any = None) -> Any:
        self.startups[0].stop()
        return self.real("memory://", policy)

    async def opening_async(self, url: str, policy: Any = None) -> Any:
        self.startups[0].stop()
        return await self.real("memory://", policy)


def test_a_stop_while_the_async_queue_opens_ends_the_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = _StopWhileOpening(async_cli.open_queue)
    monkeypatch.setattr(async_cli, "open_queue", fake.opening_async)

    async def handler(job: Job) -> None:
        pass

    async def serve() -> Any:
        served = async_cli.serve(
            "memory://", handler, WorkerSettings(), WorkerHooks(), fake.started
        )
        return await asyncio.wait_for(served, SAFETY)  # a worker left serving fails the test

    stats = asyncio.run(serve())
    assert stats.completed == 0 and fake.startups[0].worker is None


def test_a_stop_while_the_sync_queue_opens_ends_the_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = _StopWhileOpening(sync_cli.open_queue)
    monkeypatch.setattr(sync_cli, "open_queue", fake.opening)
    done: list[Any] = []
    thread = threading.Thread(
        target=lambda: done.append(
            sync_cli.serve(
                "memory://", lambda job: None, WorkerSettings(), WorkerHooks(), fake.started
            )
        ),
        daemon=True,
    )
    thread.start()
    thread.join(SAFETY)
    if not done:  # the worker kept serving: end it, then fail
        worker = fake.startups[0].worker
        if worker is not None:
            worker.abort()
        thread.join(5)
    assert done and done[0].completed == 0 and fake.startups[0].worker is None


@pytest.mark.parametrize("sync", [False, True])
@pytest.mark.parametrize("how", ["no such directory", "not a database", "no schema"])
def test_an_unusable_sqlite_file_is_a_configuration_error(
    tmp_path: Path, sync: bool, how: str
) -> None:
    path = tmp_path / "x.db"
    if how == "no such directory":
        path = tmp_path / "missing" / "dir" / "x.db"
    elif how == "not a database":
        path.write_text("hello")
    else:
        import sqlite3

        other = sqlite3.connect(path)
        other.execute("CREATE TABLE t (x)")
        other.commit()
        other.close()
    spec = "tests.support.worker_jobs:" + ("gated_sync" if sync else "gated")
    args = ["worker", spec, "--url", f"sqlite:///{path}", *(["--sync"] if sync else [])]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    said = " ".join(result.output.split())
    expected = "create runyard's schema" if how == "no schema" else "cannot open the SQLite"
    # After the command's own log lines (it logs to stderr, as a process does).
    assert "error:" in said and expected in said.split("error:", 1)[1], said


@pytest.mark.parametrize("flavour", ["async", "sync"])
def test_each_failure_and_dead_letter_is_one_line_of_the_log(tmp_path: Path, flavour: str) -> None:
    # The lines that name an item: one for its retry, one for its dead letter (and none
    # for a completion), whatever hooks or handlers log besides.
    db = tmp_path / "q.db"
    queue = SqliteWorkQueue.open(db, create_schema=True)
    retried = queue.enqueue("acme", {"n": 1})
    dead = queue.enqueue("acme", {"permanent": True})
    handler = "tests.support.worker_jobs:" + ("picky_sync" if flavour == "sync" else "picky")
    command = [sys.executable, "-c", "from runyard.cli.app import app; app()", "worker", handler]
    command += ["--url", f"sqlite:///{db}", *(["--sync"] if flavour == "sync" else [])]
    env = {**os.environ, "RUNYARD_TEST_WORKER_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE)
    try:
        head = wait_for_line(process, "will retry")  # due again a second later (the backoff)
        while ("done", retried.item_id) not in notes(tmp_path):
            assert process.poll() is None
            threading.Event().wait(0.05)
        code, rest = finish(process)
        log = head + rest
    finally:
        if process.poll() is None:
            process.kill()
    assert code == 0, log
    lines = log.splitlines()
    about_retried = [line for line in lines if retried.item_id in line]
    about_dead = [line for line in lines if dead.item_id in line]
    assert len(about_retried) == 1 and "will retry" in about_retried[0], log
    assert len(about_dead) == 1 and "dead-lettered" in about_dead[0], log
    assert queue.get_item("acme", retried.item_id) is None  # completed on its second attempt
    queue.close()


def test_the_job_timeout_help_says_what_it_takes_and_zero_is_refused_naming_it() -> None:
    # The help showed [x>=0], while 0 was refused as a worker setting.
    runner = CliRunner()
    shown = " ".join(
        runner.invoke(app, ["worker", "--help"], env={"COLUMNS": "200"}).output.split()
    )
    line = next(part for part in shown.split("│") if "--job-timeout" in part)
    assert "x>=0" not in line and "more than 0" in line
    for bad in ("0", "-1"):
        result = runner.invoke(app, ["worker", "x:y", "--job-timeout", bad])
        assert result.exit_code == 2, result.output
        assert "job_timeout must be a finite number > 0" in " ".join(result.output.split())
