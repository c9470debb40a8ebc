"""The async twin only: a handler whose own task raises CancelledError (an awaited future
cancelled by someone else) fails its job like any exception; the slot is freed."""

from __future__ import annotations

import asyncio

import pytest
from runyard import AsyncMemoryWorkQueue, ManualClock, QueuePolicy
from runyard._async.worker import AsyncWorker
from runyard.worker import Job


@pytest.mark.asyncio
@pytest.mark.parametrize("batched", [True, False])
async def test_a_handler_raising_cancelled_error_fails_the_job_and_frees_its_slot(
    batched: bool,
) -> None:
    clock = ManualClock()
    policy = QueuePolicy(lease_seconds=30, backoff_base=0, random=lambda: 0.5)
    queue = AsyncMemoryWorkQueue(policy=policy, clock=clock)
    items = [(await queue.enqueue("acme", {"n": n})).item_id for n in range(2)]
    runs: list[tuple[str, int]] = []

    async def handler(job: Job) -> None:
        runs.append((job.item_id, job.attempt))
        if job.attempt == 1 and job.item_id == items[0]:
            other = asyncio.get_running_loop().create_future()
            other.cancel()
            await other  # raises CancelledError in the handler's own task

    worker = AsyncWorker(queue, handler, clock=clock, batched=batched)  # one slot
    stats = await asyncio.wait_for(worker.run_until_idle(), 30)
    assert (stats.failed, stats.retried, stats.completed) == (1, 1, 2)
    assert sorted(runs) == sorted([(items[0], 1), (items[0], 2), (items[1], 1)])
    assert (await queue.stats()).leased == 0
    await queue.aclose()
