"""The queue state machine against the memory twin (backends run it in their own lanes)."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test
from runyard import MemoryWorkQueue

from tests.support.queue_machine import make_queue_machine

MemoryQueueMachine = make_queue_machine(
    lambda policy, clock: MemoryWorkQueue(policy=policy, clock=clock)
)
MemoryQueueMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None
)
TestMemoryQueueMachine = MemoryQueueMachine.TestCase


class QueueThatIgnoresTokens(MemoryWorkQueue):
    """A broken queue: complete() accepts any token, so a stale worker can ack."""

    def complete(self, tenant: str, item_id: str, *, token: int) -> None:
        lease = self._core._leases.get((tenant, item_id))
        super().complete(tenant, item_id, token=lease.token if lease else token)


def test_the_machine_catches_a_queue_that_accepts_stale_tokens() -> None:
    broken = make_queue_machine(
        lambda policy, clock: QueueThatIgnoresTokens(policy=policy, clock=clock)
    )
    with pytest.raises(AssertionError):
        run_state_machine_as_test(
            broken, settings=settings(max_examples=300, stateful_step_count=40, deadline=None)
        )
