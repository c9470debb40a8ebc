"""The idle worker's baseline in ``benchmarks/bench_worker.py``: the same path through the
bare driver, in the same run. A producer connection sends one item and its wake-up hint in
one round trip; a listener thread blocked on the hint takes the item in one more, and the
time from before the producer's call to the item in the listener's hands is one sample. The
next sample comes after the same idle gap as the worker's (a backend and a client that have
slept start slower on this VM, so back-to-back figures would flatter the baseline).

- Redis: ``RPUSH`` of the item and ``LPUSH`` of the hint in one ``MULTI``; ``BLPOP`` on the
  hint, then ``LPOP`` of the item.
- PostgreSQL: ``INSERT`` with ``pg_notify`` in one autocommit statement; ``LISTEN`` and
  psycopg's ``notifies()``, then one ``DELETE ... FOR UPDATE SKIP LOCKED ... RETURNING``.
"""

from __future__ import annotations

import queue as queue_module
import threading
import time
from collections.abc import Callable

import psycopg
import redis

from benchmarks.worker_lanes import PG_DSN, REDIS_URL, Lane, cuts

__all__ = ["bare_idle"]

GAP = 0.005  # s of idle before each sample


def _samples(send: Callable[[], None], listen: Callable[[], bool], samples: int) -> list[float]:
    """Run ``listen`` (block for a hint, take the item; False when none came) on a thread;
    time ``samples`` sends, each from before ``send`` to the listener holding the item."""
    taken: queue_module.Queue[float] = queue_module.Queue()
    done = threading.Event()

    def listener() -> None:
        while not done.is_set():
            if listen():
                taken.put(time.perf_counter())

    thread = threading.Thread(target=listener, daemon=True)
    thread.start()
    delays = []
    try:
        for _ in range(samples):
            time.sleep(GAP)
            sent = time.perf_counter()
            send()
            delays.append(taken.get(timeout=10) - sent)
    finally:
        done.set()
        send()  # wakes the listener so it sees ``done``
        thread.join(10)
    return delays


def _redis(lane: Lane, samples: int) -> list[float]:
    items, hint = f"{lane.tag}:bare:items", f"{lane.tag}:bare:wake"
    producer, consumer = redis.Redis.from_url(REDIS_URL), redis.Redis.from_url(REDIS_URL)

    def send() -> None:
        pipe = producer.pipeline(transaction=True)
        pipe.rpush(items, "x")
        pipe.lpush(hint, "1")
        pipe.execute()

    def listen() -> bool:
        return consumer.blpop([hint], timeout=1) is not None and consumer.lpop(items) is not None

    try:
        return _samples(send, listen, samples)
    finally:
        producer.delete(items, hint)
        producer.close()
        consumer.close()


def _postgres(lane: Lane, samples: int) -> list[float]:
    table, channel = f'"{lane.tag}".bare_idle', f"{lane.tag}_bare"
    producer = psycopg.connect(PG_DSN, autocommit=True)
    listening = psycopg.connect(PG_DSN, autocommit=True)
    claimer = psycopg.connect(PG_DSN, autocommit=True)
    producer.execute(f"CREATE TABLE {table} (id bigserial PRIMARY KEY, payload text)")
    listening.execute(f'LISTEN "{channel}"')
    insert = (
        f"WITH i AS (INSERT INTO {table} (payload) VALUES ('x') RETURNING id) "
        "SELECT pg_notify(%s, '') FROM i"
    )
    take = (
        f"DELETE FROM {table} WHERE id = (SELECT id FROM {table} ORDER BY id "
        "FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id"
    )

    def send() -> None:
        producer.execute(insert, (channel,))

    def listen() -> bool:
        woke = any(True for _ in listening.notifies(timeout=1, stop_after=1))
        return woke and claimer.execute(take).fetchone() is not None

    try:
        return _samples(send, listen, samples)
    finally:
        producer.execute(f"DROP TABLE {table}")
        for conn in (producer, listening, claimer):
            conn.close()


def bare_idle(lane: Lane, samples: int) -> dict[str, float] | None:
    """The bare driver's enqueue -> taken p50/p99 on ``lane`` (None on memory)."""
    if lane.name == "redis":
        return cuts(_redis(lane, samples))
    if lane.name == "postgres":
        return cuts(_postgres(lane, samples))
    return None
