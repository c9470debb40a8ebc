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
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection as Pipe
from multiprocessing.process import BaseProcess
from typing import Any
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
    "KILLED_POLICY",
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
OTHERS_PASSED_OVER = 100  # items of other tenants the doomed worker hands back, at most
START_SECONDS = 60.0  # what the demo waits for the doomed worker to report
KILLED_WORKER = "worker-killed"
# The killed worker claims the items it holds with a short lease, so that they are taken over
# within the demo's run; no backoff, so that they are retried at once after it lapses.
KILLED_POLICY = QueuePolicy(lease_seconds=1.0, max_lease_seconds=60.0, backoff_base=0.0)
# The demo's live workers claim with a lease their heartbeats keep far ahead of a loaded
# machine's stalls (a 1 s lease lapsed under a stall once, and another worker ran the item
# again: at least once, as documented, but the demo counts "done twice"). A lease is the
# claimer's (the policy lives in the client), so the killed worker's stay short.
DEMO_POLICY = QueuePolicy(lease_seconds=30.0, max_lease_seconds=300.0, backoff_base=0.0)


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


def _hold(url: str, flavour: str, tenant: str, finish: int, count: int, pipe: Pipe) -> None:
    """The doomed worker: do ``finish`` of ``tenant``'s items as the demo's handler does (the
    run's counters, then the complete), then claim ``count`` more, report both, and wait to
    be killed. An item of another tenant that a claim takes (the file may hold others' work)
    is handed back untouched, its attempt not counted. The items it finishes are claimed
    with the live workers' lease (a loaded machine cannot outlast it before the complete);
    the ones it holds with KILLED_POLICY's short one, so that they lapse within the demo."""
    run: Callable[[Any], Any]
    if flavour == "sync":
        from runyard._sync.yard import Yard

        yard: Any = Yard.from_url(url, policy=DEMO_POLICY)
        short: Any = Yard.from_url(url, policy=KILLED_POLICY)
        run = _same
    else:
        from runyard._async.yard import AsyncYard

        run = asyncio.new_event_loop().run_until_complete
        yard = run(AsyncYard.from_url(url, policy=DEMO_POLICY))
        short = run(AsyncYard.from_url(url, policy=KILLED_POLICY))
    finished: list[str] = []
    held: list[str] = []
    others: list[Lease] = []
    while len(held) < count and len(others) <= OTHERS_PASSED_OVER:
        claimer = yard if len(finished) < finish else short
        lease = run(claimer.queue.claim(KILLED_WORKER))
        if lease is None:
            break
        if lease.tenant != tenant:
            others.append(lease)
        elif len(finished) < finish:
            run(yard.state.patch_run(*_done(lease), status="done"))
            run(yard.queue.complete(lease))
            finished.append(lease.item_id)
        else:
            held.append(lease.item_id)
    if others:
        run(yard.queue.release_many(others))
    pipe.send((finished, held))
    pipe.recv()  # never answered: the demo kills this process here, leases held


def _same(value: Any) -> Any:
    return value


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


def start_doomed_worker(
    url: str, flavour: str, tenant: str, finish: int, count: int
) -> DoomedWorker:
    """Start a worker process that finishes ``finish`` of ``tenant``'s items, then claims
    ``count`` more and holds them. Raises RuntimeError when the process ends or stays silent
    instead of reporting."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    args = (url, flavour, tenant, finish, count, child)
    process = context.Process(target=_hold, args=args, daemon=True)
    process.start()
    child.close()  # the child's end is the child's: a child that dies closes the pipe
    try:
        if not parent.poll(START_SECONDS):
            raise EOFError
        finished, held = parent.recv()
    except EOFError:
        process.kill()
        process.join()
        raise RuntimeError(
            f"the demo's worker process ended before it reported (exit code {process.exitcode})"
        ) from None
    return DoomedWorker(process, parent, finished, held)


def kill(worker: DoomedWorker) -> None:
    """SIGKILL the worker process (no cleanup runs in it) and reap it."""
    os.kill(worker.pid, signal.SIGKILL)
    worker.process.join()
    worker.pipe.close()
