"""The Job a handler receives, shared by both twins."""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Callable
from typing import Any

from runyard.clock import Clock, SystemClock
from runyard.models import Lease

__all__ = ["DONE", "Done", "Job", "default_worker_name", "interval_timer"]


class Done:
    """The outcome of a handler that returned."""


DONE = Done()


def default_worker_name() -> str:
    """``host-pid-random`` (six hex digits): unique per worker, so a restarted process, or a
    second worker in one process, never takes another's name (``adopt`` and the queue's
    worker index go by name)."""
    host = socket.gethostname()[:200]  # within the identifier limit (256 bytes)
    return f"{host}-{os.getpid()}-{secrets.token_hex(3)}"


def interval_timer(clock: Clock | None) -> Callable[[], float]:
    """What times a worker's own intervals: ``time.monotonic`` for the system clock (a step
    of the wall clock must not stop its heartbeats), else the injected clock's ``now``."""
    if clock is None or isinstance(clock, SystemClock):
        return time.monotonic
    return clock.now


class Job:
    """One claimed work item, as the handler sees it.

    ``token`` is the lease's fencing token: pass it to downstream writes so a write from a
    worker that lost the lease is refused. ``cancelled`` becomes True when the worker gives
    the job up (timeout, lease lost, shutdown past its grace); a thread handler (the sync
    twin cannot interrupt a thread) should check it and return early.
    """

    __slots__ = ("_lease", "cancelled")

    def __init__(self, lease: Lease) -> None:
        self._lease = lease
        self.cancelled = False

    @property
    def lease(self) -> Lease:
        """The lease the worker holds, as last renewed when the job started."""
        return self._lease

    @property
    def tenant(self) -> str:
        """The item's tenant."""
        return self._lease.tenant

    @property
    def item_id(self) -> str:
        """The item's id."""
        return self._lease.item_id

    @property
    def payload(self) -> Any:
        """The item's JSON payload (a copy: changing it changes nothing stored)."""
        return self._lease.item.payload

    @property
    def attempt(self) -> int:
        """Which attempt this is, from 1."""
        return self._lease.item.attempts

    @property
    def token(self) -> int:
        """The lease's fencing token, as the job started with it: after a lost claim reply the
        worker's ``adopt`` gives the lease a new token, which the worker settles with but the
        job is not told (see docs/worker.md, store errors)."""
        return self._lease.token

    @property
    def enqueued_at(self) -> float:
        """When the item was enqueued (the store's clock, seconds since the epoch)."""
        return self._lease.item.enqueued_at

    def __repr__(self) -> str:
        return (
            f"Job(tenant={self.tenant!r}, item_id={self.item_id!r}, attempt={self.attempt}, "
            f"token={self.token})"
        )
