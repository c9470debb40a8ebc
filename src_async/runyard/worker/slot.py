"""What a worker holds for one job, shared by both twins (no I/O)."""

from __future__ import annotations

from typing import Protocol

from runyard.errors import RunyardError
from runyard.models import Lease
from runyard.worker.job import Done, Job

__all__ = ["SETTLED", "Settled", "Slot"]


class _Handle(Protocol):
    def cancel(self) -> None: ...


class Settled:
    """The outcome of a job that sent its own complete (unbatched): ``error`` is None when
    it was applied, else why the lease was lost."""

    __slots__ = ("error",)

    def __init__(self, error: RunyardError | None) -> None:
        self.error = error


SETTLED = Settled(None)  # the outcome of every job whose own complete was applied


class Slot:
    """One job the worker holds: running, settling its complete, or finished and waiting for
    the loop to settle it.

    The job writes ``settling`` (before it sends its complete) and ``outcome``; the loop
    alone writes ``result`` and the rest. ``settled``: its settle (complete, fail or hand
    back) returned, so it no longer holds the item.
    """

    __slots__ = (
        "cap_at",
        "deadline",
        "handle",
        "job",
        "key",
        "lease",
        "outcome",
        "result",
        "settled",
        "settling",
    )

    def __init__(self, lease: Lease, deadline: float | None, cap_at: float | None = None) -> None:
        self.lease = lease
        # When the lease reaches max_lease_seconds on the worker's timer: no heartbeat renews
        # it past that, nor can a complete be sent after it, so the job is given up then.
        self.cap_at = cap_at
        # (tenant, item id): a renewed or adopted lease the slot takes is of the same claim.
        item = lease.item
        self.key = (item.tenant, item.item_id)
        self.job = Job(lease)
        self.deadline = deadline
        self.handle: _Handle | None = None
        self.settling = False
        self.settled = False
        self.outcome: Done | Settled | BaseException | None = None
        self.result: Done | BaseException | None = None
