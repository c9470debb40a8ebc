"""The queue state machine: RedisWorkQueue must agree with the memory model step by step."""

from __future__ import annotations

from hypothesis.stateful import run_state_machine_as_test
from runyard.clock import ManualClock
from runyard.policy import QueuePolicy
from runyard.redis import RedisStoreSettings, RedisWorkQueue

from tests.support.queue_machine import machine_runs, make_queue_machine
from tests.support.redis_plugin import Clients, RedisTarget, fresh_namespace

RUNS = machine_runs(40)


def _run_against(target: RedisTarget) -> None:
    namespaces: list[str] = []

    def factory(policy: QueuePolicy, clock: ManualClock) -> RedisWorkQueue:
        config = RedisStoreSettings(namespace=fresh_namespace(), durable=False)
        namespaces.append(config.namespace)
        return RedisWorkQueue(
            Clients.for_target(target),
            policy=policy,
            clock=clock,
            settings=config,
            owns_client=True,
        )

    try:
        run_state_machine_as_test(make_queue_machine(factory), settings=RUNS)
    finally:
        for namespace in namespaces:
            target.purge(namespace)


def test_redis_queue_on_fakeredis_agrees_with_the_memory_model(
    fake_redis_target: RedisTarget,
) -> None:
    _run_against(fake_redis_target)


def test_redis_queue_on_the_server_agrees_with_the_memory_model(
    local_redis_target: RedisTarget,
) -> None:
    _run_against(local_redis_target)
