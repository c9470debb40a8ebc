"""A queue item as the scripts store it (lua/queue/prelude.lua) and reply with it: decoding,
per-item refusals, and the retry table the scripts decide retries and dead letters with.

An item's hash has short fields and leaves defaults out (FIELDS). The payload is one field
``p``, or fields ``1``..``n`` when split to keep the hash a listpack (store_payload).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from runyard._json import load_json
from runyard.errors import LeaseLostError, RunyardError, WorkItemNotFoundError
from runyard.models import DeadLetter, Lease, WorkItem
from runyard.policy import QueuePolicy
from runyard.queue_args import CheckedItem
from runyard.redis.common import pairs, text

__all__ = [
    "FIELDS",
    "PROMOTE_BATCH",
    "RETRY_ROWS_MAX",
    "decode_dead_letter",
    "decode_item",
    "decode_lease",
    "item_args",
    "item_from_fields",
    "raise_settle_refusal",
    "retry_table",
    "settle_error",
]

# field -> column (and its value when the field is absent). Scripts reply with the payload
# without its header and the header's enqueued_at as ``e`` (lua/queue/prelude.lua, item_reply).
FIELDS = {
    "p": "payload, the header in front (or parts 1..n; or alone beside h when large)",
    "h": "header beside a large payload: enqueued_at (double), readiness seq (5 bytes)",
    "q": "priority (0)",
    "s": "state: l leased, d dead (ready)",
    "a": "attempts (0)",
    "v": "available_at (enqueued_at)",
    "k": "dedupe_key (none)",
    "m": "max_attempts (the policy's)",
    "w": "worker",
    "x": "lease expires_at",
    "c": "claimed_at",
    "t": "lease token",
    "r": "last_error (none)",
    "dr": "dead reason",
    "dt": "dead_at",
}
_STATES = {None: "ready", "l": "leased", "d": "dead"}
# Due delayed items made ready per claim; the rest follow on the next claims.
PROMOTE_BATCH = 1000
# Rows of a retry table at most: backoff stops growing at backoff_cap, so later attempts reuse
# the last row (its own jitter draw).
RETRY_ROWS_MAX = 64


def _payload(named: Mapping[str, Any]) -> Any:
    if "p" in named:
        return named["p"]
    parts = sorted((int(k), v) for k, v in named.items() if k.isdigit())
    return b"".join(v if isinstance(v, bytes) else v.encode() for _, v in parts)


def _opt(named: Mapping[str, Any], field: str) -> str | None:
    value = named.get(field)
    return None if value is None else text(value)


def item_from_fields(tenant: str, item_id: str, fields: Mapping[Any, Any]) -> WorkItem | None:
    """The WorkItem of an item reply's fields, or None when they hold no item."""
    named = {text(k): v for k, v in fields.items()}
    if "e" not in named:
        return None
    expires = _opt(named, "x")
    max_attempts = _opt(named, "m")
    return WorkItem(
        tenant=tenant,
        item_id=item_id,
        payload=load_json(_payload(named)),
        priority=int(_opt(named, "q") or 0),
        state=_STATES[_opt(named, "s")],
        attempts=int(_opt(named, "a") or 0),
        available_at=float(_opt(named, "v") or text(named["e"])),
        enqueued_at=float(text(named["e"])),
        dedupe_key=_opt(named, "k"),
        worker=_opt(named, "w"),
        lease_expires_at=None if expires is None else float(expires),
        last_error=_opt(named, "r"),
        max_attempts=None if max_attempts is None else int(max_attempts),
    )


def _fields(reply: Sequence[Any]) -> dict[str, Any]:
    return pairs(reply[2])


def decode_item(reply: Sequence[Any]) -> WorkItem:
    """The WorkItem of a script's item reply: tenant, id, the item's hash as a flat list."""
    item = item_from_fields(text(reply[0]), text(reply[1]), _fields(reply))
    assert item is not None, "a script replied with an item that does not exist"
    return item


def decode_lease(reply: Sequence[Any]) -> Lease:
    """The Lease a claim, heartbeat or adopt script replies with (an item reply)."""
    item = decode_item(reply)
    fields = _fields(reply)
    assert item.worker is not None and item.lease_expires_at is not None
    return Lease(
        item=item,
        token=int(fields["t"]),
        worker=item.worker,
        claimed_at=float(text(fields["c"])),
        expires_at=item.lease_expires_at,
    )


def decode_dead_letter(reply: Sequence[Any]) -> DeadLetter:
    """The DeadLetter of a dead item's reply."""
    fields = _fields(reply)
    return DeadLetter(
        item=decode_item(reply), reason=text(fields["dr"]), dead_at=float(text(fields["dt"]))
    )


def settle_error(reply: Sequence[Any], tenant: str, item_id: str) -> RunyardError | None:
    """The error a refused settle or heartbeat reply stands for (None when it was applied)."""
    status = text(reply[0])
    if status == "not_found":
        return WorkItemNotFoundError(f"no work item {item_id!r} in tenant {tenant!r}")
    if status == "lease_lost":
        return LeaseLostError(item_id, text(reply[1]))  # type: ignore[arg-type]
    return None


def raise_settle_refusal(reply: Sequence[Any], tenant: str, item_id: str) -> None:
    """Raise what a refused settle's reply says: WorkItemNotFoundError or LeaseLostError."""
    error = settle_error(reply, tenant, item_id)
    if error is not None:
        raise error


@functools.lru_cache(maxsize=64)
def _retry_rows(
    max_attempts: int, backoff_base: float, backoff_cap: float
) -> tuple[list[str], tuple[float, ...]]:
    """The retry table's fixed head (max_attempts, row count) and each row's backoff ceiling
    for a policy with these settings; they do not depend on its random, so they are kept."""
    policy = QueuePolicy(
        max_attempts=max_attempts, backoff_base=backoff_base, backoff_cap=backoff_cap
    )
    # Enough rows to cover the policy's attempts and the backoff's growth up to its cap.
    grows = 1
    while grows < RETRY_ROWS_MAX and backoff_base * 2.0 ** (grows - 1) < backoff_cap:
        grows += 1
    rows = min(RETRY_ROWS_MAX, max(max_attempts, grows))
    ceilings = tuple(policy.backoff_ceiling(attempts) for attempts in range(1, rows + 1))
    return [str(max_attempts), str(rows)], ceilings


def retry_table(policy: QueuePolicy) -> list[str]:
    """The policy's max_attempts, a row count, then the retry delay after attempt 1, 2, ...
    as the queue scripts take them; the script decides dead or retry with the item's own max
    attempts, if it has one, and adds the delay to its own now.

    A row is ``policy.backoff(attempts)`` (what QueuePolicy.on_lapse and on_failure add to now
    for a retry, even past the policy's budget: an item may allow more attempts): its ceiling
    (kept per policy settings) times one fresh draw of ``policy.random``, so each call costs
    one draw per row.
    """
    head, ceilings = _retry_rows(policy.max_attempts, policy.backoff_base, policy.backoff_cap)
    draw = policy.random
    return [*head, *[repr(float(ceiling * draw())) for ceiling in ceilings]]


def item_args(item: CheckedItem) -> list[str]:
    """The seven script arguments of one checked item to enqueue: id, dedupe key, payload,
    priority, delay, run_at, max_attempts (an absent one is "")."""
    return [
        item.item_id,
        item.dedupe_key or "",
        item.payload,
        str(item.priority),
        repr(float(item.delay_seconds)),
        "" if item.run_at is None else repr(float(item.run_at)),
        "" if item.max_attempts is None else str(item.max_attempts),
    ]
