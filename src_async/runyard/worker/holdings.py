"""Which leases the worker holds, and how an adopt's new tokens reach them: the part of both
workers that keeps a lease from running twice after a claim lost its reply (no I/O)."""

from __future__ import annotations

from collections import deque
from typing import Any

from runyard.models import Lease
from runyard.worker.slot import Slot

__all__ = ["WorkerHoldings"]


class WorkerHoldings:
    """The held-lease bookkeeping of ``AsyncWorker`` and ``Worker`` (a base: the attributes are
    set by the worker).

    ``adopt`` gives every live lease of the worker a new token, and only that one is
    accepted: each slot the worker holds (running, handed off by its predecessor's job,
    finished, settling, or being handed back) must take it, and a claim's lease for an item
    the worker already holds must not start a second job."""

    _running: dict[tuple[str, str], Slot]
    _finished: list[Slot]
    _flushing: list[Slot]
    _handing_back: list[Slot]
    _handoff: deque[Slot | Lease]
    _guard: Any  # the worker's AsyncGuard or Guard: a context manager

    def _adopted_since(self, mark: int) -> bool:
        """Whether an adopt was in flight at some time since the store's adopt ``mark``."""
        raise NotImplementedError

    def _unheld(self, leases: list[Lease], mark: int | None = None) -> list[Lease]:
        """The leases (a claim's) for items the worker does not hold. One it holds was
        adopted after the claim returned (by another job's claim that lost its reply): the
        holder's lease is the newer, and the item must not run twice. When no adopt ran since
        ``mark`` (taken before the claim was sent), the scan of the held slots (every
        handed-off successor too, between two turns of the loop) is skipped: a lease for a
        held item can then only be a lapsed one claimed back, and registering the new slot
        gives the old one up as lost. Under the guard."""
        if mark is not None and not self._adopted_since(mark):
            return leases
        return [
            lease
            for lease in leases
            if self._held((lease.tenant, lease.item_id)) is None
            and not self._handed((lease.tenant, lease.item_id))
        ]

    def _renew_held(self, leases: list[Lease]) -> list[Lease]:
        """Give each slot the worker holds its lease in ``leases`` (adopted after a lost claim
        reply: ``adopt`` gives every live lease a new token, and only that one is accepted),
        and each lease a job handed off for the loop to start; return the leases it did not
        hold. Jobs call it too, in the sync twin from their threads: under the guard."""
        fresh = []
        with self._guard:
            for lease in leases:
                key = (lease.tenant, lease.item_id)
                slot = self._held(key)
                if slot is not None:
                    slot.lease = lease
                elif not self._renew_handed(key, lease):
                    fresh.append(lease)
        return fresh

    def _handed(self, key: tuple[str, str]) -> bool:
        """Whether a job handed off a lease for ``key`` for the loop to start."""
        return any(
            isinstance(handed, Lease) and (handed.tenant, handed.item_id) == key
            for handed in [*self._handoff]
        )

    def _renew_handed(self, key: tuple[str, str], lease: Lease) -> bool:
        """Replace the lease for ``key`` a job handed off (not started yet); whether there was
        one. Under the guard."""
        for i, handed in enumerate(self._handoff):
            if isinstance(handed, Lease) and (handed.tenant, handed.item_id) == key:
                self._handoff[i] = lease
                return True
        return False

    def _held(self, key: tuple[str, str]) -> Slot | None:
        """The slot holding ``key``: running, handed off by its predecessor's job, finished
        (waiting to settle, or settling), or being handed back at shutdown."""
        slot = self._running.get(key)
        if slot is not None:
            return slot
        for held in [*self._finished, *self._flushing, *self._handing_back, *self._handoff]:
            if isinstance(held, Slot) and held.key == key:
                return held
        return None
