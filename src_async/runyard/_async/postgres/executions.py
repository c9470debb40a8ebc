"""AsyncPostgresExecutionStore: executions, outbox, spawns, dedupe marks, timers and a trace
ring in PostgreSQL, each commit one statement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runyard._async.postgres._adapter import Source, _AsyncPostgresAdapter
from runyard._async.postgres.retention import AsyncPostgresExecutionRetention
from runyard._json import load_json
from runyard._sql import is_seq
from runyard.capabilities import StoreCapabilities
from runyard.errors import StoreConflict, StoreOutcomeUnknown
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
from runyard.executions.planning import check_seconds, check_trace_max, plan_commit, summarize
from runyard.keys import decode_cursor, encode_cursor, validate_identifier
from runyard.postgres.executions import (
    CommitCall,
    commit_call,
    decode_commit,
    decode_due_timer,
    decode_execution,
    decode_outbox,
    decode_spawn,
    decode_trace,
    is_timer_path,
    trace_text,
)
from runyard.postgres.statements.executions import execution_statements, list_statement_name
from runyard.validation import check_flag, check_limit

__all__ = ["AsyncPostgresExecutionStore"]


class AsyncPostgresExecutionStore(AsyncPostgresExecutionRetention, _AsyncPostgresAdapter):
    """An ExecutionStore in PostgreSQL: one statement (one round trip) per commit.

    A commit's compare-and-swap on the execution row and every write it carries (outbox
    entries, the processed mark, timer operations, spawn intents, the trace step) are one
    statement, so they commit together or not at all; a commit that loses the CAS writes
    nothing. Build it on a psycopg ``AsyncConnectionPool``/``AsyncConnection`` or any executor;
    ``open()`` and ``from_settings()`` also run verify(). ``bound(connection)`` joins the
    caller's transaction, so an execution commit, a run and a work item commit together.
    """

    _kind = "executions"
    capabilities = StoreCapabilities(
        version=1, retry_ids=True, transactional=True, deployment="multi_server"
    )

    def __init__(
        self, source: Source, *, trace_max: int = DEFAULT_TRACE_MAX, **options: Any
    ) -> None:
        super().__init__(source, **options)
        self._trace_max = check_trace_max(trace_max)
        self._sql = execution_statements(self.tables)

    @property
    def trace_max(self) -> int:
        """How many trace steps are kept per execution."""
        return self._trace_max

    def _relations(self) -> Sequence[str]:
        return self.tables.execution_relations()

    # -- executions --------------------------------------------------------------------------
    async def load(self, execution_id: str) -> Execution | None:
        """Return a fresh copy of the execution, or None."""
        validate_identifier(execution_id, "execution_id")
        rows = await self._fetch("exec_load", execution_id)
        return decode_execution(rows[0]) if rows else None

    async def load_for_event(
        self, execution_id: str, event_id: str
    ) -> tuple[Execution | None, bool]:
        """Return the execution (or None) and whether ``event_id`` was already processed,
        read by one statement."""
        validate_identifier(execution_id, "execution_id")
        validate_identifier(event_id, "event_id")
        rows = await self._fetch("exec_load_for_event", execution_id, event_id)
        row = rows[0]
        exe = decode_execution(row[1:]) if row[1] is not None else None
        return exe, bool(row[0])

    async def save(self, exe: Execution) -> None:
        """Write ``exe`` iff the stored version is ``exe.version`` (0 creates it), in one
        statement; bump ``exe.version`` in place.

        Raises StoreConflict(execution_id, expected, found), StatePersistenceError.
        """
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
        """Write ``exe`` and everything it caused in one statement; return the outbox seqs.

        All or nothing: a commit that loses the compare-and-swap writes none of it and raises
        StoreConflict(execution_id, expected, found). Everything is checked before sending.
        Raises StoreConflict, StatePersistenceError, TypeError, ValueError, and
        StoreOutcomeUnknown when the reply was lost after the write may have applied.
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
        expected = plan.execution.version
        call = commit_call(plan, now=self._now(), trace_max=self._trace_max)
        rows, resent = await self._send_commit(call, plan.execution.id, expected)
        written, found, seqs = decode_commit(rows[0])
        if not written:
            if resent:
                # The first send, whose reply was lost, may still have been running when the
                # version was read back and may be the commit that beat this re-send.
                raise StoreOutcomeUnknown(
                    f"commit of {plan.execution.id!r}: the reply was lost and the re-send found "
                    f"version {found}; the first send may have applied: load it and decide"
                )
            if found == expected:
                # A concurrent commit won after this statement's snapshot was taken (the CAS
                # waited for it): read what it wrote.
                found = await self._version(plan.execution.id)
            raise StoreConflict(plan.execution.id, expected, found)
        exe.version = expected + 1
        return seqs

    async def _send_commit(
        self, call: CommitCall, execution_id: str, expected: int
    ) -> tuple[Sequence[Sequence[Any]], bool]:
        """Send the commit; return its rows and whether it was sent a second time."""
        try:
            return await self._fetch(call.name, *call.args, idempotent=False), False
        except StoreOutcomeUnknown:
            if self._bound:
                raise
            # An unchanged version means the lost statement has not applied (yet: it may still
            # be running), and the CAS makes sending it again safe; a re-send that then loses
            # the CAS is an unknown outcome, not a conflict.
            if await self._version(execution_id) != expected:
                raise
            return await self._fetch(call.name, *call.args, idempotent=False), True

    async def _version(self, execution_id: str) -> int:
        rows = await self._fetch("exec_version", execution_id)
        return int(rows[0][0]) if rows else 0

    async def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Return whether a commit of the execution marked ``event_id`` processed."""
        validate_identifier(execution_id, "execution_id")
        validate_identifier(event_id, "event_id")
        rows = await self._fetch("exec_is_processed", execution_id, event_id)
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
        filters: list[Any] = []
        if status is not None:
            filters.append(validate_identifier(status, "status"))
        if definition_id is not None:
            filters.append(validate_identifier(definition_id, "definition_id"))
        after = decode_cursor(cursor)
        name = list_statement_name(status is not None, definition_id is not None, roots_only)
        rows = await self._fetch(name, after, limit + 1, *filters)
        page = rows[:limit]
        items = [summarize(decode_execution(r)) for r in page]
        more = len(rows) > limit
        return ExecutionPage(
            items=items, next_cursor=encode_cursor(int(page[-1][9])) if more else None
        )

    # -- outbox and spawns -------------------------------------------------------------------
    async def pending_outbox(self, limit: int = 100) -> list[OutboxEntry]:
        """Return up to ``limit`` unacknowledged outbox entries, oldest first."""
        check_limit(limit)
        return [decode_outbox(r) for r in await self._fetch("exec_pending_outbox", limit)]

    async def ack_outbox(self, seq: int) -> bool:
        """Remove the outbox entry ``seq``; return whether it was pending."""
        if not is_seq(seq):
            return False
        return bool(await self._fetch("exec_ack_outbox", seq))

    async def pending_spawns(self, limit: int = 100) -> list[SpawnEntry]:
        """Return up to ``limit`` unacknowledged spawn entries, oldest first."""
        check_limit(limit)
        return [decode_spawn(r) for r in await self._fetch("exec_pending_spawns", limit)]

    async def ack_spawn(self, seq: int) -> bool:
        """Remove the spawn entry ``seq``; return whether it was pending."""
        if not is_seq(seq):
            return False
        return bool(await self._fetch("exec_ack_spawn", seq))

    # -- timers ------------------------------------------------------------------------------
    async def due_timers(self, now: float, limit: int = 100) -> list[DueTimer]:
        """Return up to ``limit`` timers due at ``now``, earliest first; they stay until
        deleted."""
        now = check_seconds(now, "now")
        check_limit(limit)
        return [decode_due_timer(r) for r in await self._fetch("exec_due_timers", now, limit)]

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> bool:
        """Delete the timer iff its stored fire time is still ``fire_at``, in one statement."""
        validate_identifier(execution_id, "execution_id")
        fire_at = check_seconds(fire_at, "fire_at")
        if not is_timer_path(path):
            return False
        return bool(await self._fetch("exec_delete_timer", execution_id, path, fire_at))

    # -- trace -------------------------------------------------------------------------------
    async def read_trace(self, execution_id: str) -> list[TraceEntry]:
        """Return the execution's kept trace entries (at most ``trace_max``), oldest first."""
        validate_identifier(execution_id, "execution_id")
        rows = await self._fetch("exec_read_trace", execution_id, self._trace_max)
        return [decode_trace(r) for r in rows]

    async def append_trace(self, execution_id: str, step: TraceStep) -> TraceEntry:
        """Record ``step`` with the execution's next index, in one statement; return it.

        Raises StatePersistenceError for data that is not storable.
        """
        validate_identifier(execution_id, "execution_id")
        data = trace_text(step, self.max_value_bytes)
        now = self._now()
        rows = await self._fetch(
            "exec_append_trace",
            execution_id,
            now,
            step.event_id,
            step.event_name,
            data,
            self._trace_max,
            idempotent=False,
        )
        return TraceEntry(
            index=int(rows[0][0]),
            recorded_at=now,
            event_id=step.event_id,
            event_name=step.event_name,
            data=load_json(data),
        )
