"""Which leases the worker holds, and how an adopt's new tokens reach them: the part of both
workers that keeps a lease from running twice after a claim lost its reply (no I/O)."""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from typing import Any

from runyard.models import Lease
from runyard.worker.slot import Slot

__all__ = ["ADOPTED_KEPT", "ADOPTED_KEPT_SECONDS", "WorkerHoldings", "same_claim"]

# The adopted-token record is trimmed past ADOPTED_KEPT entries, of those noted more than
# ADOPTED_KEPT_SECONDS ago: no claim's reply is read that long after it was sent (the stores'
# statement and socket timeouts are seconds), so none of them can still be needed.
ADOPTED_KEPT = 10_000
ADOPTED_KEPT_SECONDS = 300.0


def same_claim(a: Lease, b: Lease) -> bool:
    """Whether ``a`` and ``b`` are leases of one claim of one item: ``adopt`` gives a claim a
    new token and keeps its attempt and its claim time, while a later claim of the item
    (after its fail was applied, its lease lapsed, or it completed and was enqueued again)
    is taken at a later time."""
    return _claim(a) == _claim(b)


def _claim(lease: Lease) -> tuple[str, str, int, float]:
    return (lease.tenant, lease.item_id, lease.item.attempts, lease.claimed_at)


class WorkerHoldings:
    """The held-lease bookkeeping of ``AsyncWorker`` and ``Worker`` (a base: the attributes are
    set by the worker).

    ``adopt`` gives every live lease of the worker a new token, and only that one is
    accepted: each slot the worker holds (running, handed off by its predecessor's job,
    finished, settling, or being handed back) must take it, a lease the worker did not hold
    must start, and a claim's lease re-tokened meanwhile must not start a second job. A
    slot holds one claim of its item (``same_claim``): a finished slot whose fail was
    applied does not hold the item's next claim, even before the fail's reply is read."""

    _running: dict[tuple[str, str], Slot]
    _finished: list[Slot]
    _flushing: list[Slot]
    _handing_back: list[Slot]
    _handoff: deque[Slot | Lease]
    _closing: list[Slot]
    _guard: Any  # the worker's AsyncGuard or Guard: a context manager
    _store: Any  # the worker's AsyncWorkerStore or WorkerStore: adopt_mark, adopted_since
    _nudge: Any  # the worker's AsyncEvent or Event: wakes its loop
    # The token under which each claim (tenant, item id, attempts, claim time) was adopted,
    # and when (time.monotonic()), oldest first: a claim whose reply is read after an adopt
    # re-tokened it carries the older token, whether or not the adopted lease's job still
    # runs. An entry never misleads a later claim (its claim time differs); old ones are
    # trimmed (ADOPTED_KEPT, ADOPTED_KEPT_SECONDS).
    _adopted: OrderedDict[tuple[str, str, int, float], tuple[int, float]]

    def _claim_sent(self) -> int:
        """The mark to give ``_claimed`` with a claim's leases: taken before it is sent (the
        store's adopt mark)."""
        return self._store.adopt_mark()  # type: ignore[no-any-return]

    def _claimed(self, leases: list[Lease], mark: int) -> list[Lease]:
        """The leases of a claim sent at ``mark`` that the worker may start: not one an
        adopt re-tokened meanwhile (its adopted lease went to its slot or to the handoff,
        and may have run already). When no adopt ran since ``mark``, the scan is skipped: a
        lease for a held item can then only be a new claim (the old lease lapsed, or the
        item completed and was enqueued again), and registering it gives the old slot up as
        lost, or counts it when its complete returns. Under the guard."""
        if not self._store.adopted_since(mark):
            return leases
        return [
            lease
            for lease in leases
            if self._adopted.get(_claim(lease), (lease.token, 0.0))[0] <= lease.token
            and self._holds_none(lease)
        ]

    def _unheld(self, leases: list[Lease]) -> list[Lease]:
        """The leases (handed off by jobs) the worker does not hold yet: a slot, or the
        handoff, may hold a newer lease of the same claim (adopted meanwhile): the item must
        not run twice. Under the guard."""
        return [lease for lease in leases if self._holds_none(lease)]

    def _holds_none(self, lease: Lease) -> bool:
        return self._held(lease) is None and not self._handed(lease)

    def _renew_held(self, leases: list[Lease]) -> int:
        """Give each slot the worker holds its lease in ``leases`` (adopted after a lost claim
        reply: ``adopt`` gives every live lease a new token, and only that one is accepted),
        and each lease a job handed off for the loop to start; hand off the others (the lost
        claim's) for the loop to start, in the same step; note each as adopted (``_claimed``).
        Returns how many it handed off: they fill the claim's slots. Jobs call it too, in
        the sync twin from their threads: under the guard."""
        fresh = []
        now = time.monotonic()
        with self._guard:
            for lease in leases:
                claim = _claim(lease)
                self._adopted[claim] = (lease.token, now)
                self._adopted.move_to_end(claim)
                slot = self._held(lease)
                if slot is not None:
                    slot.lease = lease
                elif not self._renew_handed(lease):
                    fresh.append(lease)
            self._handoff.extend(fresh)
            while len(self._adopted) > ADOPTED_KEPT:
                _, (_, noted) = next(iter(self._adopted.items()))
                if noted > now - ADOPTED_KEPT_SECONDS:
                    break
                self._adopted.popitem(last=False)
        if fresh:
            self._nudge.set()
        return len(fresh)

    def _holding(self) -> int:
        """How many leases the worker holds, at most: an adopt after a lost claim reply must
        be able to return all of them and the lost claim's (read without the guard: the
        lists only move between each other, and the caller adds a margin)."""
        return (
            len(self._running)
            + len(self._finished)
            + len(self._flushing)
            + len(self._handing_back)
            + len(self._handoff)
            + len(self._closing)
        )

    def _handed(self, lease: Lease) -> bool:
        """Whether a job handed off a lease of ``lease``'s claim for the loop to start."""
        return any(
            isinstance(handed, Lease) and same_claim(handed, lease) for handed in [*self._handoff]
        )

    def _renew_handed(self, lease: Lease) -> bool:
        """Replace the handed-off lease (not started yet) of ``lease``'s claim; whether there
        was one. Under the guard."""
        for i, handed in enumerate(self._handoff):
            if isinstance(handed, Lease) and same_claim(handed, lease):
                self._handoff[i] = lease
                return True
        return False

    def _held(self, lease: Lease) -> Slot | None:
        """The slot holding ``lease``'s claim: running, handed off by its predecessor's job,
        finished (waiting to settle, or settling), or being handed back at shutdown; not one
        whose settle returned (``Slot.settled``)."""
        slot = self._running.get((lease.tenant, lease.item_id))
        if slot is not None and not slot.settled and same_claim(slot.lease, lease):
            return slot
        for held in [*self._finished, *self._flushing, *self._handing_back, *self._handoff]:
            if isinstance(held, Slot) and not held.settled and same_claim(held.lease, lease):
                return held
        return None

    def _settled(self, slots: list[Slot]) -> None:
        """The settles of ``slots`` returned: they hold their items no more (a claim of the
        item adopted from now on is a new one). Without the guard: one flag each, and an
        adopt that read it just before is one the claim time tells apart anyway."""
        for slot in slots:
            slot.settled = True
