"""Seeded scripts of queue operations run on the memory backend (the reference) and on another
store side by side: every call must give the same result (tokens aside: each store mints its
own). Operations: enqueue and enqueue_many (delays, run_at, priorities), claim and claim_many,
complete, fail, release, heartbeat, reap, adopt, requeue, cancel, purge_dead, prune, stats and
clock ticks. Used by tests/test_sqlite_queue_differential.py and tests/test_queue_differential.py.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from typing import Any

from runyard import ManualClock, MemoryWorkQueue, RunyardError
from runyard._sync.protocols import BatchedWorkQueue
from runyard.models import Lease, NewItem, WorkItem

from tests.support.queue_machine import MACHINE_POLICY

POLICY = MACHINE_POLICY
OPERATIONS = [
    "enqueue",
    "enqueue_many",
    "claim",
    "claim_many",
    "complete",
    "fail",
    "release",
    "heartbeat",
    "reap",
    "adopt",
    "requeue",
    "cancel",
    "purge",
    "prune",
    "tick",
    "stats",
]


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return _plain(call())
    except RunyardError as exc:
        return _plain(exc)


def _plain(value: Any) -> Any:
    """What the two backends must agree on (tokens differ: each store mints its own)."""
    if isinstance(value, Lease):
        return ("lease", value.tenant, value.item_id, value.item.attempts, value.expires_at)
    if isinstance(value, WorkItem):
        return (
            "item",
            value.tenant,
            value.item_id,
            value.state,
            value.available_at,
            value.attempts,
        )
    if isinstance(value, RunyardError):
        return ("error", type(value).__name__, getattr(value, "reason", None))
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


Check = Callable[[str, Any], None]  # (operation, where in the script) after each compared call


def run_script(
    memory: MemoryWorkQueue,
    store: BatchedWorkQueue,
    mem_clock: ManualClock,
    store_clock: ManualClock,
    *,
    seed: int,
    steps: int,
    tenants: int,
    after: Check | None = None,
) -> None:
    """Run ``steps`` operations drawn by ``random.Random(seed)`` on both queues (their clocks
    advanced together), asserting after each that they answered the same; ``after`` adds the
    caller's own checks."""
    rng = random.Random(seed)
    names = [f"t{k}" for k in range(tenants)]
    held: dict[tuple[str, str], tuple[Lease, Lease]] = {}
    made = 0
    done: list[Any] = []
    for _ in range(steps):
        op = rng.choice(OPERATIONS)
        mine: Any = None
        theirs: Any = None
        if op == "enqueue":
            made += 1
            tenant = rng.choice(names)
            kw: dict[str, Any] = {"item_id": f"i{made}", "priority": rng.choice([0, 0, 1])}
            r = rng.random()
            if r < 0.4:
                kw["delay_seconds"] = rng.choice([1.0, 5.0, 20.0, 100.0])
            elif r < 0.5:
                kw["run_at"] = mem_clock.now() + rng.choice([-5.0, 3.0, 50.0])
            mine = _outcome(partial(memory.enqueue, tenant, {"n": made}, **kw))
            theirs = _outcome(partial(store.enqueue, tenant, {"n": made}, **kw))
        elif op == "enqueue_many":
            tenant = rng.choice(names)
            items = []
            for _ in range(rng.randint(1, 3)):
                made += 1
                items.append(
                    NewItem(
                        payload={"n": made},
                        item_id=f"i{made}",
                        delay_seconds=rng.choice([0.0, 0.0, 5.0, 50.0]),
                        priority=rng.choice([0, 1]),
                    )
                )
            mine = _outcome(partial(memory.enqueue_many, tenant, items))
            theirs = _outcome(partial(store.enqueue_many, tenant, items))
        elif op in ("claim", "claim_many"):
            worker = rng.choice(["w1", "w2"])
            if op == "claim":
                got_m = [x for x in [memory.claim(worker)] if x is not None]
                got_s = [x for x in [store.claim(worker)] if x is not None]
            else:
                limit = rng.randint(1, 4)
                got_m = memory.claim_many(worker, limit=limit)
                got_s = store.claim_many(worker, limit=limit)
            mine, theirs = _plain(got_m), _plain(got_s)
            for x, y in zip(got_m, got_s, strict=False):
                held[(x.tenant, x.item_id)] = (x, y)
        elif op in ("complete", "fail", "release", "heartbeat"):
            if not held:
                continue
            key = rng.choice(sorted(held))
            x, y = held[key]
            if op == "complete":
                held.pop(key)
                mine = _outcome(partial(memory.complete, x))
                theirs = _outcome(partial(store.complete, y))
            elif op == "fail":
                held.pop(key)
                retry = rng.random() < 0.7
                mine = _outcome(partial(memory.fail, x, error="e", retryable=retry))
                theirs = _outcome(partial(store.fail, y, error="e", retryable=retry))
            elif op == "release":
                held.pop(key)
                mine = _outcome(partial(memory.release_many, [x]))
                theirs = _outcome(partial(store.release_many, [y]))
            else:
                renewed_m, renewed_s = memory.heartbeat_many([x]), store.heartbeat_many([y])
                mine, theirs = _plain(renewed_m), _plain(renewed_s)
                if isinstance(renewed_m[0], Lease) and isinstance(renewed_s[0], Lease):
                    held[key] = (renewed_m[0], renewed_s[0])
        elif op == "reap":
            mine = sorted(_plain(memory.reap(limit=100)))
            theirs = sorted(_plain(store.reap(limit=100)))
        elif op == "adopt":
            worker = rng.choice(["w1", "w2"])
            got_m, got_s = memory.adopt(worker), store.adopt(worker)
            mine, theirs = _plain(got_m), _plain(got_s)
            for x, y in zip(got_m, got_s, strict=False):
                held[(x.tenant, x.item_id)] = (x, y)
        elif op == "requeue":
            tenant = rng.choice(names)
            letters = memory.dead_letters(tenant, limit=100)
            if not letters:
                continue
            item_id = letters[0].item.item_id
            mine = _outcome(partial(memory.requeue, tenant, item_id))
            theirs = _outcome(partial(store.requeue, tenant, item_id))
        elif op == "cancel":
            tenant, item_id = rng.choice(names), f"i{rng.randint(1, max(made, 1))}"
            mine = _outcome(partial(memory.cancel, tenant, item_id))
            theirs = _outcome(partial(store.cancel, tenant, item_id))
        elif op == "purge":
            tenant = rng.choice(names)
            mine = memory.purge_dead(tenant, older_than=0.0, limit=100)
            theirs = store.purge_dead(tenant, older_than=0.0, limit=100)
        elif op == "prune":
            mine, theirs = memory.prune(limit=1000), store.prune(limit=1000)
        elif op == "tick":
            seconds = rng.choice([1.0, 3.0, 6.0, 11.0, 30.0])
            mem_clock.advance(seconds)
            store_clock.advance(seconds)
            continue
        else:
            mine, theirs = memory.stats(), store.stats()
        done.append(op)
        assert theirs == mine, (seed, len(done), done[-5:])
        if after is not None:
            after(op, (seed, len(done), done[-5:]))
