"""The demo's work: tenants enqueue, workers serve them fairly, runs count their tokens."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from runyard._async.memory import AsyncMemoryStateStore, AsyncMemoryWorkQueue
from runyard._async.worker.loop import AsyncWorker
from runyard._flavours import async_gather, async_sleep
from runyard.cli.demo import DemoPlan, DemoResult
from runyard.models import CounterDelta, RunKey
from runyard.worker.job import Job

__all__ = ["run_demo"]


async def run_demo(
    plan: DemoPlan, flavour: str, on_served: Callable[[str], None] | None = None
) -> DemoResult:
    """Enqueue the plan's work on the memory backend and serve it with ``plan.workers`` workers."""
    result = DemoResult(plan=plan, flavour=flavour)
    queue = AsyncMemoryWorkQueue()
    store = AsyncMemoryStateStore()
    for tenant, items in plan.tenants:
        for n in range(items):
            run_id = f"run-{n}"
            await store.put_run(RunKey(tenant, run_id), {"prompt": n}, expected_version=0)
            await queue.enqueue(tenant, {"run": run_id, "tokens": 100 + n % 7})

    async def handle(job: Job) -> None:
        result.served.append(job.tenant)
        await async_sleep(plan.work_seconds)
        delta = CounterDelta(input_tokens=job.payload["tokens"], iterations=1)
        await store.patch_run(RunKey(job.tenant, job.payload["run"]), delta, status="done")
        if on_served is not None:
            on_served(job.tenant)

    workers = [AsyncWorker(queue, handle, name=f"worker-{n}") for n in range(plan.workers)]
    reports = await async_gather([partial(w.run_until_idle) for w in workers])
    result.completed = sum(r.completed for r in reports)
    result.failed = sum(r.failed for r in reports)
    for tenant, _ in plan.tenants:
        async for run in store.iter_runs(tenant):
            result.tokens[tenant] = result.tokens.get(tenant, 0) + run.input_tokens
    await queue.aclose()
    await store.aclose()
    return result
