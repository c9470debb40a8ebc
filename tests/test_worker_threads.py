"""The thread twin only: a job thread's adopt racing another job thread's claim of the same item.
Tasks cannot race there (nothing runs between an adopt's renew and what the adopting job does
next); threads can, so the test holds each thread at the point the race needs."""

from __future__ import annotations

import threading
from typing import Any

from runyard import MemoryWorkQueue, QueuePolicy
from runyard._sync.worker import Worker
from runyard.errors import StoreOutcomeUnknown
from runyard.models import Lease
from runyard.worker import Job, WorkerHooks

from tests._sync.memory_worker_spy import SAFETY
from tests._sync.test_worker_adopt import Endings


class RaceQueue(MemoryWorkQueue):
    """Holds the reply of the next claim (``hold_next_claim``) until ``release_claim``, and
    loses the reply of the next claim that finds nothing (``lose_empty_claim_reply``)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.hold_next_claim = False
        self.lose_empty_claim_reply = False
        self.claim_held, self.release_claim = threading.Event(), threading.Event()

    def claim(self, worker: str) -> Lease | None:
        hold, self.hold_next_claim = self.hold_next_claim, False
        lease = super().claim(worker)
        if hold:
            self.claim_held.set()
            assert self.release_claim.wait(SAFETY)
        if lease is None and self.lose_empty_claim_reply:
            self.lose_empty_claim_reply = False
            raise StoreOutcomeUnknown("the test lost this reply")
        return lease


class PausedRenewWorker(Worker):
    """Pauses the thread that applies an adopt, right after it gave the held slots their
    leases, until ``proceed``."""

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self.renewed, self.proceed = threading.Event(), threading.Event()

    def _renew_held(self, leases: list[Lease]) -> int:
        handed = super()._renew_held(leases)
        self.renewed.set()
        assert self.proceed.wait(SAFETY)
        return handed


def test_an_adopted_lease_wins_over_an_older_claim_of_the_item_registered_after_it() -> None:
    # Unbatched, concurrency 2. Job 1 completes and its successor claim takes item 3; that
    # reply is held. Job 2 completes, its successor claim finds nothing and loses its reply:
    # adopt gives item 3 a new token (the old one is refused from now on), and the adopting
    # thread pauses right after applying it. Then job 1's thread reads its held reply, with
    # the old token. Only the adopted lease may run item 3: one run, completed, none lost.
    queue = RaceQueue(policy=QueuePolicy(backoff_base=0, random=lambda: 0.5))
    for n in (1, 2):
        queue.enqueue("acme", {"n": n})
    runs: list[int] = []
    endings, second_started = Endings(3, watch=1), threading.Event()

    def handler(job: Job) -> None:
        runs.append(job.payload["n"])
        if job.payload["n"] == 1:
            assert second_started.wait(SAFETY)
            queue.enqueue("acme", {"n": 3})
            queue.hold_next_claim = True  # the claim of its successor, item 3
        elif job.payload["n"] == 2:
            second_started.set()
            assert queue.claim_held.wait(SAFETY)
            queue.lose_empty_claim_reply = True  # the claim of its successor finds nothing

    worker = PausedRenewWorker(
        queue,
        handler,
        concurrency=2,
        batched=False,
        backstop_seconds=60,
        reap_seconds=600,
        hooks=WorkerHooks(on_job_end=endings),
    )
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(worker.run()), daemon=True)
    thread.start()
    try:
        assert worker.renewed.wait(SAFETY)  # the adopt is applied; its thread paused
        queue.release_claim.set()  # job 1's thread reads its claim's reply (the old token)
        assert endings.watched.wait(SAFETY)  # and has gone on: job 1 ended
        worker.proceed.set()
        done = endings.all.wait(SAFETY)
    finally:
        worker.proceed.set()
        queue.release_claim.set()
        worker.stop()
        thread.join(SAFETY)
    assert done, endings.ended
    assert sorted(endings.ended) == ["1:completed", "2:completed", "3:completed"]
    assert sorted(runs) == [1, 2, 3]
    assert (outcome[0].completed, outcome[0].lost) == (3, 0)
    stats = queue.stats()
    assert (stats.leased, stats.ready) == (0, 0)


class StopOnSuccessorClaimQueue(MemoryWorkQueue):
    """Item x, once completed, is enqueued again at once; the claim sent after that complete
    (the job's successor claim, which takes the new x) stops the worker before it returns;
    a hand-back (``release_many``, which the worker uses batched or not; or a retryable
    fail) sets ``released``."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.worker: Worker | None = None
        self.stop_next_claim = False
        self.released = threading.Event()

    def complete(self, tenant: Any, item_id: Any = None, **options: Any) -> None:
        super().complete(tenant, item_id, **options)
        if isinstance(tenant, Lease) and tenant.item.payload["n"] == 1:
            self.enqueue("acme", {"n": 2}, item_id="x")
            self.stop_next_claim = True

    def claim(self, worker: str) -> Lease | None:
        lease = super().claim(worker)
        if self.stop_next_claim and self.worker is not None:
            self.stop_next_claim = False
            self.worker.stop()
        return lease

    def fail(self, tenant: Any, item_id: Any = None, **options: Any) -> Any:
        out = super().fail(tenant, item_id, **options)
        self.released.set()
        return out

    def release_many(self, leases: Any) -> Any:
        out = super().release_many(leases)
        self.released.set()
        return out


class PausedCompleteWorker(Worker):
    """Pauses a job's thread after its complete and successor claim returned, before its
    outcome is recorded, until ``proceed``."""

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self.paused, self.proceed = threading.Event(), threading.Event()

    def _complete(self, slot: Any) -> Any:
        out = super()._complete(slot)
        self.paused.set()
        assert self.proceed.wait(SAFETY)
        return out


def test_a_hand_back_of_a_never_started_lease_leaves_the_running_job_of_its_item() -> None:
    # Unbatched, one slot, no grace. Job 1 completes item x; x is enqueued again and job 1's
    # successor claim takes it as the worker stops, so the lease is handed back unstarted.
    # That hand-back (same item) must not drop job 1, whose outcome its thread has not yet
    # recorded: job 1 counts as completed once it does.
    queue = StopOnSuccessorClaimQueue(policy=QueuePolicy(backoff_base=0, random=lambda: 0.5))
    queue.enqueue("acme", {"n": 1}, item_id="x")
    runs: list[int] = []
    worker = PausedCompleteWorker(
        queue,
        lambda job: runs.append(job.payload["n"]),
        batched=False,
        backstop_seconds=60,
        reap_seconds=600,
        shutdown_grace=0,
    )
    queue.worker = worker
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(worker.run()), daemon=True)
    thread.start()
    try:
        assert worker.paused.wait(SAFETY)  # job 1's thread, its outcome not recorded yet
        assert queue.released.wait(SAFETY)  # the new x was handed back meanwhile
    finally:
        worker.proceed.set()
        thread.join(SAFETY)
    assert runs == [1] and outcome
    assert (outcome[0].completed, outcome[0].handed_back, outcome[0].lost) == (1, 1, 0)
    stored = queue.get_item("acme", "x")
    assert stored is not None and stored.state == "ready"
