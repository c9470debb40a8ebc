"""A Hypothesis state machine that drives an ExecutionStore and the memory model side by side.

Commits (fresh and stale, with emits, processed marks, timer operations, spawns and trace
steps), relays that ack outbox and spawn entries, timer sweeps with guarded deletes, trace reads
and listings: after every step the store under test must agree with
`runyard.memory.executions.MemoryExecutionCore`. Outbox and spawn seqs may differ between
stores (a sharded store numbers them per shard), so entries are matched by their event ids and
child ids, which the machine keeps unique. Backends get it through
`make_execution_machine(factory)`, with `factory(clock, trace_max)` returning a fresh sync store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from runyard._sync.execution_protocol import ExecutionStore
from runyard.clock import ManualClock
from runyard.errors import RunyardError
from runyard.executions.models import Event, Execution, SpawnIntent, TimerOp, TraceStep
from runyard.memory.executions import MemoryExecutionCore

__all__ = ["TRACE_MAX", "make_execution_machine"]

IDS = ("exe-a", "exe-b", "c:{x}*")
PATHS = ("wait", "retry")
TRACE_MAX = 3


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", call()
    except RunyardError as exc:
        return type(exc).__name__, getattr(exc, "found", None)


def _content(exe: Execution | None) -> Any:
    if exe is None:
        return None
    return (exe.id, exe.definition_id, exe.status, exe.version, exe.context, exe.parent_id)


def make_execution_machine(
    factory: Callable[[ManualClock, int], ExecutionStore],
) -> type[RuleBasedStateMachine]:
    """Return a state machine class comparing ``factory``'s store with the memory model."""

    class ExecutionMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.clock = ManualClock()
            self.model = MemoryExecutionCore(self.clock, trace_max=TRACE_MAX)
            self.store = factory(self.clock, TRACE_MAX)
            self.count = 0
            self.source: dict[str, str] = {}  # emitted event id -> the execution that emitted it

        def teardown(self) -> None:
            self.store.close()

        def _next(self, prefix: str) -> str:
            self.count += 1
            return f"{prefix}-{self.count}"

        @rule(
            execution_id=st.sampled_from(IDS),
            stale=st.booleans(),
            emits=st.integers(0, 2),
            mark=st.booleans(),
            timer=st.sampled_from([None, "schedule", "cancel"]),
            path=st.sampled_from(PATHS),
            delay=st.sampled_from([0.0, 5.0, 20.0]),
            spawn=st.booleans(),
            trace=st.booleans(),
            status=st.sampled_from(["running", "done"]),
        )
        def commit(
            self,
            execution_id: str,
            stale: bool,
            emits: int,
            mark: bool,
            timer: str | None,
            path: str,
            delay: float,
            spawn: bool,
            trace: bool,
            status: str,
        ) -> None:
            model_exe = self.model.load(execution_id)
            real_exe = self.store.load(execution_id)
            assert _content(real_exe) == _content(model_exe)
            version = model_exe.version if model_exe else 0
            if stale and version > 0:
                version -= 1
            step = self.count + 1
            args: dict[str, Any] = {
                "emits": [
                    (f"target-{n}", Event(id=self._next("ev"), name="ping", data={"n": n}))
                    for n in range(emits)
                ],
                "processed_event_id": self._next("in") if mark else None,
                "timers": []
                if timer is None
                else [
                    TimerOp.schedule(path, self.clock.now() + delay)
                    if timer == "schedule"
                    else TimerOp.cancel(path)
                ],
                "spawns": [SpawnIntent(child_id=self._next("child"))] if spawn else [],
                "trace": TraceStep(event_name="step", data={"step": step}) if trace else None,
            }
            outcomes = []
            versions = []
            for target in (self.model, self.store):
                exe = Execution(
                    id=execution_id,
                    definition_id="flow",
                    status=status,
                    version=version,
                    context={"step": step},
                    parent_id=None if execution_id != "exe-b" else "exe-a",
                )
                result = _outcome(lambda t=target, e=exe: t.commit(e, **args))  # type: ignore[misc]
                outcomes.append((result[0], len(result[1]) if result[0] == "ok" else result[1]))
                versions.append(exe.version)
            assert outcomes[0] == outcomes[1], ("model vs store", outcomes)
            expected = version + 1 if outcomes[0][0] == "ok" else version
            assert versions == [expected, expected], ("versions after commit", versions)
            if outcomes[0][0] == "ok":
                for _, event in args["emits"]:
                    self.source[event.id] = execution_id

        @rule(limit=st.integers(1, 4), ack=st.integers(0, 3))
        def relay_outbox(self, limit: int, ack: int) -> None:
            model = self.model.pending_outbox(limit=100)
            real = self.store.pending_outbox(limit=100)
            assert sorted((e.target_id, e.event.id) for e in real) == sorted(
                (e.target_id, e.event.id) for e in model
            )
            # A limited page: `limit` distinct pending entries in seq order, and, for each
            # execution, its oldest entries in commit order (a sharded store may interleave
            # executions differently from the model, never one execution's own entries).
            page = self.store.pending_outbox(limit=limit)
            assert len(page) == min(limit, len(model))
            assert len({e.event.id for e in page}) == len(page)
            assert [e.seq for e in page] == sorted(e.seq for e in page)
            assert {e.event.id for e in page} <= {e.event.id for e in model}
            for execution_id in IDS:
                mine = [e.event.id for e in page if self.source[e.event.id] == execution_id]
                oldest = [e.event.id for e in model if self.source[e.event.id] == execution_id]
                assert mine == oldest[: len(mine)], (execution_id, mine, oldest)
            by_event = {e.event.id: e.seq for e in real}
            for entry in model[:ack]:
                assert self.model.ack_outbox(entry.seq)
                assert self.store.ack_outbox(by_event[entry.event.id])

        @rule(ack=st.integers(0, 2))
        def relay_spawns(self, ack: int) -> None:
            model = self.model.pending_spawns(limit=100)
            real = self.store.pending_spawns(limit=100)
            assert sorted((s.parent_id, s.child_id) for s in real) == sorted(
                (s.parent_id, s.child_id) for s in model
            )
            by_child = {s.child_id: s.seq for s in real}
            for entry in model[:ack]:
                assert self.model.ack_spawn(entry.seq)
                assert self.store.ack_spawn(by_child[entry.child_id])

        @rule(seconds=st.sampled_from([1.0, 6.0, 21.0]))
        def tick(self, seconds: float) -> None:
            self.clock.advance(seconds)

        @rule(delete=st.booleans(), skew=st.booleans())
        def sweep_timers(self, delete: bool, skew: bool) -> None:
            now = self.clock.now()
            model = self.model.due_timers(now, limit=100)
            real = self.store.due_timers(now, limit=100)
            assert sorted((t.execution_id, t.path, t.fire_at) for t in real) == sorted(
                (t.execution_id, t.path, t.fire_at) for t in model
            )
            if delete and model:
                first = model[0]
                fire_at = first.fire_at + (1.0 if skew else 0.0)  # a stale sweep must not delete
                assert self.store.delete_timer(first.execution_id, first.path, fire_at) == (
                    self.model.delete_timer(first.execution_id, first.path, fire_at)
                )

        @precondition(lambda self: self.count > 0)
        @rule(execution_id=st.sampled_from(IDS))
        def read_trace(self, execution_id: str) -> None:
            model = self.model.read_trace(execution_id)
            real = self.store.read_trace(execution_id)
            assert [(t.index, t.event_name, t.data) for t in real] == [
                (t.index, t.event_name, t.data) for t in model
            ]

        @rule(
            status=st.sampled_from([None, "done"]),
            roots_only=st.booleans(),
            limit=st.integers(1, 3),
        )
        def list_executions(self, status: str | None, roots_only: bool, limit: int) -> None:
            seen: list[str] = []
            cursor: str | None = None
            for _ in range(20):
                page = self.store.list_executions(
                    status=status,
                    definition_id=None,
                    roots_only=roots_only,
                    limit=limit,
                    cursor=cursor,
                )
                seen.extend(s.id for s in page.items)
                cursor = page.next_cursor
                if cursor is None:
                    break
            expected = self.model.list_executions(
                status=status, definition_id=None, roots_only=roots_only, limit=100, cursor=None
            )
            assert sorted(seen) == sorted(s.id for s in expected.items)

        @invariant()
        def processed_marks_agree(self) -> None:
            for execution_id in IDS:
                for n in range(max(1, self.count - 3), self.count + 1):
                    event_id = f"in-{n}"
                    assert self.store.is_processed(execution_id, event_id) == (
                        self.model.is_processed(execution_id, event_id)
                    )

    return ExecutionMachine
