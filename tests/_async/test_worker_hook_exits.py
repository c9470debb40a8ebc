"""A hook that raises SystemExit or KeyboardInterrupt stops the worker as ``stop()`` does, on
the memory queue and the machine's Redis: the job in flight past the grace is handed back,
the settles of finished jobs are sent, no item is left leased, and ``run()`` raises what the
hook raised once the shutdown is done. Every hook raises on every call: those it makes while
the worker stops are logged, not raised again."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio
from runyard import AsyncMemoryWorkQueue, ManualClock, QueuePolicy
from runyard._async.protocols import AsyncWorkQueue
from runyard._flavours import AsyncEvent, async_gather
from runyard.redis import AsyncRedisWorkQueue, RedisStoreSettings
from runyard.worker import AsyncWorker, Job, PermanentFailure, WorkerHooks

from tests.support.redis_plugin import AsyncClients, RedisTarget, fresh_namespace

SAFETY = 30.0  # seconds an event may take before the test fails; never reached when it passes
Opener = Callable[[ManualClock], Awaitable[AsyncWorkQueue]]
HOOKS = ["on_job_start", "on_job_end", "on_failure", "on_dead"]
# What the second item's handler does, so that the hook under test is called for it.
TRIGGER = {
    "on_job_start": "return",
    "on_job_end": "return",
    "on_failure": "fail",
    "on_dead": "dead",
}


@pytest_asyncio.fixture(params=["memory", "redis"])
async def opener(request: pytest.FixtureRequest) -> AsyncIterator[Opener]:
    opened: list[AsyncWorkQueue] = []
    cleanup: list[Callable[[], Any]] = []
    policy = QueuePolicy(lease_seconds=30, backoff_base=0, random=lambda: 0.5)

    async def open_one(clock: ManualClock) -> AsyncWorkQueue:
        queue: AsyncWorkQueue
        if request.param == "memory":
            queue = AsyncMemoryWorkQueue(clock=clock, policy=policy)
        else:
            target: RedisTarget = request.getfixturevalue("local_redis_target")
            settings = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
            cleanup.append(lambda: target.purge(settings.namespace))
            queue = AsyncRedisWorkQueue(
                AsyncClients.for_target(target),
                settings=settings,
                clock=clock,
                policy=policy,
                owns_client=True,
            )
        opened.append(queue)
        return queue

    yield open_one
    for queue in opened:
        await queue.aclose()
    for clean in cleanup:
        clean()


async def run_or_abort(worker: AsyncWorker) -> BaseException | None:
    """What ``worker.run()`` raised (None if it returned); aborted after SAFETY seconds (the
    test then fails, not hangs)."""
    done = AsyncEvent()
    raised: list[BaseException] = []

    async def work() -> None:
        try:
            await worker.run()
        except BaseException as exc:
            raised.append(exc)
        finally:
            done.set()

    async def watch() -> None:
        if not await done.wait(SAFETY):
            worker.abort()

    await async_gather([work, watch])
    return raised[0] if raised else None


@pytest.mark.asyncio
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("kind", [SystemExit, KeyboardInterrupt], ids=lambda k: k.__name__)
@pytest.mark.parametrize("hook", HOOKS)
async def test_a_hook_raising_an_exit_stops_the_worker_and_loses_nothing(
    opener: Opener, hook: str, kind: type[BaseException], batched: bool
) -> None:
    clock = ManualClock()
    queue = await opener(clock)
    # The first item's job runs until the end of the test (handed back at the stop); the
    # second's makes the hook under test be called; the third may be claimed or not.
    blocking = await queue.enqueue("acme", {"do": "block"})
    trigger = await queue.enqueue("acme", {"do": TRIGGER[hook]})
    spare = await queue.enqueue("acme", {"do": "return"})
    release = AsyncEvent()
    returned: set[str] = set()
    calls: list[BaseException] = []

    async def handler(job: Job) -> None:
        what = job.payload["do"]
        if what == "block":
            await release.wait(SAFETY)  # until given up (a thread: until the test ends)
            return
        if what == "fail":
            raise ValueError("the handler failed")
        if what == "dead":
            raise PermanentFailure("the handler gave up")
        returned.add(job.item_id)

    def raising(*args: object) -> None:
        calls.append(kind("the hook exits"))
        raise calls[-1]

    worker = AsyncWorker(
        queue,
        handler,
        clock=clock,
        batched=batched,
        concurrency=2,
        shutdown_grace=0,
        hooks=WorkerHooks(**{hook: raising}),
    )
    raised = await run_or_abort(worker)
    release.set()
    assert calls and raised is calls[0]  # the first, once the shutdown is done
    stats = worker.stats()
    assert stats.in_flight == 0 and stats.handed_back >= 1
    assert (await queue.stats()).leased == 0
    handed = await queue.get_item("acme", blocking.item_id)
    assert handed is not None and (handed.state, handed.attempts) == ("ready", 0)
    ended = await queue.get_item("acme", trigger.item_id)
    if hook == "on_job_end":  # called once its complete was applied
        assert ended is None and trigger.item_id in returned
    elif hook == "on_failure":  # called before its fail is sent: sent at the stop
        assert ended is not None and (ended.state, ended.attempts) == ("ready", 1)
    elif hook == "on_dead":
        assert ended is not None and ended.state == "dead"
    for item in (trigger, spare):  # completed only if its handler returned
        stored = await queue.get_item("acme", item.item_id)
        assert stored is not None or item.item_id in returned
        assert stored is None or stored.state in ("ready", "dead")


@pytest.mark.asyncio
async def test_a_hook_exit_ends_run_until_idle_too() -> None:
    clock = ManualClock()
    queue = AsyncMemoryWorkQueue(clock=clock, policy=QueuePolicy(backoff_base=0))
    for n in range(3):
        await queue.enqueue("acme", {"n": n})

    async def handler(job: Job) -> None:
        pass

    def on_job_end(job: Job, outcome: str) -> None:
        raise SystemExit(3)

    worker = AsyncWorker(queue, handler, clock=clock, hooks=WorkerHooks(on_job_end=on_job_end))
    with pytest.raises(SystemExit) as caught:
        await worker.run_until_idle()
    assert caught.value.code == 3
    stats = worker.stats()
    queued = await queue.stats()
    # The first job's end stops the worker: nothing more is claimed, nothing left leased.
    assert stats.completed >= 1 and queued.leased == 0
    assert stats.completed + queued.ready == 3
