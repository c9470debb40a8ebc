"""The demo's crash scene: a worker process killed with SIGKILL while it holds leases.

What a durable default buys: the items the killed worker finished stay finished, and the ones
it held are finished by another worker once their leases lapse, nothing lost and nothing done
twice (each item's run counts its iterations: a second run of an item would show as 2). The
child process runs the same twin as the demo; this module holds its entry point and the report
(no twin I/O of its own).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
from dataclasses import dataclass, field
from multiprocessing.connection import Connection as Pipe
from multiprocessing.process import BaseProcess
from urllib.parse import urlsplit

from runyard.models import CounterDelta, Lease, RunKey
from runyard.policy import QueuePolicy
from runyard.sqlite.settings import is_memory_path
from runyard.yard import parse_yard_url, sqlite_path

__all__ = [
    "CRASH_ITEMS",
    "DEMO_POLICY",
    "FINISHED_BY_THE_KILLED",
    "HELD_BY_THE_KILLED",
    "KILLED_WORKER",
    "CrashReport",
    "DoomedWorker",
    "kill",
    "shows_a_crash",
    "start_doomed_worker",
]

CRASH_ITEMS = 6
FINISHED_BY_THE_KILLED = 2  # before it is killed: done, never to be done again
HELD_BY_THE_KILLED = 3
KILLED_WORKER = "worker-killed"
# A short lease and no backoff, so that the killed worker's items are taken over (retried at
# once after their lease lapses) within the demo's run.
DEMO_POLICY = QueuePolicy(lease_seconds=1.0, max_lease_seconds=60.0, backoff_base=0.0)


@dataclass
class CrashReport:
    """What became of the items a killed worker held."""

    tenant: str
    pid: int
    finished: list[str]
    held: list[str]
    items: int = CRASH_ITEMS
    done_once: int = 0
    done_twice: int = 0
    left_in_queue: int = 0
    finished_by: dict[str, int] = field(default_factory=dict)

    @property
    def lost(self) -> int:
        """Items that were neither completed nor are still queued (always 0 on a durable
        backend)."""
        return self.items - self.done_once - self.done_twice - self.left_in_queue

    @property
    def ok(self) -> bool:
        """Every item completed exactly once."""
        return self.done_once == self.items and not self.done_twice and not self.left_in_queue


def shows_a_crash(url: str) -> bool:
    """Whether another process can share ``url``'s stores (a SQLite file), so that one of
    them can be killed."""
    if urlsplit(url).scheme.lower() != "sqlite":
        return False
    return not is_memory_path(sqlite_path(parse_yard_url(url, {"sqlite"})))


def _done(lease: Lease) -> tuple[RunKey, CounterDelta]:
    """What the demo's handler writes for ``lease``: its run's counters, one iteration."""
    payload = lease.item.payload
    return RunKey(lease.tenant, payload["run"]), CounterDelta(
        input_tokens=payload["tokens"], iterations=1
    )


def _hold(url: str, flavour: str, finish: int, count: int, pipe: Pipe) -> None:
    """The doomed worker: do ``finish`` items as the demo's handler does (the run's counters,
    then the complete), then claim ``count`` more, report both, and wait to be killed."""
    if flavour == "sync":
        from runyard._sync.yard import Yard

        yard = Yard.from_url(url, policy=DEMO_POLICY)
        finished = []
        for _ in range(finish):
            lease = yard.queue.claim(KILLED_WORKER)
            assert lease is not None
            yard.state.patch_run(*_done(lease), status="done")
            yard.queue.complete(lease)
            finished.append(lease.item_id)
        leases = [yard.queue.claim(KILLED_WORKER) for _ in range(count)]
    else:
        from runyard._async.yard import AsyncYard

        async def work() -> tuple[list[str], list[Lease | None]]:
            async_yard = await AsyncYard.from_url(url, policy=DEMO_POLICY)
            done = []
            for _ in range(finish):
                lease = await async_yard.queue.claim(KILLED_WORKER)
                assert lease is not None
                await async_yard.state.patch_run(*_done(lease), status="done")
                await async_yard.queue.complete(lease)
                done.append(lease.item_id)
            return done, [await async_yard.queue.claim(KILLED_WORKER) for _ in range(count)]

        finished, leases = asyncio.run(work())
    pipe.send((finished, [lease.item_id for lease in leases if lease is not None]))
    pipe.recv()  # never answered: the demo kills this process here, leases held


@dataclass
class DoomedWorker:
    """A worker process holding leases, and the pipe it waits on (kept open until the kill,
    so that the process is still waiting, not exiting, when it is killed)."""

    process: BaseProcess
    pipe: Pipe
    finished: list[str]
    held: list[str]

    @property
    def pid(self) -> int:
        """The process id."""
        assert self.process.pid is not None
        return self.process.pid


def start_doomed_worker(url: str, flavour: str, finish: int, count: int) -> DoomedWorker:
    """Start a worker process that finishes ``finish`` items, then claims ``count`` items and
    holds them."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    args = (url, flavour, finish, count, child)
    process = context.Process(target=_hold, args=args, daemon=True)
    process.start()
    finished, held = parent.recv()
    return DoomedWorker(process, parent, finished, held)


def kill(worker: DoomedWorker) -> None:
    """SIGKILL the worker process (no cleanup runs in it) and reap it."""
    os.kill(worker.pid, signal.SIGKILL)
    worker.process.join()
    worker.pipe.close()
