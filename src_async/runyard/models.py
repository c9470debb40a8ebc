"""The records both twins read and write, one class each (pydantic v2)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from runyard.keys import validate_identifier
from runyard.validation import MAX_COUNTER, check_counter

__all__ = [
    "CounterDelta",
    "DeadLetter",
    "ItemState",
    "Lease",
    "NewItem",
    "QueueStats",
    "RunKey",
    "RunLease",
    "RunPage",
    "RunRecord",
    "SessionRecord",
    "WorkItem",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")

ItemState = Literal["ready", "leased", "dead"]


class RunKey(BaseModel):
    """Where a run lives: its tenant and its id, both validated identifiers."""

    model_config = _FROZEN

    tenant: str
    run_id: str

    def __init__(self, tenant: str, run_id: str) -> None:
        # Validate here, so a bad identifier raises InvalidIdentifierError, not ValidationError.
        super().__init__(
            tenant=validate_identifier(tenant, "tenant"),
            run_id=validate_identifier(run_id, "run_id"),
        )

    @field_validator("tenant", "run_id", mode="plain")
    @classmethod
    def _identifier(cls, value: object) -> str:
        return validate_identifier(value)


class CounterDelta(BaseModel):
    """Amounts to add to a run's counters: ints from 0 to 2**53 - 1 (runyard.validation.
    MAX_COUNTER); anything else raises InvalidArgumentError naming the field."""

    model_config = _FROZEN

    input_tokens: int = Field(default=0, ge=0, le=MAX_COUNTER)
    output_tokens: int = Field(default=0, ge=0, le=MAX_COUNTER)
    cost_micros: int = Field(default=0, ge=0, le=MAX_COUNTER)
    iterations: int = Field(default=0, ge=0, le=MAX_COUNTER)
    cursor: int = Field(default=0, ge=0, le=MAX_COUNTER)

    def __init__(self, **amounts: Any) -> None:
        # Checked here, so a bad amount raises InvalidArgumentError, not ValidationError.
        super().__init__(
            **{name: check_counter(value, f"delta.{name}") for name, value in amounts.items()}
        )


class RunRecord(BaseModel):
    """A run as stored: the blob a worker last wrote, its version, counters and listing seq."""

    model_config = _FROZEN

    tenant: str
    run_id: str
    blob: Any
    version: int
    status: str
    session_id: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_micros: int = 0
    iterations: int = 0
    cursor: int = 0
    created_at: float
    updated_at: float
    seq: int

    @property
    def key(self) -> RunKey:
        """The run's key."""
        return RunKey(self.tenant, self.run_id)


class RunPage(BaseModel):
    """One page of a listing; ``next_cursor`` is None on the last page."""

    model_config = _FROZEN

    items: list[RunRecord]
    next_cursor: str | None = None


class SessionRecord(BaseModel):
    """A session of an agent loop: a JSON blob under compare-and-swap, grouping runs."""

    model_config = _FROZEN

    tenant: str
    session_id: str
    blob: Any
    version: int
    created_at: float
    updated_at: float


class RunLease(BaseModel):
    """A holder's lease on a run; writes carrying an older ``epoch`` are refused."""

    model_config = _FROZEN

    tenant: str
    run_id: str
    holder: str
    epoch: int
    expires_at: float


class WorkItem(BaseModel):
    """A unit of work in a tenant's queue."""

    model_config = _FROZEN

    tenant: str
    item_id: str
    payload: Any
    priority: int = 0
    state: ItemState
    attempts: int = 0
    available_at: float
    enqueued_at: float
    dedupe_key: str | None = None
    worker: str | None = None
    lease_expires_at: float | None = None
    last_error: str | None = None
    max_attempts: int | None = None
    """The item's own attempt budget; None: the queue policy's ``max_attempts``."""


class Lease(BaseModel):
    """A claim on a work item; every settle must carry ``token``."""

    model_config = _FROZEN

    item: WorkItem
    token: int
    worker: str
    claimed_at: float
    expires_at: float

    @property
    def tenant(self) -> str:
        """The item's tenant."""
        return self.item.tenant

    @property
    def item_id(self) -> str:
        """The item's id."""
        return self.item.item_id


class QueueStats(BaseModel):
    """Counts of items by state (``ready`` excludes items still waiting out a delay)."""

    model_config = _FROZEN

    ready: int
    delayed: int
    leased: int
    dead: int
    tenants: int


class DeadLetter(BaseModel):
    """An item that will not be retried, and why."""

    model_config = _FROZEN

    item: WorkItem
    reason: str
    dead_at: float


class NewItem(BaseModel):
    """One item of ``enqueue_many``: the arguments ``enqueue`` takes after the tenant."""

    model_config = _FROZEN

    payload: Any
    item_id: str | None = None
    dedupe_key: str | None = None
    priority: int = 0
    delay_seconds: float = 0.0
    run_at: float | None = None
    max_attempts: int | None = None
