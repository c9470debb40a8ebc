"""The queue state machine against the memory twin (backends run it in their own lanes)."""

from __future__ import annotations

from typing import Any

import pytest
from runyard import MemoryWorkQueue

from tests.support.queue_machine import machine_runs, make_queue_machine

MemoryQueueMachine = make_queue_machine(
    lambda policy, clock: MemoryWorkQueue(policy=policy, clock=clock)
)
MemoryQueueMachine.TestCase.settings = machine_runs(60, steps=40)
TestMemoryQueueMachine = MemoryQueueMachine.TestCase


class QueueThatIgnoresTokens(MemoryWorkQueue):
    """A broken queue: complete() accepts any token, so a stale worker can ack."""

    def complete(self, tenant: str, item_id: str, *, token: int) -> None:
        lease = self._core._leases.get((tenant, item_id))
        super().complete(tenant, item_id, token=lease.token if lease else token)


def _stale_ack_story(machine: Any) -> None:
    """w1 claims and fails an item; it becomes due; w2 claims it; w1 acks with its old token."""
    machine.enqueue(tenant="acme", priority=0, delay=0.0, dedupe=None)
    machine.claim(worker="w1")
    machine.settle(("acme", "item-1"), "fail", retryable=True)
    machine.tick(seconds=11.0)
    machine.claim(worker="w2")
    machine.counts_agree()
    machine.settle_stale(0)


def test_the_stale_ack_story_passes_on_a_correct_queue() -> None:
    machine = MemoryQueueMachine()
    _stale_ack_story(machine)
    machine.counts_agree()
    machine.teardown()


def test_the_machine_catches_a_queue_that_accepts_stale_tokens() -> None:
    machine = make_queue_machine(
        lambda policy, clock: QueueThatIgnoresTokens(policy=policy, clock=clock)
    )()
    with pytest.raises(AssertionError, match="LeaseLostError"):
        _stale_ack_story(machine)
    machine.teardown()
