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
