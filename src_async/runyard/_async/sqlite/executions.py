"""AsyncSqliteStore: executions, outbox, spawns, dedupe marks, timers and a trace ring in a
SQLite file, each commit one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runyard._async.sqlite._adapter import _AsyncSqliteAdapter
from runyard._async.sqlite.retention import AsyncSqliteExecutionRetention
from runyard._json import dump_json
from runyard._sql import is_seq
from runyard.capabilities import StoreCapabilities
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
    is_timer_path,
    plan_commit,
    summarize,
    trace_data,
)
from runyard.keys import decode_cursor, encode_cursor, validate_identifier
from runyard.sqlite.execution_transactions import commit_body, trace_body
from runyard.sqlite.rows import (
    decode_due_timer,
    decode_execution,
    decode_outbox,
    decode_spawn,
    decode_trace,
)
from runyard.sqlite.statements_executions import execution_statements, list_statement
from runyard.validation import check_flag, check_limit

__all__ = ["AsyncSqliteStore"]


class AsyncSqliteStore(AsyncSqliteExecutionRetention, _AsyncSqliteAdapter):
    """An ExecutionStore in a SQLite file: one ``BEGIN IMMEDIATE`` transaction per commit.

    A commit's compare-and-swap on the execution row and every write it carries (outbox
    entries, the processed mark, timer operations, spawn intents, the trace step) commit
    together or not at all; a commit that loses the CAS writes nothing.
    """

    _kind = "executions"
    capabilities = StoreCapabilities(version=1, retry_ids=True, deployment="single_host")

    def __init__(self, *args: Any, trace_max: int = DEFAULT_TRACE_MAX, **kwargs: Any) -> None:
        self._trace_max = check_trace_max(trace_max)
        super().__init__(*args, **kwargs)
        self._sql = execution_statements(self.tables)

    @property
    def trace_max(self) -> int:
        """How many trace steps are kept per execution."""
        return self._trace_max

    # -- executions --------------------------------------------------------------------------
    async def load(self, execution_id: str) -> Execution | None:
        """Return a fresh copy of the execution, or None."""
        validate_identifier(execution_id, "execution_id")
        async with self._read() as tx:
            rows = await tx.fetch("load", execution_id=execution_id)
        return decode_execution(rows[0]) if rows else None

    async def load_for_event(
        self, execution_id: str, event_id: str
    ) -> tuple[Execution | None, bool]:
        """Return the execution (or None) and whether ``event_id`` was already processed,
        read by one statement."""
        validate_identifier(execution_id, "execution_id")
        validate_identifier(event_id, "event_id")
        async with self._read() as tx:
            rows = await tx.fetch("load_for_event", execution_id=execution_id, event_id=event_id)
        row = rows[0]
        return (decode_execution(row[1:]) if row[1] is not None else None), bool(row[0])

    async def save(self, exe: Execution) -> None:
        """Write ``exe`` iff the stored version is ``exe.version`` (0 creates it); bump
        ``exe.version`` in place. Raises StoreConflict, StatePersistenceError."""
        await self.commit(exe)

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
        """Write ``exe`` and everything it caused in one transaction; return the outbox seqs.

        All or nothing: a commit that loses the compare-and-swap writes none of it and raises
        StoreConflict(execution_id, expected, found). Everything is checked before writing.
        Raises StoreConflict, StatePersistenceError, TypeError, ValueError.
        """
        plan = plan_commit(
            exe,
            emits=emits,
            processed_event_id=processed_event_id,
            timers=timers,
            spawns=spawns,
            trace=trace,
            max_value_bytes=self.max_value_bytes,
        )
        context = dump_json(plan.execution.context)
        seqs = await self._transact(
            commit_body, self._sql, self._now(), plan, context, self._trace_max
        )
        exe.version = plan.execution.version + 1
        return seqs

    async def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Return whether a commit of the execution marked ``event_id`` processed."""
        validate_identifier(execution_id, "execution_id")
        validate_identifier(event_id, "event_id")
        async with self._read() as tx:
            rows = await tx.fetch("is_processed", execution_id=execution_id, event_id=event_id)
        return bool(rows[0][0])

    async def list_executions(
        self,
        *,
        status: str | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """Return a page of matching executions in creation order (by ``seq``)."""
        check_flag(roots_only, "roots_only")
        check_limit(limit)
        if status is not None:
            validate_identifier(status, "status")
        if definition_id is not None:
            validate_identifier(definition_id, "definition_id")
        after = decode_cursor(cursor)
        name = list_statement(status is not None, definition_id is not None, roots_only)
        params: dict[str, Any] = {"after": after, "limit": limit + 1}
        if status is not None:
            params["status"] = status
        if definition_id is not None:
            params["definition_id"] = definition_id
        async with self._read() as tx:
            rows = await tx.fetch(name, **params)
        page = rows[:limit]
        more = len(rows) > limit
        return ExecutionPage(
            items=[summarize(decode_execution(r)) for r in page],
            next_cursor=encode_cursor(int(page[-1][9])) if more else None,
        )

    # -- outbox and spawns -------------------------------------------------------------------
    async def pending_outbox(self, limit: int = 100) -> list[OutboxEntry]:
        """Return up to ``limit`` unacknowledged outbox entries, oldest first."""
        check_limit(limit)
        async with self._read() as tx:
            rows = await tx.fetch("pending_outbox", limit=limit)
        return [decode_outbox(r) for r in rows]

    async def ack_outbox(self, seq: int) -> bool:
        """Remove the outbox entry ``seq``; return whether it was pending."""
        if not is_seq(seq):
            return False
        async with self._write() as tx:
            return bool(await tx.fetch("ack_outbox", seq=seq))

    async def pending_spawns(self, limit: int = 100) -> list[SpawnEntry]:
        """Return up to ``limit`` unacknowledged spawn entries, oldest first."""
        check_limit(limit)
        async with self._read() as tx:
            rows = await tx.fetch("pending_spawns", limit=limit)
        return [decode_spawn(r) for r in rows]

    async def ack_spawn(self, seq: int) -> bool:
        """Remove the spawn entry ``seq``; return whether it was pending."""
        if not is_seq(seq):
            return False
        async with self._write() as tx:
            return bool(await tx.fetch("ack_spawn", seq=seq))

    # -- timers ------------------------------------------------------------------------------
    async def due_timers(self, now: float, limit: int = 100) -> list[DueTimer]:
        """Return up to ``limit`` timers due at ``now``, earliest first; they stay until
        deleted."""
        now = check_seconds(now, "now")
        check_limit(limit)
        async with self._read() as tx:
            rows = await tx.fetch("due_timers", now=now, limit=limit)
        return [decode_due_timer(r) for r in rows]

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> bool:
        """Delete the timer iff its stored fire time is still ``fire_at``."""
        validate_identifier(execution_id, "execution_id")
        fire_at = check_seconds(fire_at, "fire_at")
        if not is_timer_path(path):
            return False
        async with self._write() as tx:
            rows = await tx.fetch(
                "delete_timer", execution_id=execution_id, path=path, fire_at=fire_at
            )
        return bool(rows)

    # -- trace -------------------------------------------------------------------------------
    async def read_trace(self, execution_id: str) -> list[TraceEntry]:
        """Return the execution's kept trace entries (at most ``trace_max``), oldest first."""
        validate_identifier(execution_id, "execution_id")
        async with self._read() as tx:
            rows = await tx.fetch(
                "read_trace", execution_id=execution_id, trace_max=self._trace_max
            )
        return [decode_trace(r) for r in rows]

    async def append_trace(self, execution_id: str, step: TraceStep) -> TraceEntry:
        """Record ``step`` with the execution's next index, in one transaction; return it.

        Raises TypeError, StatePersistenceError for data that is not storable.
        """
        validate_identifier(execution_id, "execution_id")
        data = trace_data(step, self.max_value_bytes)
        return await self._transact(
            trace_body, self._sql, self._now(), execution_id, step, data, self._trace_max
        )
