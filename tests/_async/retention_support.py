"""Retention stories the backend tests share where the kit cannot tell them (it has no clock
for execution stores)."""

from __future__ import annotations

from runyard import ManualClock
from runyard._async.execution_protocol import AsyncExecutionStore
from runyard.executions import Execution

__all__ = ["marks_are_pruned_by_age_not_by_id", "marks_inside_the_retention_are_kept"]


async def marks_inside_the_retention_are_kept(
    store: AsyncExecutionStore, clock: ManualClock
) -> None:
    """Mark "old", then "new" 100 s later; 50 s on, ``prune_processed(older_than=120)``
    forgets "old" (150 s) and keeps "new" (50 s). ``clock`` is the store's."""
    exe = Execution(id="e1", definition_id="d")
    await store.commit(exe, processed_event_id="old")
    clock.advance(100)
    await store.commit(exe, processed_event_id="new")
    clock.advance(50)
    assert await store.prune_processed(older_than=120) == 1
    assert await store.is_processed("e1", "old") is False
    assert await store.is_processed("e1", "new") is True


async def marks_are_pruned_by_age_not_by_id(store: AsyncExecutionStore, clock: ManualClock) -> None:
    """Marks made a second apart in the reverse of their ids' order ("in-3" oldest): a limited
    ``prune_processed`` takes the oldest two, which an order by id would not. (The kit cannot
    tell the two apart: without a clock of its own, its marks may share a time.)"""
    exe = Execution(id="e1", definition_id="d")
    for event_id in ("in-3", "in-2", "in-1"):
        await store.commit(exe, processed_event_id=event_id)
        clock.advance(1)
    assert await store.prune_processed(older_than=0, limit=2) == 2
    kept = [await store.is_processed("e1", i) for i in ("in-1", "in-2", "in-3")]
    assert kept == [True, False, False]
