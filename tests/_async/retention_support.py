"""Retention stories the backend tests share where the kit cannot tell them (it has no clock
for execution stores)."""

from __future__ import annotations

from runyard import ManualClock
from runyard._async.execution_protocol import AsyncExecutionStore
from runyard.executions import Execution

__all__ = ["marks_inside_the_retention_are_kept"]


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
