"""``runyard worker`` as a process on the machine's Redis and PostgreSQL, both twins: SIGTERM
finishes in-flight jobs and leaves the rest ready; after kill -9 another worker finishes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from runyard import QueuePolicy
from runyard._sync.protocols import WorkQueue
from runyard.redis import RedisStoreSettings, RedisWorkQueue
from runyard.worker import Job, Worker, WorkerHooks

from tests._sync.postgres_support import open_queue
from tests.support.postgres_plugin import PG_HOST, PG_PORT
from tests.support.redis_plugin import Clients, RedisTarget, fresh_namespace
from tests.support.worker_jobs import notes

ROOT = Path(__file__).resolve().parent.parent
SAFETY = 30.0
PG_URL = f"postgresql://postgres@{PG_HOST}:{PG_PORT}/test?options=-c%20statement_timeout%3D30s"


@dataclass
class Backend:
    url: str
    env: dict[str, str]
    open: Callable[[QueuePolicy], WorkQueue]


@pytest.fixture(params=["redis", "postgres"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "redis":
        target: RedisTarget = request.getfixturevalue("local_redis_target")
        namespace = fresh_namespace()
        settings = RedisStoreSettings(namespace=namespace, durable=False)

        def open_redis(policy: QueuePolicy) -> WorkQueue:
            client = Clients.for_target(target)
            return RedisWorkQueue(client, settings=settings, policy=policy, owns_client=True)

        env = {"RUNYARD_REDIS_NAMESPACE": namespace, "RUNYARD_REDIS_DURABLE": "false"}
        yield Backend(f"redis://{target.host}:{target.port}/0", env, open_redis)
        target.purge(namespace)
        return
    tables = request.getfixturevalue("pg_tables")

    def open_pg(policy: QueuePolicy) -> WorkQueue:
        return open_queue(tables, policy=policy)

    yield Backend(PG_URL, {"RUNYARD_POSTGRES_DB_SCHEMA": tables.schema}, open_pg)


def start_worker(
    backend: Backend, directory: Path, flavour: str, *options: str
) -> subprocess.Popen[bytes]:
    handler = "tests.support.worker_jobs:" + ("gated_sync" if flavour == "sync" else "gated")
    command = [sys.executable, "-c", "from runyard.cli.app import app; app()", "worker", handler]
    command += ["--url", backend.url, *options, *(["--sync"] if flavour == "sync" else [])]
    env = {**os.environ, **backend.env, "RUNYARD_TEST_WORKER_DIR": str(directory)}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE)


def wait_for_starts(directory: Path, n: int, process: subprocess.Popen[bytes]) -> list[str]:
    """Wait until ``n`` jobs noted their start (the worker process must stay alive)."""
    deadline = time.monotonic() + SAFETY
    while time.monotonic() < deadline:
        started = [item for event, item in notes(directory) if event == "start"]
        if len(started) >= n:
            return started
        assert process.poll() is None, process.stderr.read() if process.stderr else b""
        time.sleep(0.01)
    raise AssertionError(f"{n} jobs did not start within {SAFETY} s")


def wait_for_line(process: subprocess.Popen[bytes], text: str) -> str:
    """Read the worker's log (stderr) until a line holding ``text``; what was read. A
    worker that exits first (or never logs it: its grace ends, gated jobs are handed back
    and it exits) ends the wait with the log's end."""
    assert process.stderr is not None
    lines: list[str] = []
    timer = threading.Timer(SAFETY, process.kill)  # a worker that hangs fails the test
    timer.start()
    try:
        while line := process.stderr.readline().decode():
            lines.append(line)
            if text in line:
                return "".join(lines)
    finally:
        timer.cancel()
    raise AssertionError(f"the worker never logged {text!r}:\n{''.join(lines)}")


def rest_of_log(process: subprocess.Popen[bytes]) -> bytes:
    """The rest of the worker's log (stderr) once it exits, read through the buffered reader
    ``wait_for_line`` reads lines from: ``Popen.communicate`` reads the pipe's descriptor, so
    the lines ``readline`` had read ahead (those after the awaited one) were lost (a dead
    letter's line went missing so, once in a full run). A worker that hangs is killed."""
    assert process.stderr is not None
    timer = threading.Timer(SAFETY, process.kill)
    timer.start()
    try:
        rest = process.stderr.read()
    finally:
        timer.cancel()
    process.wait(timeout=SAFETY)
    return rest


@pytest.mark.parametrize("flavour", ["async", "sync"])
def test_sigterm_finishes_in_flight_jobs_and_leaves_the_rest_ready(
    backend: Backend, tmp_path: Path, flavour: str
) -> None:
    queue = backend.open(QueuePolicy())
    items = [queue.enqueue("acme", {"n": n}).item_id for n in range(5)]
    process = start_worker(backend, tmp_path, flavour, "--concurrency", "2")
    started = wait_for_starts(tmp_path, 2, process)
    process.send_signal(signal.SIGTERM)
    # The gate opens once the worker has taken the signal in: a job that finished before
    # that (on a loaded machine the signal's handler can run after the jobs' next turn) may
    # have its slot claimed again, as it would without the signal.
    seen = wait_for_line(process, "signal received")
    (tmp_path / "release").touch()
    err = rest_of_log(process)
    assert process.returncode == 0, seen + err.decode()
    done = [item for event, item in notes(tmp_path) if event == "done"]
    assert sorted(done) == sorted(started) and len(set(done)) == 2
    for item_id in items:
        stored = queue.get_item("acme", item_id)
        if item_id in done:
            assert stored is None
        else:
            assert stored is not None and (stored.state, stored.attempts) == ("ready", 0)
    queue.close()


@pytest.mark.parametrize("flavour", ["async", "sync"])
def test_after_kill_9_another_worker_finishes_the_items(
    backend: Backend, tmp_path: Path, flavour: str
) -> None:
    policy = QueuePolicy(lease_seconds=1)
    queue = backend.open(policy)
    items = {queue.enqueue("acme", {"n": n}).item_id for n in range(3)}
    process = start_worker(backend, tmp_path, flavour, "--concurrency", "2", "--lease-seconds", "1")
    wait_for_starts(tmp_path, 2, process)
    process.kill()
    process.communicate(timeout=SAFETY)
    finished: list[str] = []
    all_done = threading.Event()

    def handler(job: Job) -> None:
        finished.append(job.item_id)

    def ended(job: Job, outcome: str) -> None:
        if outcome == "completed" and len(finished) == len(items):
            all_done.set()

    worker = Worker(queue, handler, hooks=WorkerHooks(on_job_end=ended), reap_seconds=0.1)
    runner = threading.Thread(target=worker.run)
    runner.start()
    assert all_done.wait(SAFETY), f"finished only {finished}"
    worker.stop()
    runner.join(SAFETY)
    assert sorted(finished) == sorted(items)
    assert queue.stats().leased == 0 and all(queue.get_item("acme", i) is None for i in items)
    queue.close()
