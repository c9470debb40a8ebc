"""The one error hierarchy shared by both twins."""

from __future__ import annotations

from typing import Literal

__all__ = [
    "ConfigurationError",
    "InvalidArgumentError",
    "ItemLeasedError",
    "LeaseLostError",
    "PoolExhaustedError",
    "QueueUnavailableError",
    "RunFinalizedError",
    "RunLeaseHeldError",
    "RunyardError",
    "StateConflictError",
    "StateInUseError",
    "StateNotFoundError",
    "StatePersistenceError",
    "StoreCapabilityError",
    "StoreConflict",
    "StoreOutcomeUnknown",
    "WorkItemNotFoundError",
]

PersistenceReason = Literal["unavailable", "too_large", "contended", "invalid"]
LeaseLostReason = Literal["expired", "taken", "capped"]


class RunyardError(Exception):
    """Base of every runyard error; ``retryable`` says whether trying again may succeed."""

    retryable: bool = False


class ConfigurationError(RunyardError):
    """The store, its server or its arguments are set up wrongly; fix the setting and retry.

    ``fields`` names the settings fields that were refused, when settings were (empty otherwise).
    """

    def __init__(self, message: str, *, fields: tuple[str, ...] = ()) -> None:
        self.fields = fields
        super().__init__(message)


class InvalidArgumentError(RunyardError, ValueError):
    """An argument is outside what every store accepts; refused before anything is sent.

    ``argument`` names it, ``limit`` states the documented rule it broke (docs/protocols.md,
    "Limits and validation"). Never retryable: the same value is refused again.
    """

    def __init__(self, message: str, *, argument: str = "", limit: str = "") -> None:
        self.argument = argument
        self.limit = limit
        super().__init__(message)


class StoreCapabilityError(ConfigurationError):
    """A store declares a capability its methods cannot honour."""

    def __init__(
        self,
        capability: str,
        method: str,
        missing: tuple[str, ...],
        repair: str,
        *,
        message: str | None = None,
    ) -> None:
        self.capability = capability
        self.method = method
        self.missing = missing
        self.repair = repair
        params = ", ".join(missing)
        super().__init__(
            message
            or f"capability {capability!r} is declared but {method}() lacks the keyword "
            f"parameter(s) {params}: {repair}"
        )


class StateConflictError(RunyardError):
    """A compare-and-swap write found another version than the one it expected.

    ``expected`` is the version the caller sent, ``actual`` the stored one (0: none), also
    readable as ``found``, the name StoreConflict uses.
    """

    def __init__(self, expected: int, actual: int, what: str = "run") -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(f"{what} version conflict: expected {expected}, found {actual}")

    @property
    def found(self) -> int:
        """The stored version (the same as ``actual``)."""
        return self.actual


class RunFinalizedError(RunyardError):
    """The run is in a terminal status: ``finalize`` and ``append_event`` are refused.

    A follower ends at the terminal status, so nothing may follow it in the log. A retried
    ``finalize`` carrying the ``event_id`` of the one that ended the run is not refused: it
    returns the stored run. Never retryable: the run stays terminal. ``run_id`` and ``status``
    name the run and its terminal status.
    """

    retryable = False

    def __init__(self, run_id: str, status: str) -> None:
        self.run_id = run_id
        self.status = status
        super().__init__(
            f"run {run_id!r} is already {status!r} (a terminal status): it takes no further "
            "finalize or event"
        )


class StateNotFoundError(RunyardError):
    """The run or session does not exist."""


class StateInUseError(RunyardError):
    """The session still has runs; delete them first or pass ``cascade=True``."""


class RunLeaseHeldError(RunyardError):
    """Another holder has a live lease on the run."""

    retryable = True

    def __init__(self, holder: str, epoch: int, expires_at: float) -> None:
        self.holder = holder
        self.epoch = epoch
        self.expires_at = expires_at
        super().__init__(f"run is leased by {holder!r} (epoch {epoch}) until {expires_at}")


class StatePersistenceError(RunyardError):
    """The state could not be persisted; ``reason`` says why and decides ``retryable``."""

    def __init__(self, message: str, *, reason: PersistenceReason = "unavailable") -> None:
        self.reason: PersistenceReason = reason
        self.retryable = reason in ("unavailable", "contended")
        super().__init__(message)


class QueueUnavailableError(RunyardError):
    """The queue's server could not be reached within the retry budget."""

    retryable = True


class PoolExhaustedError(RunyardError):
    """Every connection of the pool is in use; raised at once, never waited out."""

    retryable = True


class LeaseLostError(RunyardError):
    """A lease (on a work item, or a run's fencing epoch) is no longer the caller's: it
    expired, was taken by a newer holder, or hit its cap. ``item_id`` names the item or run."""

    def __init__(self, item_id: str, reason: LeaseLostReason) -> None:
        self.item_id = item_id
        self.reason: LeaseLostReason = reason
        super().__init__(f"lease on {item_id!r} lost: {reason}")


class WorkItemNotFoundError(RunyardError):
    """No such work item in this tenant."""


class ItemLeasedError(RunyardError):
    """The item is leased by a worker: ``cancel`` refuses it (settle or let the lease lapse)."""

    def __init__(self, item_id: str, worker: str | None = None) -> None:
        self.item_id = item_id
        self.worker = worker
        held = f" by worker {worker!r}" if worker else ""
        super().__init__(
            f"item {item_id!r} is leased{held}; only ready, delayed or dead items can be cancelled"
        )


class StoreConflict(RunyardError):
    """An execution's stored version differs from the one the caller loaded.

    ``expected`` is the version the caller loaded, ``found`` the stored one (0: none), also
    readable as ``actual``, the name StateConflictError uses.
    """

    def __init__(self, execution_id: str, expected: int, found: int) -> None:
        self.execution_id = execution_id
        self.expected = expected
        self.found = found
        super().__init__(f"execution {execution_id!r}: expected version {expected}, found {found}")

    @property
    def actual(self) -> int:
        """The stored version (the same as ``found``)."""
        return self.found


class StoreOutcomeUnknown(RunyardError):
    """The write was sent but its reply was lost: it may or may not have been applied."""

    retryable = False
