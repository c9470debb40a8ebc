"""Server time: a worker whose clock runs ahead cannot reap, steal or burn another's live lease.

The worker runs in its own process under ``faketime -f +40s`` (libfaketime, Debian package
``faketime``, installed by ``make system-deps``), so its ``time.time()`` is 40 s ahead of the
PostgreSQL server's and of this process's clock.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue as queue_module
import shutil
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg_pool import ConnectionPool
from runyard import QueuePolicy
from runyard.postgres import PostgresWorkQueue, StateTables

from tests.support.postgres_plugin import PG_DSN

WORKER = textwrap.dedent(
    """
    import json, logging, sys
    from psycopg_pool import ConnectionPool
    from runyard.postgres import PostgresWorkQueue, StateTables

    logging.basicConfig(level=logging.WARNING)
    dsn, schema = sys.argv[1], sys.argv[2]
    with ConnectionPool(dsn, min_size=1, max_size=1, open=True) as pool:
        queue = PostgresWorkQueue.open(pool, tables=StateTables(schema=schema))
        reaped = queue.reap()
        lease = queue.claim("ahead")
        print(json.dumps({"offset": queue.clock_offset, "reaped": len(reaped),
                          "claimed": lease is not None}))
    """
)


def _faketime() -> str:
    path = shutil.which("faketime")
    if path is None:
        message = "faketime is not installed: run `make system-deps` (Debian package faketime)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def test_a_worker_forty_seconds_ahead_leaves_a_live_lease_alone(
    pg_tables: StateTables, tmp_path: Path
) -> None:
    faketime = _faketime()
    script = tmp_path / "worker_ahead.py"
    script.write_text(WORKER, encoding="utf-8")
    with ConnectionPool(PG_DSN, min_size=1, max_size=2, open=True) as pool:
        queue = PostgresWorkQueue.open(pool, tables=pg_tables, policy=QueuePolicy(lease_seconds=10))
        queue.enqueue("acme", {"job": 1}, item_id="job-1")
        lease = queue.claim("steady")
        assert lease is not None
        env = {**os.environ, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
        ahead = subprocess.run(
            [faketime, "-f", "+40s", sys.executable, str(script), PG_DSN, str(pg_tables.schema)],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert ahead.returncode == 0, ahead.stderr
        report = json.loads(ahead.stdout.strip().splitlines()[-1])
        assert report["offset"] < -30  # it measured its clock ahead of the server's
        assert (report["reaped"], report["claimed"]) == (0, False)
        assert "PostgreSQL server's clock_timestamp()" in ahead.stderr
        item = queue.get_item("acme", "job-1")
        assert item is not None and (item.state, item.attempts) == ("leased", 1)
        queue.complete(lease)
        assert queue.get_item("acme", "job-1") is None


STEPPING_WORKER = textwrap.dedent(
    """
    import json, sys, time
    from psycopg_pool import ConnectionPool
    from runyard.postgres import PostgresWorkQueue, StateTables

    dsn, schema = sys.argv[1], sys.argv[2]
    with ConnectionPool(dsn, min_size=1, max_size=1, open=True) as pool:
        queue = PostgresWorkQueue.open(pool, tables=StateTables(schema=schema))
        opened = time.time()
        print("opened", flush=True)
        sys.stdin.readline()  # the test steps this process's wall clock meanwhile
        stepped = time.time() - opened
        reaped = queue.reap()
        lease = queue.claim("stepped")
        print(json.dumps({"offset": queue.clock_offset, "stepped": stepped,
                          "reaped": len(reaped), "claimed": lease is not None}))
    """
)


def _libfaketime() -> str:
    found = sorted(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"))
    if not found:
        _faketime()  # fails in CI, skips elsewhere, with the install hint
        pytest.fail("faketime is installed but libfaketime.so.1 is not under /usr/lib/*/faketime")
    return str(found[0])


@contextlib.contextmanager
def _clock_stepped_worker(
    source: str, tables: StateTables, tmp_path: Path
) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """Run ``source`` (argv: DSN, schema) in a process whose wall clock follows the shift in
    the file yielded beside it ("+0" first; libfaketime reads it on every call) while its
    monotonic clock runs true; killed if still running when the block ends."""
    script = tmp_path / "worker.py"
    script.write_text(source, encoding="utf-8")
    shift = tmp_path / "faketime.rc"
    shift.write_text("+0\n", encoding="utf-8")
    env = {
        **os.environ,
        "LD_PRELOAD": _libfaketime(),
        "FAKETIME_TIMESTAMP_FILE": str(shift),
        "FAKETIME_NO_CACHE": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }
    worker = subprocess.Popen(
        [sys.executable, str(script), PG_DSN, str(tables.schema)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        yield worker, shift
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


def test_a_worker_whose_clock_steps_forty_seconds_after_open_leaves_a_live_lease_alone(
    pg_tables: StateTables, tmp_path: Path
) -> None:
    # The wall clock of the worker process reads the server's time at open() and jumps 40 s
    # ahead afterwards (an NTP step, an operator, a VM resumed); its monotonic clock does not.
    with ConnectionPool(PG_DSN, min_size=1, max_size=2, open=True) as pool:
        queue = PostgresWorkQueue.open(pool, tables=pg_tables, policy=QueuePolicy(lease_seconds=10))
        queue.enqueue("acme", {"job": 1}, item_id="job-1")
        lease = queue.claim("steady")
        assert lease is not None
        with _clock_stepped_worker(STEPPING_WORKER, pg_tables, tmp_path) as (worker, shift):
            assert worker.stdout is not None and worker.stdin is not None
            assert worker.stdout.readline().strip() == "opened"
            shift.write_text("+40s\n", encoding="utf-8")
            worker.stdin.write("go\n")
            worker.stdin.flush()
            out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        report = json.loads(out.strip().splitlines()[-1])
        assert abs(report["offset"]) < 5  # at open() the two clocks agreed
        assert report["stepped"] > 30  # afterwards its wall clock ran 40 s ahead
        assert (report["reaped"], report["claimed"]) == (0, False)
        item = queue.get_item("acme", "job-1")
        assert item is not None and (item.state, item.attempts) == ("leased", 1)
        queue.complete(lease)
        assert queue.get_item("acme", "job-1") is None


HEARTBEATING_WORKER = textwrap.dedent(
    """
    import asyncio, json, sys
    from psycopg_pool import AsyncConnectionPool
    from runyard import QueuePolicy
    from runyard.postgres import AsyncPostgresWorkQueue, StateTables
    from runyard.worker import AsyncWorker

    async def main():
        dsn, schema = sys.argv[1], sys.argv[2]
        pool = AsyncConnectionPool(dsn, min_size=1, max_size=2, open=False)
        await pool.open()
        queue = await AsyncPostgresWorkQueue.open(
            pool, tables=StateTables(schema=schema), policy=QueuePolicy(lease_seconds=3)
        )
        renew = queue.heartbeat_many

        async def reported(leases):  # each heartbeat round, reported to the test
            renewed = await renew(leases)
            print("beat", flush=True)
            return renewed

        queue.heartbeat_many = reported

        async def handler(job):
            print("started", flush=True)
            await asyncio.to_thread(sys.stdin.readline)  # runs until the test says "finish"

        worker = AsyncWorker(queue, handler, backstop_seconds=60, reap_seconds=600)
        stats = await worker.run_until_idle()
        print(json.dumps({"completed": stats.completed, "lost": stats.lost,
                          "heartbeats": stats.heartbeat_round_trips}), flush=True)
        await pool.close()

    asyncio.run(main())
    """
)


def test_a_wall_clock_stepped_back_does_not_stop_a_workers_heartbeats(
    pg_tables: StateTables, tmp_path: Path
) -> None:
    # A job on a 3 s lease lives on heartbeats (one a second), and runs until the test says
    # "finish". The worker process's wall clock steps back 20 s mid-job (its monotonic clock
    # does not): timed on the wall clock, the next heartbeat would be 20 s away and the lease
    # would lapse, so another process's reap would take it back and the job would run
    # twice. The test waits for four heartbeats after the step (more than a lease), reaps,
    # then lets the job finish.
    with ConnectionPool(PG_DSN, min_size=1, max_size=2, open=True) as pool:
        queue = PostgresWorkQueue.open(pool, tables=pg_tables, policy=QueuePolicy(lease_seconds=3))
        queue.enqueue("acme", {}, item_id="job-1")
        with _clock_stepped_worker(HEARTBEATING_WORKER, pg_tables, tmp_path) as (worker, shift):
            assert worker.stdout is not None and worker.stdin is not None
            lines: queue_module.Queue[str] = queue_module.Queue()
            reader = threading.Thread(
                target=lambda: [lines.put(line.strip()) for line in worker.stdout or ()],
                daemon=True,
            )
            reader.start()
            assert lines.get(timeout=60) == "started"
            assert lines.get(timeout=60) == "beat"  # the job lives on heartbeats
            shift.write_text("-20s\n", encoding="utf-8")
            beats_after_step = 0
            try:
                while beats_after_step < 4:  # each is a second apart on the monotonic clock
                    if lines.get(timeout=20) == "beat":
                        beats_after_step += 1
            except queue_module.Empty:
                pass  # the heartbeats stopped (the defect): the reap below shows what follows
            reaped = queue.reap()
            worker.stdin.write("finish\n")
            worker.stdin.flush()
            worker.wait(timeout=120)
            reader.join(timeout=10)
            err = worker.stderr.read() if worker.stderr is not None else ""
        assert worker.returncode == 0, err
        rest = []
        while not lines.empty():
            rest.append(lines.get())
        report = json.loads(rest[-1])
        assert beats_after_step == 4
        assert reaped == []
        assert (report["completed"], report["lost"]) == (1, 0)
        assert queue.get_item("acme", "job-1") is None
