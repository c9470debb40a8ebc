"""The records an ExecutionStore reads and writes, shared by every backend and both twins."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from typing_extensions import Self

from runyard.keys import InvalidIdentifierError, validate_identifier

__all__ = [
    "DEFAULT_TRACE_MAX",
    "MAX_PATH_BYTES",
    "MAX_TRACE_MAX",
    "MAX_VERSION",
    "DueTimer",
    "Emit",
    "Event",
    "Execution",
    "ExecutionPage",
    "ExecutionSummary",
    "OutboxEntry",
    "SpawnEntry",
    "SpawnIntent",
    "TimerAction",
    "TimerOp",
    "TraceEntry",
    "TraceStep",
]

DEFAULT_TRACE_MAX = 200
# The most trace steps a store may be told to keep per execution (trace_max=).
MAX_TRACE_MAX = 1_000_000
# An execution's version is a bigint in the SQL stores.
MAX_VERSION = 2**63 - 1
"""How many trace steps a store keeps per execution unless told otherwise."""

MAX_PATH_BYTES = 1024
"""The longest state path (``root_path``, a timer's ``path``) in UTF-8 bytes."""

TimerAction = Literal["schedule", "cancel"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


def _identifier_refusal(exc: ValidationError) -> InvalidIdentifierError | None:
    for error in exc.errors(include_url=False):
        cause = error.get("ctx", {}).get("error")
        if isinstance(cause, InvalidIdentifierError):
            return cause
    return None


class _IdentifiedModel(BaseModel):
    """A model whose bad identifiers raise InvalidIdentifierError naming the field, as
    ``RunKey`` and the stores do; any other bad field raises pydantic's ValidationError."""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            refusal = _identifier_refusal(exc)
            if refusal is None:
                raise
            raise refusal from None

    def __setattr__(self, name: str, value: Any) -> None:
        try:
            super().__setattr__(name, value)
        except ValidationError as exc:
            refusal = _identifier_refusal(exc)
            if refusal is None:
                raise
            raise refusal from None


def _identifier(value: object, what: str) -> str:
    return validate_identifier(value, what)


def _optional_identifier(value: object, what: str) -> str | None:
    return None if value is None else validate_identifier(value, what)


def _path(value: object, what: str, *, allow_root: bool) -> str:
    """Return ``value`` if it is a usable state path; ``""`` (the root) only when allowed."""
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a str, not {type(value).__name__}")
    if value == "":
        if allow_root:
            return value
        raise ValueError(f"{what} must not be empty")
    if "\x00" in value:
        raise ValueError(f"{what} must not contain NUL")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(f"{what} is not valid UTF-8 text") from None
    if size > MAX_PATH_BYTES:
        raise ValueError(f"{what} is {size} bytes; the limit is {MAX_PATH_BYTES} bytes of UTF-8")
    return value


def _finite(value: float, what: str) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number of seconds, not {value!r}")
    return value


class Execution(_IdentifiedModel):
    """One execution of a definition: its status, context and the version CAS checks.

    Mutable on purpose: ``save`` and ``commit`` bump ``version`` in place on success and leave
    it untouched on failure. ``created_at``/``updated_at`` are stamped by the store and are
    None on an execution that was never loaded; the store ignores what the caller sets there.
    ``root_path`` is the state path the execution's chart is rooted at (``""``: the whole
    definition); ``parent_id`` names the execution that spawned it (None for a root).
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    id: str
    definition_id: str
    status: str = "running"
    version: int = Field(default=0, ge=0, le=MAX_VERSION)
    context: dict[str, Any] = Field(default_factory=dict)
    parent_id: str | None = None
    root_path: str = ""
    created_at: float | None = None
    updated_at: float | None = None

    @field_validator("id", "definition_id", "status", mode="plain")
    @classmethod
    def _identifiers(cls, value: object, info: ValidationInfo) -> str:
        return _identifier(value, info.field_name or "identifier")

    @field_validator("parent_id", mode="plain")
    @classmethod
    def _parent(cls, value: object) -> str | None:
        return _optional_identifier(value, "parent_id")

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, value: object) -> object:
        if isinstance(value, bool):  # lax int mode took True as 1
            raise ValueError(f"version must be an int, not {type(value).__name__}")
        return value

    @field_validator("root_path", mode="plain")
    @classmethod
    def _root_path(cls, value: object) -> str:
        return _path(value, "root_path", allow_root=True)

    @model_validator(mode="after")
    def _not_its_own_parent(self) -> Self:
        if self.parent_id is not None and self.parent_id == self.id:
            raise ValueError(f"execution {self.id!r} cannot be its own parent")
        return self

    @property
    def is_root(self) -> bool:
        """True when no other execution spawned this one."""
        return self.parent_id is None


class Event(_IdentifiedModel):
    """Something that happens to an execution: a caller-minted ``id`` (the dedupe key), a
    ``name`` the chart reacts to, and JSON ``data``."""

    model_config = _FROZEN

    id: str
    name: str
    data: Any = None

    @field_validator("id", "name", mode="plain")
    @classmethod
    def _identifiers(cls, value: object, info: ValidationInfo) -> str:
        return _identifier(value, f"event {info.field_name}")


Emit = tuple[str, Event]
"""An element of ``commit(emits=...)``: ``(target_id, event)``, the execution to deliver to."""


class OutboxEntry(BaseModel):
    """An emitted event waiting in the transactional outbox until a relay acks ``seq``."""

    model_config = _FROZEN

    seq: int = Field(ge=1)
    target_id: str
    event: Event


class SpawnIntent(_IdentifiedModel):
    """An element of ``commit(spawns=...)``: start ``child_id`` rooted at ``root_path``.

    The child runs its parent's definition from ``root_path`` with ``context``; the store
    records the intent (a SpawnEntry) and a spawner creates the child and acks it.
    """

    model_config = _FROZEN

    child_id: str
    root_path: str = ""
    context: dict[str, Any] = Field(default_factory=dict)

    @field_validator("child_id", mode="plain")
    @classmethod
    def _child(cls, value: object) -> str:
        return _identifier(value, "child_id")

    @field_validator("root_path", mode="plain")
    @classmethod
    def _root_path(cls, value: object) -> str:
        return _path(value, "root_path", allow_root=True)


class SpawnEntry(BaseModel):
    """A recorded spawn intent waiting until a spawner acks ``seq``."""

    model_config = _FROZEN

    seq: int = Field(ge=1)
    parent_id: str
    child_id: str
    root_path: str = ""
    context: dict[str, Any] = Field(default_factory=dict)


class TimerOp(BaseModel):
    """An element of ``commit(timers=...)``: schedule (or re-schedule) or cancel the timer at
    ``path`` of the committed execution. One timer per (execution, path)."""

    model_config = _FROZEN

    action: TimerAction
    path: str
    fire_at: float | None = None

    @field_validator("path", mode="plain")
    @classmethod
    def _timer_path(cls, value: object) -> str:
        return _path(value, "timer path", allow_root=False)

    @model_validator(mode="after")
    def _fire_at_matches_action(self) -> Self:
        if self.action == "schedule":
            if self.fire_at is None:
                raise ValueError("a schedule TimerOp needs fire_at")
            _finite(self.fire_at, "fire_at")
        elif self.fire_at is not None:
            raise ValueError("a cancel TimerOp takes no fire_at")
        return self

    @classmethod
    def schedule(cls, path: str, fire_at: float) -> TimerOp:
        """Return an op that (re-)schedules the timer at ``path`` to fire at ``fire_at``."""
        return cls(action="schedule", path=path, fire_at=fire_at)

    @classmethod
    def cancel(cls, path: str) -> TimerOp:
        """Return an op that cancels the timer at ``path`` (nothing if none is scheduled)."""
        return cls(action="cancel", path=path)


class DueTimer(BaseModel):
    """A scheduled timer whose fire time has come; delete it with its ``fire_at``."""

    model_config = _FROZEN

    execution_id: str
    path: str
    fire_at: float


class TraceStep(_IdentifiedModel):
    """What to record of one step: the event handled and free-form JSON ``data``."""

    model_config = _FROZEN

    event_id: str | None = None
    event_name: str | None = None
    data: Any = None

    @field_validator("event_id", "event_name", mode="plain")
    @classmethod
    def _identifiers(cls, value: object, info: ValidationInfo) -> str | None:
        return _optional_identifier(value, info.field_name or "identifier")


class TraceEntry(BaseModel):
    """A recorded trace step; ``index`` is its stable 1-based position in the execution's
    whole history (the ring drops old entries, never renumbers them)."""

    model_config = _FROZEN

    index: int = Field(ge=1)
    recorded_at: float
    event_id: str | None = None
    event_name: str | None = None
    data: Any = None


class ExecutionSummary(BaseModel):
    """An execution as listed: everything but its context."""

    model_config = _FROZEN

    id: str
    definition_id: str
    status: str
    version: int
    parent_id: str | None = None
    root_path: str = ""
    created_at: float
    updated_at: float


class ExecutionPage(BaseModel):
    """One page of ``list_executions``; may be short or empty while ``next_cursor`` is set.
    Keep paging until ``next_cursor`` is None."""

    model_config = _FROZEN

    items: list[ExecutionSummary]
    next_cursor: str | None = None
