"""Leases follow the Redis server's clock: a worker whose own clock runs 40 s ahead (under
``faketime``, installed by ``make system-deps``) cannot reap, steal or burn an attempt of
another worker's live lease."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from runyard import QueuePolicy
from runyard.redis import RedisStoreSettings, RedisWorkQueue
from runyard.redis.clocks import clock_offset_warning

from tests.support.redis_plugin import RedisTarget, fresh_namespace
from tests.support.servers import in_ci

ROOT = Path(__file__).resolve().parent.parent


def _faketime() -> str:
    found = shutil.which("faketime")
    if found is None:
        message = "faketime is not installed: run `make system-deps`"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return found


def _run_fast_worker(port: int, namespace: str) -> dict[str, object]:
    command = [_faketime(), "-f", "+40s", sys.executable, "-m", "tests.support.fast_clock_worker"]
    done = subprocess.run(
        [*command, str(port), namespace],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_a_worker_40_s_ahead_cannot_reap_steal_or_burn_a_live_lease(
    local_redis_target: RedisTarget,
) -> None:
    namespace = fresh_namespace()
    client = redis.Redis(port=local_redis_target.port, retry=Retry(NoBackoff(), 0))
    settings = RedisStoreSettings(namespace=namespace, durable=False)
    try:
        queue = RedisWorkQueue(client, policy=QueuePolicy(lease_seconds=30), settings=settings)
        queue.enqueue("acme", {"n": 1}, item_id="job")
        lease = queue.claim("healthy")
        assert lease is not None

        fast = _run_fast_worker(local_redis_target.port, namespace)

        # The subprocess really ran 40 s ahead (this checks the set-up, not a duration).
        assert isinstance(fast["clock"], float) and fast["clock"] - time.time() > 30
        assert fast["reaped"] == [] and fast["claimed"] is None
        warnings = fast["warnings"]
        assert isinstance(warnings, list) and any(
            "this host's clock reads" in w and "Redis server's reads" in w for w in warnings
        )
        item = queue.get_item("acme", "job")
        assert item is not None and item.state == "leased" and item.attempts == 1
        assert item.worker == "healthy"
        queue.complete(lease)
        assert queue.get_item("acme", "job") is None
    finally:
        local_redis_target.purge(namespace)
        client.close()


def test_a_state_store_opened_40_s_ahead_warns_naming_both_clocks(
    local_redis_target: RedisTarget,
) -> None:
    command = [_faketime(), "-f", "+40s", sys.executable, "-m", "tests.support.fast_clock_state"]
    done = subprocess.run(
        [*command, str(local_redis_target.port), fresh_namespace()],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["clock"] - time.time() > 30  # the subprocess really ran 40 s ahead
    for way in ("open", "from_url"):
        assert any(
            "this host's clock reads" in w and "Redis server's reads" in w and "-40." in w
            for w in result[way]
        ), (way, result[way])


def test_a_clock_offset_within_the_threshold_is_not_reported() -> None:
    assert clock_offset_warning(1000.0, 1001.5, 1000.2) is None


def test_a_clock_offset_past_the_threshold_names_both_clocks() -> None:
    message = clock_offset_warning(1_700_000_040.0, 1_700_000_000.0, 1_700_000_040.0)
    assert message is not None
    assert "this host's clock reads 2023-11-14T22:14:00.000+00:00" in message
    assert "the Redis server's reads 2023-11-14T22:13:20.000+00:00" in message
    assert "-40.000 s" in message


def test_the_round_trip_widens_the_allowance() -> None:
    assert clock_offset_warning(1000.0, 1003.5, 1004.0) is None
