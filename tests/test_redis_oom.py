"""A Redis out of memory (``maxmemory`` with ``noeviction``) refuses a write before it runs:
the queue retries it, and past the budget raises QueueUnavailableError (retryable), never the
driver's own exception; once memory is freed, the same call goes through. A server of its
own, on a free port."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from redis.backoff import NoBackoff
from redis.exceptions import OutOfMemoryError
from redis.retry import Retry
from runyard.errors import QueueUnavailableError
from runyard.redis import RedisStoreSettings, RedisWorkQueue
from runyard.redis.common import classify

from tests.support.redis_servers import RedisProcess, require_redis_binaries, start_redis


def test_an_out_of_memory_reply_is_not_applied() -> None:
    # redis-py strips the reply's "OOM" from the message: the class says it.
    assert classify(OutOfMemoryError("command not allowed when used memory > 'maxmemory'.")) == (
        "not_applied"
    )


@pytest.fixture
def full_server() -> Iterator[RedisProcess]:
    require_redis_binaries()
    server = start_redis("--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
    try:
        yield server
    finally:
        server.stop()


def test_a_full_server_is_a_retryable_unavailable_error_and_nothing_half_done(
    full_server: RedisProcess,
) -> None:
    client = redis.Redis(port=full_server.port, retry=Retry(NoBackoff(), 0))
    settings = RedisStoreSettings(
        namespace="oom", durable=False, retry_attempts=2, retry_backoff_base=0.001
    )
    queue = RedisWorkQueue(client, settings=settings)
    enqueued = 0
    with pytest.raises(QueueUnavailableError) as raised:
        for i in range(10_000):  # 2 kB payloads: 2 MB fill in about a thousand
            queue.enqueue("acme", {"blob": "x" * 2000}, item_id=f"i{i}")
            enqueued += 1
    assert raised.value.retryable and 0 < enqueued < 10_000
    assert queue.get_item("acme", f"i{enqueued}") is None  # the refused one: not half written
    assert queue.stats().ready == enqueued
    client.config_set("maxmemory", 0)
    queue.enqueue("acme", {"blob": "x" * 2000}, item_id=f"i{enqueued}")
    assert queue.stats().ready == enqueued + 1
    client.close()
