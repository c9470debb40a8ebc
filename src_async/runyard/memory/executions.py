"""The memory execution core: the reference semantics, pure and single-threaded.

The twins wrap it in their lock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

from runyard._sql import is_seq
from runyard.clock import Clock
from runyard.errors import StoreConflict
from runyard.executions.models import (
    DEFAULT_TRACE_MAX,
    DueTimer,
    Emit,
    Execution,
    ExecutionPage,
    OutboxEntry,
    SpawnEntry,
    SpawnIntent,
    TimerOp,
    TraceEntry,
    TraceStep,
)
from runyard.executions.planning import (
    check_seconds,
    check_trace_max,
    checked_step,
    is_timer_path,
    plan_commit,
    summarize,
    summary_matches,
)
from runyard.keys import decode_cursor, encode_cursor, validate_identifier
from runyard.memory._copies import fresh_model
from runyard.validation import DEFAULT_MAX_VALUE_BYTES, check_limit, check_older_than

__all__ = ["MemoryExecutionCore"]


@dataclass
class _Stored:
    execution: Execution
    seq: int  # creation order: the listing cursor


class MemoryExecutionCore:
    """Executions, outbox, spawns, processed marks, timers and trace rings in dictionaries."""

    def __init__(
        self,
        clock: Clock,
        *,
        trace_max: int = DEFAULT_TRACE_MAX,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    ) -> None:
        self.clock = clock
        self.trace_max = check_trace_max(trace_max)
        self.max_value_bytes = max_value_bytes
        self._executions: dict[str, _Stored] = {}
        # (execution_id, event_id) -> when it was marked; insertion order is marking order
        self._processed: dict[tuple[str, str], float] = {}
        self._outbox: dict[int, OutboxEntry] = {}  # insertion order is seq order
        self._spawns: dict[int, SpawnEntry] = {}
        self._timers: dict[tuple[str, str], float] = {}
        self._traces: dict[str, deque[TraceEntry]] = {}
        self._trace_counts: dict[str, int] = {}
        self._created = 0
        self._outbox_seq = 0
        self._spawn_seq = 0

    # -- executions --------------------------------------------------------------------------
    def load(self, execution_id: str) -> Execution | None:
        validate_identifier(execution_id, "execution_id")
        stored = self._executions.get(execution_id)
        return None if stored is None else fresh_model(stored.execution)

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        exe = self.load(execution_id)
        return exe, self.is_processed(execution_id, event_id)

    def is_processed(self, execution_id: str, event_id: str) -> bool:
        validate_identifier(execution_id, "execution_id")
        validate_identifier(event_id, "event_id")
        return (execution_id, event_id) in self._processed

    def prune_processed(self, older_than: float, limit: int) -> int:
        older_than = check_older_than(older_than)
        check_limit(limit)
        cutoff = self.clock.now() - older_than
        doomed: list[tuple[str, str]] = []
        # Oldest first: marking order, which is time order on a clock that never goes back.
        for mark, marked_at in self._processed.items():
            if marked_at > cutoff or len(doomed) == limit:
                break
            doomed.append(mark)
        for mark in doomed:
            del self._processed[mark]
        return len(doomed)

    def commit(
        self,
        exe: Execution,
        *,
        emits: Sequence[Emit] = (),
        processed_event_id: str | None = None,
        timers: Sequence[TimerOp] = (),
        spawns: Sequence[SpawnIntent] = (),
        trace: TraceStep | None = None,
    ) -> list[int]:
        # Everything that can refuse the commit runs before the first write: all or nothing.
        plan = plan_commit(
            exe,
            emits=emits,
            processed_event_id=processed_event_id,
            timers=timers,
            spawns=spawns,
            trace=trace,
            max_value_bytes=self.max_value_bytes,
        )
        snapshot = plan.execution
        stored = self._executions.get(snapshot.id)
        found = stored.execution.version if stored is not None else 0
        if snapshot.version != found:
            raise StoreConflict(snapshot.id, snapshot.version, found)
        now = self.clock.now()
        if stored is None:
            self._created += 1
            stored = self._executions[snapshot.id] = _Stored(snapshot, self._created)
        created_at = stored.execution.created_at if found else now
        stored.execution = snapshot.model_copy(
            update={"version": found + 1, "created_at": created_at, "updated_at": now}
        )
        seqs = []
        for target_id, event in plan.emits:
            self._outbox_seq += 1
            self._outbox[self._outbox_seq] = OutboxEntry(
                seq=self._outbox_seq, target_id=target_id, event=event
            )
            seqs.append(self._outbox_seq)
        if plan.processed_event_id is not None:
            self._processed.setdefault((snapshot.id, plan.processed_event_id), now)
        for op in plan.timers:
            if op.action == "schedule":
                assert op.fire_at is not None
                self._timers[(snapshot.id, op.path)] = op.fire_at
            else:
                self._timers.pop((snapshot.id, op.path), None)
        for spawn in plan.spawns:
            self._spawn_seq += 1
            self._spawns[self._spawn_seq] = SpawnEntry(
                seq=self._spawn_seq,
                parent_id=snapshot.id,
                child_id=spawn.child_id,
                root_path=spawn.root_path,
                context=spawn.context,
            )
        if plan.trace is not None:
            self._record_trace(snapshot.id, plan.trace, now)
        exe.version = found + 1
        return seqs

    def list_executions(
        self,
        *,
        status: str | None,
        definition_id: str | None,
        roots_only: bool,
        limit: int,
        cursor: str | None,
    ) -> ExecutionPage:
        check_limit(limit)
        if status is not None:
            validate_identifier(status, "status")
        if definition_id is not None:
            validate_identifier(definition_id, "definition_id")
        after = decode_cursor(cursor)
        matching = sorted(
            (
                s
                for s in self._executions.values()
                if s.seq > after and summary_matches(s.execution, status, definition_id, roots_only)
            ),
            key=lambda s: s.seq,
        )
        page = matching[:limit]
        more = len(matching) > limit
        return ExecutionPage(
            items=[summarize(s.execution) for s in page],
            next_cursor=encode_cursor(page[-1].seq) if more else None,
        )

    # -- outbox and spawns -------------------------------------------------------------------
    def pending_outbox(self, limit: int) -> list[OutboxEntry]:
        check_limit(limit)
        return [fresh_model(e) for e in islice(self._outbox.values(), limit)]

    def ack_outbox(self, seq: int) -> bool:
        # is_seq as the other backends: True or 1.0 would pop seq 1 (equal dict keys).
        return is_seq(seq) and self._outbox.pop(seq, None) is not None

    def pending_spawns(self, limit: int) -> list[SpawnEntry]:
        check_limit(limit)
        return [fresh_model(e) for e in islice(self._spawns.values(), limit)]

    def ack_spawn(self, seq: int) -> bool:
        return is_seq(seq) and self._spawns.pop(seq, None) is not None

    # -- timers ------------------------------------------------------------------------------
    def due_timers(self, now: float, limit: int) -> list[DueTimer]:
        now = check_seconds(now, "now")
        check_limit(limit)
        due = sorted(
            (fire_at, execution_id, path)
            for (execution_id, path), fire_at in self._timers.items()
            if fire_at <= now
        )
        return [DueTimer(execution_id=e, path=p, fire_at=f) for f, e, p in due[:limit]]

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> bool:
        validate_identifier(execution_id, "execution_id")
        fire_at = check_seconds(fire_at, "fire_at")
        if not is_timer_path(path):
            return False
        key = (execution_id, path)
        if self._timers.get(key) != fire_at:
            return False
        del self._timers[key]
        return True

    # -- trace -------------------------------------------------------------------------------
    def read_trace(self, execution_id: str) -> list[TraceEntry]:
        validate_identifier(execution_id, "execution_id")
        return [fresh_model(e) for e in self._traces.get(execution_id, ())]

    def append_trace(self, execution_id: str, step: TraceStep) -> TraceEntry:
        validate_identifier(execution_id, "execution_id")
        checked = checked_step(step, self.max_value_bytes)
        return fresh_model(self._record_trace(execution_id, checked, self.clock.now()))

    def _record_trace(self, execution_id: str, step: TraceStep, now: float) -> TraceEntry:
        index = self._trace_counts.get(execution_id, 0) + 1
        self._trace_counts[execution_id] = index
        entry = TraceEntry(
            index=index,
            recorded_at=now,
            event_id=step.event_id,
            event_name=step.event_name,
            data=step.data,
        )
        ring = self._traces.get(execution_id)
        if ring is None:
            ring = self._traces[execution_id] = deque(maxlen=self.trace_max)
        ring.append(entry)
        return entry
