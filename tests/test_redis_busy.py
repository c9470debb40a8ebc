"""A Redis ``BUSY`` reply (a script ran past busy-reply-threshold) is a retryable error: the
refused command was not applied, so it is sent again and, past the budget, the queue raises
QueueUnavailableError."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import redis
from redis.backoff import NoBackoff
from redis.exceptions import ResponseError
from redis.retry import Retry
from runyard.errors import QueueUnavailableError
from runyard.redis import RedisStoreSettings, RedisWorkQueue
from runyard.redis.common import classify

from tests.support.redis_plugin import fresh_namespace
from tests.support.redis_servers import RedisProcess

BUSY = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."


def test_a_busy_reply_is_not_applied_and_so_retryable() -> None:
    assert classify(ResponseError(BUSY)) == "not_applied"


def test_other_replies_starting_with_busy_are_not_taken_for_it() -> None:
    assert classify(ResponseError("BUSYKEY Target key name already exists.")) == "fatal"


@pytest.fixture
def busy_server(dedicated_redis: RedisProcess) -> Iterator[int]:
    """The dedicated server running an endless script past a 50 ms busy-reply-threshold,
    until the test ends (SCRIPT KILL, then the threshold restored)."""
    control = redis.Redis(port=dedicated_redis.port)
    previous = control.config_get("busy-reply-threshold")["busy-reply-threshold"]
    control.config_set("busy-reply-threshold", 50)
    runner = redis.Redis(port=dedicated_redis.port)
    outcome: list[BaseException] = []

    def run_forever() -> None:
        try:
            runner.eval("while true do end", 0)
        except ResponseError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run_forever)
    thread.start()
    try:
        # Sent while the script runs, a PING is answered BUSY once the threshold has passed.
        while True:
            try:
                control.ping()
            except ResponseError as exc:
                assert str(exc).startswith("BUSY")
                break
        yield dedicated_redis.port
    finally:
        while True:
            try:
                control.script_kill()
                break
            except ResponseError as exc:  # NOTBUSY: the script has not started yet
                assert "NOTBUSY" in str(exc)
        thread.join()
        control.config_set("busy-reply-threshold", previous)
        control.close()
        runner.close()
    assert outcome, "the endless script ended only when killed"


def test_a_busy_server_is_a_retryable_unavailable_error_past_the_budget(busy_server: int) -> None:
    client = redis.Redis(port=busy_server, retry=Retry(NoBackoff(), 0))
    settings = RedisStoreSettings(
        namespace=fresh_namespace(), durable=False, retry_attempts=2, retry_backoff_base=0.001
    )
    queue = RedisWorkQueue(client, settings=settings)
    with pytest.raises(QueueUnavailableError, match="BUSY") as raised:
        queue.stats()
    assert raised.value.retryable
    client.close()
