"""A worker for the server-time test, run under ``faketime`` so its clock runs ahead.

``python -m tests.support.fast_clock_worker PORT NAMESPACE`` opens the queue without a clock
(server time), then tries what a fast clock used to allow: reap every lapsed lease and claim.
It prints one JSON line: its own clock, what reap and claim returned, and any clock warning.
"""

from __future__ import annotations

import json
import sys
import time
import warnings

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from runyard import QueuePolicy
from runyard.redis import RedisStoreSettings, RedisWorkQueue


def main(port: int, namespace: str) -> None:
    """Reap and claim on ``namespace`` at 127.0.0.1:``port``; print what happened as JSON."""
    client = redis.Redis(port=port, retry=Retry(NoBackoff(), 0))
    settings = RedisStoreSettings(namespace=namespace, durable=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        queue = RedisWorkQueue.open(client, policy=QueuePolicy(lease_seconds=30), settings=settings)
    reaped = queue.reap()
    lease = queue.claim("fast")
    print(
        json.dumps(
            {
                "clock": time.time(),
                "reaped": [item.item_id for item in reaped],
                "claimed": None if lease is None else lease.item_id,
                "warnings": [str(w.message) for w in caught],
            }
        )
    )
    client.close()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
