"""AsyncMemoryExecutionStore: the reference ExecutionStore, in this process."""

from __future__ import annotations

from collections.abc import Sequence

from runyard._async.closing import AsyncClosing
from runyard._flavours import AsyncLock
from runyard.capabilities import StoreCapabilities
from runyard.clock import Clock, SystemClock
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
from runyard.memory.executions import MemoryExecutionCore
from runyard.validation import DEFAULT_MAX_VALUE_BYTES, check_flag

__all__ = ["AsyncMemoryExecutionStore"]


class AsyncMemoryExecutionStore(AsyncClosing):
    """An ExecutionStore held in this process's memory; safe to share between tasks (or
    threads, in the sync twin). Nothing survives the process."""

    capabilities = StoreCapabilities(version=1, retry_ids=True, deployment="single_process")

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        trace_max: int = DEFAULT_TRACE_MAX,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    ) -> None:
        self._core = MemoryExecutionCore(
            clock or SystemClock(), trace_max=trace_max, max_value_bytes=max_value_bytes
        )
        self._lock = AsyncLock()

    @property
    def trace_max(self) -> int:
        """How many trace steps are kept per execution."""
        return self._core.trace_max

    def __repr__(self) -> str:
        return f"{type(self).__name__}(trace_max={self.trace_max}, clock={self._core.clock!r})"

    async def load(self, execution_id: str) -> Execution | None:
        """Return a fresh copy of the execution, or None."""
        async with self._lock:
            return self._core.load(execution_id)

    async def load_for_event(
        self, execution_id: str, event_id: str
    ) -> tuple[Execution | None, bool]:
        """Return the execution (or None) and whether ``event_id`` was already processed."""
        async with self._lock:
            return self._core.load_for_event(execution_id, event_id)

    async def save(self, exe: Execution) -> None:
        """Write ``exe`` iff the stored version is ``exe.version``; bump it in place.

        Raises StoreConflict, StatePersistenceError.
        """
        async with self._lock:
            self._core.commit(exe)

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
        """Write ``exe`` and everything it caused atomically; return the outbox seqs.

        Raises StoreConflict, StatePersistenceError, TypeError, ValueError.
        """
        async with self._lock:
            return self._core.commit(
                exe,
                emits=emits,
                processed_event_id=processed_event_id,
                timers=timers,
                spawns=spawns,
                trace=trace,
            )

    async def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Return whether a commit of the execution marked ``event_id`` processed."""
        async with self._lock:
            return self._core.is_processed(execution_id, event_id)

    async def prune_processed(self, *, older_than: float, limit: int = 100) -> int:
        """Delete up to ``limit`` processed marks recorded at least ``older_than`` seconds ago,
        oldest first; return how many. Raises InvalidArgumentError."""
        async with self._lock:
            return self._core.prune_processed(older_than, limit)

    async def pending_outbox(self, limit: int = 100) -> list[OutboxEntry]:
        """Return up to ``limit`` unacknowledged outbox entries, oldest first."""
        async with self._lock:
            return self._core.pending_outbox(limit)

    async def ack_outbox(self, seq: int) -> bool:
        """Remove the outbox entry ``seq``; return whether it was pending."""
        async with self._lock:
            return self._core.ack_outbox(seq)

    async def pending_spawns(self, limit: int = 100) -> list[SpawnEntry]:
        """Return up to ``limit`` unacknowledged spawn entries, oldest first."""
        async with self._lock:
            return self._core.pending_spawns(limit)

    async def ack_spawn(self, seq: int) -> bool:
        """Remove the spawn entry ``seq``; return whether it was pending."""
        async with self._lock:
            return self._core.ack_spawn(seq)

    async def due_timers(self, now: float, limit: int = 100) -> list[DueTimer]:
        """Return up to ``limit`` timers due at ``now``, earliest first."""
        async with self._lock:
            return self._core.due_timers(now, limit)

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> bool:
        """Delete the timer iff its stored fire time is still ``fire_at``."""
        async with self._lock:
            return self._core.delete_timer(execution_id, path, fire_at)

    async def read_trace(self, execution_id: str) -> list[TraceEntry]:
        """Return the execution's kept trace entries, oldest first."""
        async with self._lock:
            return self._core.read_trace(execution_id)

    async def append_trace(self, execution_id: str, step: TraceStep) -> TraceEntry:
        """Record ``step`` with the execution's next index. Raises StatePersistenceError."""
        async with self._lock:
            return self._core.append_trace(execution_id, step)

    async def list_executions(
        self,
        *,
        status: str | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """Return a page of matching executions in creation order."""
        check_flag(roots_only, "roots_only")
        async with self._lock:
            return self._core.list_executions(
                status=status,
                definition_id=definition_id,
                roots_only=roots_only,
                limit=limit,
                cursor=cursor,
            )

    async def aclose(self) -> None:
        """Nothing to release; present for the protocol."""
