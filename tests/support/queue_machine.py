"""A Hypothesis state machine that drives a WorkQueue and the memory model side by side.

enqueue / claim / heartbeat / complete / fail / settle-with-a-stale-token / tick / reap / requeue /
cancel / purge_dead (enqueues carry run_at and max_attempts too):
after every step the queue under test must agree with `runyard.memory.queue.MemoryQueueCore` on what
was claimed, what was refused, and the counts by state. Backends get it through
`make_queue_machine(factory)`, with `factory(policy, clock)` returning a fresh sync queue.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from runyard._sync.protocols import WorkQueue
from runyard.clock import ManualClock
from runyard.errors import RunyardError
from runyard.memory.queue import MemoryQueueCore
from runyard.models import Lease
from runyard.policy import QueuePolicy

__all__ = ["MACHINE_POLICY", "machine_runs", "make_queue_machine"]

MACHINE_POLICY = QueuePolicy(
    lease_seconds=10,
    max_attempts=3,
    backoff_base=2,
    backoff_cap=8,
    max_lease_seconds=25,
    random=lambda: 0.5,
)
TENANTS = ("acme", "globex", "a:b")
WORKERS = ("w1", "w2")


def machine_runs(max_examples: int, steps: int = 30) -> settings:
    """Settings for a run of the machine: derandomized and without an example database, so every
    run walks the same steps and a failure found once is found again."""
    return settings(
        max_examples=max_examples,
        stateful_step_count=steps,
        deadline=None,
        derandomize=True,
        database=None,
    )


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", call()
    except RunyardError as exc:
        return type(exc).__name__, getattr(exc, "reason", None)


def make_queue_machine(
    factory: Callable[[QueuePolicy, ManualClock], WorkQueue],
) -> type[RuleBasedStateMachine]:
    """Return a state machine class comparing ``factory``'s queue with the memory model."""

    class QueueMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.clock = ManualClock()
            self.model = MemoryQueueCore(self.clock, MACHINE_POLICY, 262_144)
            self.queue = factory(MACHINE_POLICY, self.clock)
            self.held: dict[tuple[str, str], tuple[Lease, Lease]] = {}  # (model, real)
            self.stale: list[tuple[Lease, Lease]] = []
            self.count = 0

        def teardown(self) -> None:
            self.queue.close()

        @rule(
            tenant=st.sampled_from(TENANTS),
            priority=st.integers(0, 2),
            delay=st.sampled_from([0.0, 0.0, 5.0]),
            dedupe=st.sampled_from([None, None, "d1"]),
            attempts=st.sampled_from([None, None, 1]),
            run_at_offset=st.sampled_from([None, None, None, -50.0, 7.0]),
        )
        def enqueue(
            self,
            tenant: str,
            priority: int,
            delay: float,
            dedupe: str | None,
            attempts: int | None = None,
            run_at_offset: float | None = None,
        ) -> None:
            """Enqueue on both; ``run_at_offset`` (seconds from now) replaces the delay."""
            self.count += 1
            item_id = f"item-{self.count}"
            kw: dict[str, Any] = {
                "item_id": item_id,
                "dedupe_key": dedupe,
                "priority": priority,
                "delay_seconds": delay if run_at_offset is None else 0.0,
                "max_attempts": attempts,
            }
            if run_at_offset is not None:
                kw["run_at"] = self.clock.now() + run_at_offset
            model = self.model.enqueue(tenant, {"n": self.count}, **kw)
            real = self.queue.enqueue(tenant, {"n": self.count}, **kw)
            assert (real.item_id, real.state, real.payload, real.max_attempts) == (
                model.item_id,
                model.state,
                model.payload,
                model.max_attempts,
            )
            assert real.available_at == model.available_at

        @rule(worker=st.sampled_from(WORKERS))
        def claim(self, worker: str) -> None:
            model = self.model.claim(worker)
            real = self.queue.claim(worker)
            assert (model is None) == (real is None), (model, real)
            if model is not None and real is not None:
                assert (real.tenant, real.item_id, real.item.attempts) == (
                    model.tenant,
                    model.item_id,
                    model.item.attempts,
                )
                assert real.expires_at == model.expires_at
                self.held[(model.tenant, model.item_id)] = (model, real)

        def _settle(self, data: st.DataObject, action: str) -> None:
            key = data.draw(st.sampled_from(sorted(self.held)))
            retryable = data.draw(st.booleans()) if action == "fail" else False
            self.settle(key, action, retryable=retryable)

        def settle(self, key: tuple[str, str], action: str, *, retryable: bool = False) -> None:
            """Settle the held lease on ``key`` by ``action`` on both queues and compare."""
            model, real = self.held.pop(key)
            if action == "complete":
                m = _outcome(lambda: self.model.complete(*key, token=model.token))
                r = _outcome(lambda: self.queue.complete(*key, token=real.token))
            elif action == "fail":
                m = _outcome(
                    lambda: (
                        self.model.fail(
                            *key, token=model.token, error="e", retryable=retryable
                        ).state
                    )
                )
                r = _outcome(
                    lambda: (
                        self.queue.fail(
                            *key, token=real.token, error="e", retryable=retryable
                        ).state
                    )
                )
            else:
                m = _outcome(lambda: self.model.heartbeat(*key, token=model.token))
                r = _outcome(lambda: self.queue.heartbeat(*key, token=real.token))
                if m[0] == "ok" and r[0] == "ok":
                    assert r[1].expires_at == m[1].expires_at
                    self.held[key] = (m[1], r[1])
                    return
            assert m[0] == r[0] and (m[0] == "ok" or m[1] == r[1]), (action, m, r)
            if m[0] == "ok" or m[0] == "LeaseLostError":
                self.stale.append((model, real))

        @precondition(lambda self: bool(self.held))
        @rule(data=st.data())
        def complete(self, data: st.DataObject) -> None:
            self._settle(data, "complete")

        @precondition(lambda self: bool(self.held))
        @rule(data=st.data())
        def fail(self, data: st.DataObject) -> None:
            self._settle(data, "fail")

        @precondition(lambda self: bool(self.held))
        @rule(data=st.data())
        def heartbeat(self, data: st.DataObject) -> None:
            self._settle(data, "heartbeat")

        @precondition(lambda self: bool(self.stale))
        @rule(data=st.data())
        def settle_with_a_stale_token(self, data: st.DataObject) -> None:
            self.settle_stale(data.draw(st.integers(0, len(self.stale) - 1)))

        def settle_stale(self, index: int) -> None:
            """Complete with the stale lease ``self.stale[index]``: both queues must refuse."""
            model, real = self.stale[index]
            m = _outcome(
                lambda: self.model.complete(model.tenant, model.item_id, token=model.token)
            )
            r = _outcome(lambda: self.queue.complete(real.tenant, real.item_id, token=real.token))
            assert m[0] != "ok" and (m[0], m[1]) == (r[0], r[1]), (m, r)

        @rule(seconds=st.sampled_from([1.0, 4.0, 11.0]))
        def tick(self, seconds: float) -> None:
            self.clock.advance(seconds)

        @rule()
        def reap(self) -> None:
            model = self.model.reap(limit=100)
            real = self.queue.reap(limit=100)
            assert sorted((i.tenant, i.item_id, i.state) for i in real) == sorted(
                (i.tenant, i.item_id, i.state) for i in model
            )
            for item in model:
                self.held.pop((item.tenant, item.item_id), None)

        @rule(tenant=st.sampled_from(TENANTS))
        def requeue(self, tenant: str) -> None:
            letters = self.model.dead_letters(tenant, limit=100)
            real_letters = self.queue.dead_letters(tenant, limit=100)
            assert [d.item.item_id for d in real_letters] == [d.item.item_id for d in letters]
            if letters:
                item_id = letters[0].item.item_id
                assert (
                    self.queue.requeue(tenant, item_id).state
                    == self.model.requeue(tenant, item_id).state
                )

        @rule(tenant=st.sampled_from(TENANTS), data=st.data())
        def cancel(self, tenant: str, data: st.DataObject) -> None:
            item_id = f"item-{data.draw(st.integers(0, self.count))}"  # item-0: never enqueued
            m = _outcome(lambda: self.model.cancel(tenant, item_id))
            r = _outcome(lambda: self.queue.cancel(tenant, item_id))
            assert m == r, (item_id, m, r)

        @precondition(lambda self: self.model.stats().dead > 0)
        @rule(
            tenant=st.sampled_from(TENANTS),
            older_than=st.sampled_from([0.0, 0.0, 5.0]),
            limit=st.sampled_from([1, 100]),
        )
        def purge_dead(self, tenant: str, older_than: float, limit: int) -> None:
            model = self.model.purge_dead(tenant, older_than=older_than, limit=limit)
            assert self.queue.purge_dead(tenant, older_than=older_than, limit=limit) == model

        @invariant()
        def counts_agree(self) -> None:
            assert self.queue.stats() == self.model.stats()

    return QueueMachine
