"""The execution kit's base: fixtures, helpers and constants its case classes share."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from runyard._async.execution_protocol import AsyncExecutionStore
from runyard.capabilities import certify
from runyard.executions.models import (
    Event,
    Execution,
)

__all__ = [
    "CONTENDERS",
    "LISTING_FILTERS",
    "MAX_ATTEMPTS",
    "MAX_PAGES",
    "T0",
    "AsyncExecutionKitBase",
    "make_event",
    "make_execution",
]


# Timer times are passed explicitly (``due_timers(now)``), so the kit needs no clock hook.
T0 = 1_700_000_000.0
CONTENDERS = 16
MAX_PAGES = 1_000
MAX_ATTEMPTS = 1_000

# Filters the listing walk is certified with (pytest id -> list_executions keywords).
LISTING_FILTERS: dict[str, dict[str, Any]] = {
    "no-filter": {},
    "status": {"status": "done"},
    "definition": {"definition_id": "billing"},
    "roots-only": {"roots_only": True},
    "status-and-definition": {"status": "running", "definition_id": "billing"},
    "every-filter": {"status": "done", "definition_id": "onboarding", "roots_only": True},
}


def make_execution(execution_id: str, **fields: Any) -> Execution:
    fields.setdefault("definition_id", "onboarding")
    return Execution(id=execution_id, **fields)


def make_event(event_id: str, name: str = "tick", data: Any = None) -> Event:
    return Event(id=event_id, name=name, data=data)


class AsyncExecutionKitBase:
    """What every execution kit case uses: ``make_store``, the ``store`` fixture and helpers.

    Subclass ``AsyncExecutionStoreConformance`` (which inherits this), not this class.

    ``make_store`` returns a fresh, empty store (its own namespace, e.g. a new key prefix or
    schema). Time never needs moving: ``due_timers`` takes ``now``. Every test validates the
    store's capabilities first and refuses a store that declares no deployment.
    """

    async def make_store(self) -> AsyncExecutionStore:
        """Return a fresh, empty store."""
        raise NotImplementedError("implement make_store() in your conformance subclass")

    @pytest_asyncio.fixture
    async def store(self) -> AsyncIterator[AsyncExecutionStore]:
        store = await self.make_store()
        certify(store)
        try:
            yield store
        finally:
            await store.aclose()

    async def _created(
        self, store: AsyncExecutionStore, execution_id: str, **fields: Any
    ) -> Execution:
        exe = make_execution(execution_id, **fields)
        await store.save(exe)
        return exe

    async def _walk(self, store: AsyncExecutionStore, **filters: Any) -> list[str]:
        seen: list[str] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await store.list_executions(limit=4, cursor=cursor, **filters)
            seen.extend(s.id for s in page.items)
            cursor = page.next_cursor
            if cursor is None:
                return seen
        raise AssertionError(f"listing did not end within {MAX_PAGES} pages")
