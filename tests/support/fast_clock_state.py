"""A state store opened under ``faketime`` (its host clock runs ahead), for the clock check.

``python -m tests.support.fast_clock_state PORT NAMESPACE`` opens a RedisStateStore (``open()``
and ``from_url()``) and prints one JSON line: its own clock and the warnings each raised.
"""

from __future__ import annotations

import json
import sys
import time
import warnings

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from runyard.redis import RedisStateStore, RedisStoreSettings


def main(port: int, namespace: str) -> None:
    """Open a state store both ways on 127.0.0.1:``port``; print the warnings as JSON."""
    client = redis.Redis(port=port, retry=Retry(NoBackoff(), 0))
    settings = RedisStoreSettings(namespace=namespace, durable=False)
    caught: dict[str, list[str]] = {}
    with warnings.catch_warnings(record=True) as opened:
        warnings.simplefilter("always")
        RedisStateStore.open(client, settings=settings)
    caught["open"] = [str(w.message) for w in opened]
    with warnings.catch_warnings(record=True) as built:
        warnings.simplefilter("always")
        RedisStateStore.from_url(f"redis://127.0.0.1:{port}/0", settings=settings).close()
    caught["from_url"] = [str(w.message) for w in built]
    print(json.dumps({"clock": time.time(), **caught}))
    client.close()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
