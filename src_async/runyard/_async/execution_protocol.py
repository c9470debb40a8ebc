"""The AsyncExecutionStore protocol: the persistence seam of a statechart or workflow engine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from runyard.capabilities import StoreCapabilities
from runyard.executions.models import (
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

__all__ = ["AsyncExecutionStore"]


@runtime_checkable
class AsyncExecutionStore(Protocol):
    """Executions under compare-and-swap, and one atomic commit per handled event."""

    capabilities: StoreCapabilities

    @property
    def trace_max(self) -> int:
        """How many trace steps the store keeps per execution."""
        ...

    async def load(self, execution_id: str) -> Execution | None:
        """Return a fresh copy of the execution, or None."""
        ...

    async def load_for_event(
        self, execution_id: str, event_id: str
    ) -> tuple[Execution | None, bool]:
        """Return the execution (or None) and whether ``event_id`` was already processed by it,
        read together in one round trip."""
        ...

    async def save(self, exe: Execution) -> None:
        """Write ``exe`` iff the stored version is ``exe.version`` (0 creates it).

        On success ``exe.version`` is bumped in place; on failure it is left as it was.
        Raises StoreConflict(execution_id, expected, found), StatePersistenceError.
        """
        ...

    async def commit(
        self,
        exe: Execution,
        *,
        emits: Sequence[Emit] = (),
        processed_event_id: str | None = None,
        timers: Sequence[TimerOp] = (),
        spawns: Sequence[SpawnIntent] = (),
        trace: TraceStep | None = None,
    ) -> list[int]:
        """Write ``exe`` as ``save`` does and, in the same atomic step, everything it caused.

        ``emits`` are ``(target_id, Event)`` pairs appended to the outbox; ``processed_event_id``
        is marked processed for ``exe``; ``timers`` are applied in order; ``spawns`` are
        recorded as spawn entries with ``exe`` as parent; ``trace`` is recorded with the next
        index. All or nothing: a commit that loses the compare-and-swap writes none of it.
        Returns the outbox seqs of ``emits``, in order.
        Raises StoreConflict, StatePersistenceError, TypeError, ValueError, and (networked
        stores) StoreOutcomeUnknown when a lost reply leaves it unknown whether it applied.
        """
        ...

    async def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Return whether a commit of the execution marked ``event_id`` processed."""
        ...

    async def prune_processed(self, *, older_than: float, limit: int = 100) -> int:
        """Delete up to ``limit`` processed-event marks recorded at least ``older_than``
        seconds ago (by the store's clock), oldest first; return how many were deleted.

        Afterwards ``is_processed`` is False for them: a redelivery older than the retention
        is processed again. Each call does bounded work. Raises InvalidArgumentError for a
        bad ``older_than`` or ``limit``.
        """
        ...

    async def pending_outbox(self, limit: int = 100) -> list[OutboxEntry]:
        """Return up to ``limit`` unacknowledged outbox entries, oldest first: one execution's
        in commit order; across executions a sharded store orders by commit time at millisecond
        resolution (entries of the same millisecond in different shards come shard by shard)."""
        ...

    async def ack_outbox(self, seq: int) -> bool:
        """Remove the outbox entry ``seq``; return whether it was pending."""
        ...

    async def pending_spawns(self, limit: int = 100) -> list[SpawnEntry]:
        """Return up to ``limit`` unacknowledged spawn entries, oldest first (in the same
        sense as ``pending_outbox``)."""
        ...

    async def ack_spawn(self, seq: int) -> bool:
        """Remove the spawn entry ``seq``; return whether it was pending."""
        ...

    async def due_timers(self, now: float, limit: int = 100) -> list[DueTimer]:
        """Return up to ``limit`` timers whose fire time is at or before ``now``, earliest
        first. They stay scheduled until deleted."""
        ...

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> bool:
        """Delete the timer iff its stored fire time is still ``fire_at``; return whether it
        was deleted (a timer re-scheduled since it was read survives). A ``path`` that cannot
        name a timer names none: False."""
        ...

    async def read_trace(self, execution_id: str) -> list[TraceEntry]:
        """Return the execution's kept trace entries (at most ``trace_max``), oldest first."""
        ...

    async def append_trace(self, execution_id: str, step: TraceStep) -> TraceEntry:
        """Record ``step`` outside a commit with the execution's next index; return the entry.

        Raises StatePersistenceError for data that is not storable.
        """
        ...

    async def list_executions(
        self,
        *,
        status: str | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """Return a page of executions matching every filter given; ``roots_only`` keeps those
        with no parent. A page may be short, even empty: keep paging while ``next_cursor`` is
        set. Every execution that exists throughout the walk is returned exactly once."""
        ...

    async def aclose(self) -> None:
        """Release the store's resources."""
        ...
