"""Commit planning and the checks every execution store runs before it writes (no I/O).

``plan_commit`` checks and copies everything a commit carries, so a refused commit is refused
before anything is sent; ``summarize``/``summary_matches`` back every backend's listing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError

from runyard._json import copy_json, dump_json
from runyard.errors import InvalidArgumentError
from runyard.executions.models import (
    MAX_TRACE_MAX,
    Emit,
    Event,
    Execution,
    ExecutionSummary,
    SpawnIntent,
    TimerOp,
    TraceStep,
)
from runyard.keys import validate_identifier
from runyard.validation import DEFAULT_MAX_VALUE_BYTES

__all__ = [
    "CommitPlan",
    "check_seconds",
    "check_trace_max",
    "checked_step",
    "expect_type",
    "is_timer_path",
    "plan_commit",
    "revalidate",
    "summarize",
    "summary_matches",
    "trace_data",
]


def check_trace_max(trace_max: int) -> int:
    """Return ``trace_max`` if it is an int from 1 to MAX_TRACE_MAX; else raise
    InvalidArgumentError (a ValueError) naming it. Unbounded, a huge one failed every Redis
    commit half way (LTRIM refused it, after the outbox was written)."""
    if (
        not isinstance(trace_max, int)
        or isinstance(trace_max, bool)
        or not 1 <= trace_max <= MAX_TRACE_MAX
    ):
        raise InvalidArgumentError(
            f"trace_max must be an int from 1 to {MAX_TRACE_MAX}, not {trace_max!r}",
            argument="trace_max",
            limit=f"an int from 1 to {MAX_TRACE_MAX}",
        )
    return trace_max


def revalidate(model: BaseModel, json_field: str | None = None) -> None:
    """Validate ``model``'s fields again, as its constructor does (raising what it raises):
    ``model_construct`` and ``model_copy(update=...)`` skip validation, and such values reached
    the stores (a NaN timer, a NUL in a status, a version past a bigint), each backend doing
    something else with them. The JSON field (copied and checked by copy_json) is left out."""
    kind = type(model)
    # Through the constructor, not model_validate: it raises InvalidIdentifierError (a
    # RunyardError) for a bad identifier, as building the model would have.
    kind(**{name: getattr(model, name) for name in kind.model_fields if name != json_field})


def is_timer_path(path: object) -> bool:
    """Whether ``path`` could name a stored timer (any other value names none).

    Every backend's ``delete_timer`` returns False for a path that fails this check.
    """
    try:
        TimerOp.cancel(path)  # type: ignore[arg-type]
    except (ValidationError, TypeError, ValueError):
        return False
    return True


def check_seconds(value: float, what: str) -> float:
    """Return ``value`` as a float if it is a finite number; else raise InvalidArgumentError
    (a ValueError) naming ``what`` (an int past a float's range raised OverflowError)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:
            seconds = math.inf
        if math.isfinite(seconds):
            return seconds
    if isinstance(value, int) and value.bit_length() > 64:  # its repr may be 5,000 digits
        shown = f"an int of {value.bit_length()} bits"
    else:
        shown = repr(value)[:100]
    raise InvalidArgumentError(
        f"{what} must be a finite number of seconds, not {shown}",
        argument=what,
        limit="a finite number of seconds",
    )


def expect_type(value: object, kind: type, what: str) -> None:
    if not isinstance(value, kind):
        raise TypeError(f"{what} must be a {kind.__name__}, not {type(value).__name__}")


@dataclass(frozen=True)
class CommitPlan:
    """A checked commit: every value copied through strict JSON, nothing written yet."""

    execution: Execution
    emits: tuple[Emit, ...]
    processed_event_id: str | None
    timers: tuple[TimerOp, ...]
    spawns: tuple[SpawnIntent, ...]
    trace: TraceStep | None


def plan_commit(
    exe: Execution,
    *,
    emits: Sequence[Emit] = (),
    processed_event_id: str | None = None,
    timers: Sequence[TimerOp] = (),
    spawns: Sequence[SpawnIntent] = (),
    trace: TraceStep | None = None,
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
) -> CommitPlan:
    """Check and copy what one commit writes; the caller's objects are never aliased.

    Raises TypeError for an element of the wrong type, InvalidIdentifierError for a bad
    target or event id, ValueError for a child that is its own parent, and
    StatePersistenceError for a context or data that is not storable JSON or is too large.
    """
    expect_type(exe, Execution, "exe")
    revalidate(exe, "context")
    context = copy_json(exe.context, max_value_bytes, f"context of execution {exe.id!r}")
    snapshot = exe.model_copy(update={"context": context})
    checked_emits: list[Emit] = []
    for emit in emits:
        if not isinstance(emit, tuple) or len(emit) != 2:
            raise TypeError(f"each emit must be a (target_id, Event) pair, not {emit!r}")
        target_id, event = emit
        validate_identifier(target_id, "target_id")
        expect_type(event, Event, "an emitted event")
        revalidate(event, "data")
        data = copy_json(event.data, max_value_bytes, f"data of event {event.id!r}")
        checked_emits.append((target_id, event.model_copy(update={"data": data})))
    if processed_event_id is not None:
        validate_identifier(processed_event_id, "processed_event_id")
    for op in timers:
        expect_type(op, TimerOp, "each timer op")
        revalidate(op)
    checked_spawns: list[SpawnIntent] = []
    for spawn in spawns:
        expect_type(spawn, SpawnIntent, "each spawn")
        revalidate(spawn, "context")
        if spawn.child_id == exe.id:
            raise ValueError(f"execution {exe.id!r} cannot spawn itself")
        child_context = copy_json(
            spawn.context, max_value_bytes, f"context of child {spawn.child_id!r}"
        )
        checked_spawns.append(spawn.model_copy(update={"context": child_context}))
    checked_trace = None if trace is None else checked_step(trace, max_value_bytes)
    return CommitPlan(
        execution=snapshot,
        emits=tuple(checked_emits),
        processed_event_id=processed_event_id,
        timers=tuple(timers),
        spawns=tuple(checked_spawns),
        trace=checked_trace,
    )


def trace_data(step: TraceStep, max_value_bytes: int) -> str:
    """An ``append_trace`` step's data as JSON text, the step checked as a commit's trace is
    (every backend: one had checked the type only, and Redis the size of its own wrapper).
    Raises TypeError, InvalidIdentifierError, StatePersistenceError."""
    expect_type(step, TraceStep, "a trace step")
    revalidate(step, "data")
    return dump_json(step.data, max_bytes=max_value_bytes, what="trace data")


def checked_step(step: TraceStep, max_value_bytes: int) -> TraceStep:
    expect_type(step, TraceStep, "a trace step")
    revalidate(step, "data")
    return step.model_copy(update={"data": copy_json(step.data, max_value_bytes, "trace data")})


def summarize(exe: Execution) -> ExecutionSummary:
    """Return the listing view of a stored execution (which carries both timestamps)."""
    assert exe.created_at is not None and exe.updated_at is not None
    return ExecutionSummary(
        id=exe.id,
        definition_id=exe.definition_id,
        status=exe.status,
        version=exe.version,
        parent_id=exe.parent_id,
        root_path=exe.root_path,
        created_at=exe.created_at,
        updated_at=exe.updated_at,
    )


def summary_matches(
    exe: Execution | ExecutionSummary,
    status: str | None,
    definition_id: str | None,
    roots_only: bool,
) -> bool:
    """Whether an execution passes list_executions' filters (every backend filters alike)."""
    return (
        (status is None or exe.status == status)
        and (definition_id is None or exe.definition_id == definition_id)
        and not (roots_only and exe.parent_id is not None)
    )
