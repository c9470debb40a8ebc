"""The sync twin under a Flask-style threaded worker; the async twin under an asyncio service."""

from __future__ import annotations

import asyncio
import threading

from runyard import (
    AsyncMemoryStateStore,
    CounterDelta,
    MemoryStateStore,
    MemoryWorkQueue,
    RunKey,
    StateConflictError,
)


def test_threads_sharing_a_sync_store_lose_no_update() -> None:
    store = MemoryStateStore()
    key = RunKey("acme", "shared")
    store.put_run(key, {"n": 0}, expected_version=0)

    def request_handler() -> None:
        for _ in range(100):
            store.patch_run(key, CounterDelta(input_tokens=1))
            while True:  # read-modify-write with CAS, the way a request handler would
                record = store.get_run(key)
                assert record is not None
                try:
                    store.put_run(key, {"n": record.blob["n"] + 1}, expected_version=record.version)
                    break
                except StateConflictError:
                    continue

    threads = [threading.Thread(target=request_handler) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final = store.get_run(key)
    assert final is not None
    assert final.input_tokens == 800 and final.blob == {"n": 800} and final.version == 1601


def test_threads_draining_a_sync_queue_take_each_item_once() -> None:
    queue = MemoryWorkQueue()
    for i in range(500):
        queue.enqueue(f"t{i % 5}", {"i": i})
    taken: list[int] = []

    def worker(name: str) -> None:
        while (lease := queue.claim(name)) is not None:
            queue.complete(lease.tenant, lease.item_id, token=lease.token)
            taken.append(lease.item.payload["i"])

    threads = [threading.Thread(target=worker, args=(f"w{n}",)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(taken) == list(range(500))


def test_tasks_sharing_an_async_store_lose_no_update() -> None:
    async def service() -> int:
        store = AsyncMemoryStateStore()
        key = RunKey("acme", "shared")
        await store.put_run(key, {}, expected_version=0)
        await asyncio.gather(
            *(store.patch_run(key, CounterDelta(output_tokens=2)) for _ in range(300))
        )
        record = await store.get_run(key)
        assert record is not None
        return record.output_tokens

    assert asyncio.run(service()) == 600
