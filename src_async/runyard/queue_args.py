"""The arguments of a work queue's enqueue and batched settles, checked once for every backend.

Every queue (memory, Redis, PostgreSQL, SQLite, both twins) checks a new item and a batch of
leases through these, before anything is sent; no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from runyard._json import dump_json
from runyard.errors import InvalidArgumentError
from runyard.keys import validate_identifier
from runyard.validation import (
    check_max_attempts,
    check_priority,
    check_schedule,
    item_id_or_new,
    settle_target,
)

if TYPE_CHECKING:
    from runyard.models import Lease, NewItem

__all__ = ["CheckedItem", "check_item", "check_items", "check_leases"]


class CheckedItem(NamedTuple):
    """One item to enqueue, every argument checked and normalised."""

    item_id: str
    dedupe_key: str | None
    payload: str  # the stored JSON text
    priority: int
    delay_seconds: float
    run_at: float | None
    max_attempts: int | None
    minted: bool  # item_id was minted here, not the caller's

    @property
    def anonymous(self) -> bool:
        """No caller identity (neither an item_id nor a dedupe_key) settles a lost reply."""
        return self.minted and self.dedupe_key is None

    def due_at(self, now: float) -> float:
        """When the item becomes due, enqueued at ``now`` (a past run_at is due at once)."""
        return now + self.delay_seconds if self.run_at is None else max(now, self.run_at)


def _check(
    payload: Any,
    item_id: str | None,
    dedupe_key: str | None,
    priority: int,
    delay_seconds: float,
    run_at: float | None,
    max_attempts: int | None,
    max_bytes: int,
) -> CheckedItem:
    item_id, minted = item_id_or_new(item_id)
    if dedupe_key is not None:
        validate_identifier(dedupe_key, "dedupe_key")
    priority = check_priority(priority)
    delay, at = check_schedule(delay_seconds, run_at)
    limit = check_max_attempts(max_attempts)
    text = dump_json(payload, max_bytes=max_bytes, what="payload")
    return CheckedItem(item_id, dedupe_key, text, priority, delay, at, limit, minted)


def check_item(
    tenant: str,
    payload: Any,
    *,
    item_id: str | None,
    dedupe_key: str | None,
    priority: int,
    delay_seconds: float,
    run_at: float | None,
    max_attempts: int | None,
    max_bytes: int,
) -> CheckedItem:
    """Check one ``enqueue`` (tenant first, then each argument in the signature's order).

    Raises InvalidArgumentError, or StatePersistenceError for a payload no backend stores.
    """
    validate_identifier(tenant, "tenant")
    return _check(
        payload, item_id, dedupe_key, priority, delay_seconds, run_at, max_attempts, max_bytes
    )


def check_items(tenant: str, items: Collection[NewItem], max_bytes: int) -> list[CheckedItem]:
    """Check an ``enqueue_many``: the tenant, at most 10,000 items, then every item as
    ``check_item`` does, before any is written. Raises as ``check_item`` does."""
    validate_identifier(tenant, "tenant")
    _check_batch(items, "items", "NewItem")
    return [
        _check(
            spec.payload,
            spec.item_id,
            spec.dedupe_key,
            spec.priority,
            spec.delay_seconds,
            spec.run_at,
            spec.max_attempts,
            max_bytes,
        )
        for spec in items
    ]


def check_leases(leases: Collection[Lease]) -> list[tuple[str, str, int]]:
    """The ``(tenant, item_id, token)`` of each lease of a batched settle (at most 10,000).

    Raises InvalidArgumentError before anything is sent.
    """
    _check_batch(leases, "leases", "Lease")
    return [settle_target(lease, None, None) for lease in leases]


def _check_batch(batch: object, argument: str, kind: str) -> None:
    """Refuse ``batch`` unless it is a collection (a list, a tuple, a dict's values) of at
    most 10,000 ``kind`` models: an iterator would be used up by the check, a dict or a bare
    model is no batch."""
    from runyard.models import Lease, NewItem

    model = NewItem if kind == "NewItem" else Lease
    rule = f"a collection (list, tuple, dict values) of 0 to 10000 {kind}"
    if not isinstance(batch, Collection) or isinstance(batch, (str, bytes, Mapping)):
        raise InvalidArgumentError(
            f"{argument} must be a collection of {kind}, not {type(batch).__name__} ({rule})",
            argument=argument,
            limit=rule,
        )
    if len(batch) > 10_000:
        raise InvalidArgumentError(
            f"{argument} holds {len(batch)} {kind}, more than 10000 ({rule})",
            argument=argument,
            limit=rule,
        )
    for position, element in enumerate(batch):
        if not isinstance(element, model):
            raise InvalidArgumentError(
                f"{argument}[{position}] is a {type(element).__name__}, not a {kind} ({rule})",
                argument=argument,
                limit=rule,
            )
