"""What the PostgreSQL queue's batched calls decide without I/O, once for both twins: which
statement carries which lease (waves), and which row answers which enqueued item."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, NamedTuple, TypeVar

from runyard.models import Lease, WorkItem
from runyard.postgres.rows import decode_item
from runyard.queue_args import check_leases

__all__ = ["Wave", "in_batch_order", "lease_waves", "pair_enqueued"]

T = TypeVar("T")


class Wave(NamedTuple):
    """The leases one statement carries: their batch positions and their columns."""

    positions: list[int]
    tenants: list[str]
    ids: list[str]
    tokens: list[int]


def lease_waves(leases: Collection[Lease]) -> list[Wave]:
    """Every lease checked (InvalidArgumentError before anything is sent), then the batch in
    waves: the first time each item (tenant, item id) appears, then the second, and so on.
    One statement judges every lease against the rows as they were before it (and applies a
    lease named twice once): an item named again, under the same token or another, goes in
    a later statement, so the batch gives what single calls in order give. A batch without
    repeats is one wave; an empty one none."""
    checked = check_leases(leases)
    waves: list[Wave] = []
    seen: dict[tuple[str, str], int] = {}
    for position, (tenant, item_id, token) in enumerate(checked):
        wave = seen.get((tenant, item_id), 0)
        seen[(tenant, item_id)] = wave + 1
        if wave == len(waves):
            waves.append(Wave([], [], [], []))
        waves[wave].positions.append(position)
        waves[wave].tenants.append(tenant)
        waves[wave].ids.append(item_id)
        waves[wave].tokens.append(token)
    return waves


def in_batch_order(answered: Sequence[tuple[Wave, Sequence[T]]], size: int) -> list[T]:
    """Each wave's outcomes put back at their batch positions."""
    out: dict[int, T] = {}
    for wave, outcomes in answered:
        out.update(zip(wave.positions, outcomes, strict=True))
    return [out[i] for i in range(size)]


def pair_enqueued(
    ids: list[str], keys: list[str | None], rows: Sequence[Sequence[Any]]
) -> list[WorkItem] | None:
    """Each requested item's row, the batch replayed in order as single enqueues: the row it
    inserted, else the one its id names, else the one its dedupe key names, among the stored
    rows and those inserted by earlier items; None when one is missing (it committed after
    the statement's snapshot was taken).

    ``rows``: (batch position from 1, or NULL for a stored row), seq, the item's columns.
    """
    inserted: dict[int, WorkItem] = {}
    by_id: dict[str, WorkItem] = {}
    by_key: dict[str, WorkItem] = {}
    for row in rows:
        item = decode_item(row[2:])
        if row[0] is not None:
            inserted[int(row[0])] = item
            continue
        by_id[item.item_id] = item
        if item.dedupe_key is not None:
            by_key[item.dedupe_key] = item
    out: list[WorkItem] = []
    for position, (item_id, key) in enumerate(zip(ids, keys, strict=True), start=1):
        found = inserted.get(position)
        if found is not None:
            by_id[found.item_id] = found
            if found.dedupe_key is not None:
                by_key[found.dedupe_key] = found
        else:
            found = by_id.get(item_id) or (by_key.get(key) if key is not None else None)
        if found is None:
            return None
        out.append(found)
    return out
