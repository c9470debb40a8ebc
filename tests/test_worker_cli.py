"""``runyard worker`` as a process: started before its store it waits for it (a SIGTERM meanwhile
exits 0), and with no URL it serves the embedded default, ``sqlite:///runyard.db``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from runyard.redis import RedisStoreSettings, RedisWorkQueue
from runyard.sqlite import SqliteWorkQueue, connect

from tests.support.proxy import ReplyDroppingProxy
from tests.support.redis_plugin import Clients, RedisTarget, fresh_namespace
from tests.support.worker_jobs import notes
from tests.test_worker_process import ROOT, SAFETY, wait_for_line, wait_for_starts


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
    _, err = process.communicate(timeout=SAFETY)
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
