"""Drivers of a store of the other twin, for the kit's interop cases (blocking calls both ways).

The async kit drives a sync-twin store through ``BlockingTwin`` (its calls run in a thread);
the sync kit drives an async-twin store through ``LoopTwin`` (each call runs its own event
loop). Each call opens the store, uses it and closes it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from runyard.events import RunEvent
from runyard.models import RunKey

__all__ = ["BlockingTwin", "LoopTwin", "TwinDriver", "write_steps"]


class TwinDriver(Protocol):
    """Blocking calls on a store of the other twin, on the same data as the kit's store."""

    def follow(self, key: RunKey, poll_seconds: float) -> list[RunEvent]:
        """Follow ``key`` to its end; every event followed."""
        ...

    def write(self, key: RunKey, steps: int) -> None:
        """Append ``steps`` events ({"i": 0..steps-1}) to ``key``, then finalize it
        (``completed``, event ``done`` with {"n": steps})."""
        ...


def write_steps(store: Any, key: RunKey, steps: int) -> None:
    """``TwinDriver.write`` on a sync-twin store."""
    for i in range(steps):
        store.append_event(key, "step", {"i": i})
    store.finalize(key, status="completed", event_type="done", event_data={"n": steps})


class BlockingTwin:
    """Drives sync-twin stores, each opened by ``open_store()`` and closed after the call."""

    def __init__(self, open_store: Callable[[], Any]) -> None:
        self._open_store = open_store

    def follow(self, key: RunKey, poll_seconds: float) -> list[RunEvent]:
        """Follow ``key`` to its end; every event followed."""
        store = self._open_store()
        try:
            return list(store.follow(key, poll_seconds=poll_seconds))
        finally:
            store.close()

    def write(self, key: RunKey, steps: int) -> None:
        """Append ``steps`` events to ``key``, then finalize it."""
        store = self._open_store()
        try:
            write_steps(store, key, steps)
        finally:
            store.close()


class LoopTwin:
    """Drives async-twin stores, each opened by ``await open_store()`` on an event loop of the
    call's own (``asyncio.run``) and closed after the call."""

    def __init__(self, open_store: Callable[[], Awaitable[Any]]) -> None:
        self._open_store = open_store

    def follow(self, key: RunKey, poll_seconds: float) -> list[RunEvent]:
        """Follow ``key`` to its end; every event followed."""

        async def follow() -> list[RunEvent]:
            store = await self._open_store()
            try:
                return [event async for event in store.follow(key, poll_seconds=poll_seconds)]
            finally:
                await store.aclose()

        return asyncio.run(follow())

    def write(self, key: RunKey, steps: int) -> None:
        """Append ``steps`` events to ``key``, then finalize it."""

        async def write() -> None:
            store = await self._open_store()
            try:
                for i in range(steps):
                    await store.append_event(key, "step", {"i": i})
                await store.finalize(
                    key, status="completed", event_type="done", event_data={"n": steps}
                )
            finally:
                await store.aclose()

        asyncio.run(write())
