"""The demo's work: tenants enqueue, workers serve them fairly, runs count their tokens; on a
SQLite file, a worker process killed mid-run and another worker finishing its items."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

from runyard._async.pager import AsyncRunPager
from runyard._async.protocols import AsyncWorkQueue
from runyard._async.worker import AsyncWorker
from runyard._async.worker.wakeup import wakeup_for
from runyard._async.yard import AsyncYard
from runyard._flavours import async_gather, async_sleep
from runyard.cli.crash import (
    CRASH_ITEMS,
    DEMO_POLICY,
    FINISHED_BY_THE_KILLED,
    HELD_BY_THE_KILLED,
    KILLED_POLICY,
    CrashReport,
    kill,
    shows_a_crash,
    start_doomed_worker,
)
from runyard.cli.demo import DemoPlan, DemoResult, sort_claimed
from runyard.models import CounterDelta, Lease, RunKey
from runyard.worker.job import Job
from runyard.worker.outcomes import WorkerStats

__all__ = ["AsyncDemoQueue", "run_demo"]


class AsyncDemoQueue:
    """The queue as the demo's workers see it: an item of a tenant no demo made (the default
    file may hold the user's work) is handed back at once, its attempt not counted, as the
    killed worker's claims hand it back; the demo's handler never runs on it. A claim goes on
    claiming past such items (each claim moves its tenant's turn on, as any claim does) until
    it takes a demo item, finds nothing more due, or meets a tenant it handed back already:
    the rotation has come round without a demo tenant due. Every other call goes to the
    queue."""

    def __init__(self, queue: AsyncWorkQueue) -> None:
        self.queue = queue

    def __getattr__(self, name: str) -> Any:
        return getattr(self.queue, name)

    async def claim(self, worker: str) -> Lease | None:
        own = await self._own(worker, 1)
        return own[0] if own else None

    async def claim_many(self, worker: str, *, limit: int) -> list[Lease]:
        return await self._own(worker, limit)

    async def _own(self, worker: str, limit: int) -> list[Lease]:
        batched: Any = self.queue
        passed: set[str] = set()  # the other tenants handed back by this call
        while True:
            if limit == 1:
                lease = await self.queue.claim(worker)
                leases = [] if lease is None else [lease]
            else:
                leases = await batched.claim_many(worker, limit=limit)
            own, others, over = sort_claimed(leases, limit, passed)
            if others:
                await batched.release_many(others)
            if over:
                return own


async def run_demo(
    plan: DemoPlan,
    flavour: str,
    on_served: Callable[[str], None] | None = None,
    *,
    url: str = "memory://",
) -> DemoResult:
    """Enqueue the plan's work on the stores ``url`` names and serve it with ``plan.workers``
    workers; on a SQLite file, then show a killed worker's items finished by another.

    Every run of the demo works in tenants of its own (``noisy~<id>``), so a file that earlier
    demos used keeps their data apart.
    """
    result = DemoResult(plan=plan, flavour=flavour)
    demo_id = uuid.uuid4().hex[:8]
    yard = await AsyncYard.from_url(url, policy=DEMO_POLICY)
    store, queue = yard.state, yard.queue
    mine = AsyncDemoQueue(queue)
    for tenant, items in plan.tenants:
        for n in range(items):
            run_id = f"run-{n}"
            key = RunKey(f"{tenant}~{demo_id}", run_id)
            await store.put_run(key, {"prompt": n}, expected_version=0)
            await queue.enqueue(key.tenant, {"run": run_id, "tokens": 100 + n % 7})

    finished_by: dict[str, str] = {}
    claimed: list[tuple[int, str]] = []  # (fencing token, tenant): tokens count the claims

    async def handle(job: Job) -> None:
        # An item of a tenant no demo made never gets here: the demo queue hands it back.
        lease = job.lease
        name, _, owner = lease.tenant.rpartition("~")
        await async_sleep(plan.work_seconds)
        delta = CounterDelta(input_tokens=lease.item.payload["tokens"], iterations=1)
        await store.patch_run(RunKey(lease.tenant, lease.item.payload["run"]), delta, status="done")
        if owner != demo_id:
            return  # an item an earlier demo left behind: finished, not counted here
        finished_by[lease.item_id] = lease.worker
        if name == "crash":
            return
        claimed.append((lease.token, name))
        if on_served is not None:
            on_served(name)

    async def serve() -> list[WorkerStats]:
        workers = [
            AsyncWorker(mine, handle, name=f"worker-{n}", wakeup=wakeup_for(queue))
            for n in range(plan.workers)
        ]
        return await async_gather([partial(w.run_until_idle) for w in workers])

    reports = await serve()
    # The order of service is the order of the claims, whatever the workers' threads did next.
    result.served = [name for _, name in sorted(claimed)]
    result.completed = sum(r.completed for r in reports)
    result.failed = sum(r.failed for r in reports)
    for tenant, _ in plan.tenants:
        async for run in AsyncRunPager(store, f"{tenant}~{demo_id}"):
            result.tokens[tenant] = result.tokens.get(tenant, 0) + run.input_tokens
    if shows_a_crash(url):
        tenant = f"crash~{demo_id}"
        for n in range(CRASH_ITEMS):
            await store.put_run(RunKey(tenant, f"run-{n}"), {"prompt": n}, expected_version=0)
            await queue.enqueue(tenant, {"run": f"run-{n}", "tokens": 1}, item_id=f"crash-{n}")
        doomed = start_doomed_worker(
            url, flavour, tenant, FINISHED_BY_THE_KILLED, HELD_BY_THE_KILLED
        )
        crash = CrashReport(
            tenant=tenant, pid=doomed.pid, finished=doomed.finished, held=doomed.held
        )
        kill(doomed)
        await async_sleep(KILLED_POLICY.lease_seconds + 0.2)  # the killed worker's leases lapse
        await serve()
        for n in range(CRASH_ITEMS):
            stored = await store.get_run(RunKey(tenant, f"run-{n}"))
            done = stored.iterations if stored is not None else 0
            crash.done_once += done == 1
            crash.done_twice += done > 1
            crash.left_in_queue += await queue.get_item(tenant, f"crash-{n}") is not None
        for item_id in crash.held:
            worker = finished_by.get(item_id, "nobody")
            crash.finished_by[worker] = crash.finished_by.get(worker, 0) + 1
        result.crash = crash
    await yard.aclose()
    return result
