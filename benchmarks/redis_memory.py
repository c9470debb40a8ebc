"""Bytes per queued item on Redis: MEMORY USAGE summed over a namespace's keys, and the
``used_memory`` delta beside it, after enqueueing ``items`` items of a ``payload_bytes`` payload.

Run by ``make bench-redis``; ``python benchmarks/redis_memory.py --port N`` measures alone.
"""

from __future__ import annotations

import argparse
import sys
import uuid

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from runyard.redis import RedisStoreSettings, RedisWorkQueue
from runyard.redis.keys import cleanup_patterns

__all__ = ["bytes_per_item"]


def _used_memory(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def bytes_per_item(port: int, items: int = 20_000, payload_bytes: int = 100) -> dict[str, float]:
    """Enqueue ``items`` ready items (three tenants) under a fresh ``bench-`` namespace and
    return {"memory_usage": bytes per item summed over its keys, "used_memory": the server's
    delta per item}; the namespace's keys are deleted afterwards."""
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    client = redis.Redis(port=port, retry=Retry(NoBackoff(), 0))
    queue = RedisWorkQueue(client, settings=RedisStoreSettings(namespace=namespace, durable=False))
    payload = "x" * (payload_bytes - 2)  # JSON text: the quotes make it payload_bytes long
    before = _used_memory(client)
    try:
        for n in range(items):
            queue.enqueue(f"tenant-{n % 3}", payload, item_id=f"item-{n:06d}")
        after = _used_memory(client)
        keys = [k for p in cleanup_patterns(namespace) for k in client.scan_iter(p, count=1000)]
        total = 0
        for start in range(0, len(keys), 1000):
            pipe = client.pipeline(transaction=False)
            for key in keys[start : start + 1000]:
                pipe.memory_usage(key, samples=0)
            total += sum(int(size or 0) for size in pipe.execute())
        return {"memory_usage": total / items, "used_memory": (after - before) / items}
    finally:
        for pattern in cleanup_patterns(namespace):
            found = list(client.scan_iter(match=pattern, count=1000))
            for start in range(0, len(found), 1000):
                client.unlink(*found[start : start + 1000])
        client.close()


def main(argv: list[str] | None = None) -> int:
    """Print bytes per item for the redis-server on ``--port``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=6379)
    parser.add_argument("--items", type=int, default=20_000)
    args = parser.parse_args(argv)
    figures = bytes_per_item(args.port, args.items)
    print(
        f"bytes per item at {args.items} items, 100-byte payload: "
        f"{figures['memory_usage']:.0f} (MEMORY USAGE), {figures['used_memory']:.0f} (used_memory)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
