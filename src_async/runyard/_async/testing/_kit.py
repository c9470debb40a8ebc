"""What every queue case class of the conformance kit shares: its policy, its hooks and helpers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, cast

import pytest

from runyard._async.protocols import AsyncBatchedWorkQueue, AsyncWorkQueue
from runyard.errors import InvalidArgumentError
from runyard.models import Lease
from runyard.policy import QueuePolicy

__all__ = ["KIT_POLICY", "AsyncQueueKitBase", "refuses_each"]

# Deterministic: jitter is always half the ceiling, so attempt 1 backs off 5 s, attempt 2 10 s,
# attempt 3 20 s (after a failure or a lapse alike).
KIT_POLICY = QueuePolicy(
    lease_seconds=30,
    max_attempts=3,
    backoff_base=10,
    backoff_cap=60,
    max_lease_seconds=120,
    random=lambda: 0.5,
)


async def refuses_each(
    call: Callable[[Any], Awaitable[object]],
    bad_values: Iterable[Any],
    argument: str,
    *,
    naming: str | None = None,
) -> None:
    """``call(bad)`` raises InvalidArgumentError naming ``argument`` for every bad value (and,
    when given, mentioning ``naming``, e.g. the limit, in its message)."""
    for bad in bad_values:
        with pytest.raises(InvalidArgumentError) as caught:
            await call(bad)
        assert caught.value.argument == argument, bad
        if naming is not None:
            assert naming in str(caught.value), bad


class AsyncQueueKitBase:
    """The base of every queue case class: the ``advance`` hook and the helpers they share.

    Case classes are mixed into AsyncWorkQueueConformance and use its ``queue`` fixture.
    """

    def advance(self, seconds: float) -> None:
        """Move the queue's clock forward by ``seconds``."""
        raise NotImplementedError("implement advance() in your conformance subclass")

    async def make_queue(self, policy: QueuePolicy) -> AsyncWorkQueue:
        """Return a fresh, empty queue using ``policy`` (a case that needs another policy
        than KIT_POLICY opens its own, and closes it)."""
        raise NotImplementedError("implement make_queue() in your conformance subclass")

    async def _lease(self, queue: AsyncWorkQueue, worker: str = "w1") -> Lease:
        """Claim, expecting an item to be due."""
        lease = await queue.claim(worker)
        assert lease is not None, "expected a due item to claim"
        return lease

    def _batched(self, queue: AsyncWorkQueue) -> AsyncBatchedWorkQueue:
        """``queue`` as a batched queue; skips the case when it does not declare the calls."""
        if not queue.capabilities.batched_operations:
            pytest.skip(
                f"{type(queue).__name__} does not declare batched_operations: "
                "the *_many cases do not apply"
            )
        return cast(AsyncBatchedWorkQueue, queue)
