"""AsyncMemoryStateStore: runs, sessions and run leases in this process."""

from __future__ import annotations

from typing import Any

from runyard._async.closing import AsyncClosing
from runyard._async.memory.events import AsyncMemoryEvents
from runyard._async.memory.updates import AsyncMemoryUpdates
from runyard._async.pager import AsyncRunIteration
from runyard._flavours import AsyncLock
from runyard.capabilities import StoreCapabilities
from runyard.clock import Clock, SystemClock
from runyard.memory.state import MemoryStateCore
from runyard.models import CounterDelta, RunKey, RunLease, RunPage, RunRecord, SessionRecord
from runyard.validation import (
    DEFAULT_MAX_VALUE_BYTES,
    check_flag,
    check_run_lease,
    check_write_guards,
)

__all__ = ["AsyncMemoryStateStore"]


class AsyncMemoryStateStore(AsyncMemoryEvents, AsyncRunIteration, AsyncClosing):
    """A StateStore held in this process's memory; safe to share between tasks (or threads,
    in the sync twin). Nothing survives the process."""

    capabilities = StoreCapabilities(
        version=1,
        fenced_writes=True,
        retry_ids=True,
        recovery=True,
        event_log=True,
        atomic_finalize=True,
        deployment="single_process",
    )

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        live_updates: bool | AsyncMemoryUpdates | None = None,
    ) -> None:
        self._core = MemoryStateCore(clock or SystemClock(), max_value_bytes)
        self._lock = AsyncLock()
        self.live_updates = AsyncMemoryUpdates() if live_updates is True else live_updates or None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(clock={self._core.clock!r})"

    async def put_run(
        self,
        key: RunKey,
        blob: Any,
        *,
        expected_version: int,
        status: str | None = None,
        session_id: str | None = None,
        fence: int | None = None,
    ) -> RunRecord:
        """Write the run iff its version is ``expected_version`` (0 creates it).

        Raises StateConflictError, LeaseLostError, StatePersistenceError.
        """
        check_write_guards(expected_version, fence, version_required=True)
        async with self._lock:
            record = self._core.put_run(
                key,
                blob,
                expected_version=expected_version,
                status=status,
                session_id=session_id,
                fence=fence,
            )
        self._terminal_hint(key, status)
        return record

    async def patch_run(
        self,
        key: RunKey,
        delta: CounterDelta,
        *,
        status: str | None = None,
        fence: int | None = None,
    ) -> RunRecord:
        """Add ``delta`` to the counters and bump the version. Raises StateNotFoundError."""
        check_write_guards(None, fence)
        async with self._lock:
            record = self._core.patch_run(key, delta, status=status, fence=fence)
        self._terminal_hint(key, status)
        return record

    async def get_run(self, key: RunKey) -> RunRecord | None:
        """Return the run, or None."""
        async with self._lock:
            return self._core.get_run(key)

    async def delete_run(
        self, key: RunKey, *, expected_version: int | None = None, fence: int | None = None
    ) -> bool:
        """Delete the run and its event log; return whether it existed.

        Raises StateConflictError, LeaseLostError.
        """
        check_write_guards(expected_version, fence)
        async with self._lock:
            return self._events().delete_run(key, expected_version=expected_version, fence=fence)

    async def list_runs(
        self,
        tenant: str,
        *,
        status: str | None = None,
        session_id: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> RunPage:
        """Return a page of the tenant's runs in creation order."""
        async with self._lock:
            return self._core.list_runs(
                tenant, status=status, session_id=session_id, limit=limit, cursor=cursor
            )

    async def put_session(
        self, tenant: str, session_id: str, blob: Any, *, expected_version: int
    ) -> SessionRecord:
        """Write the session iff its version is ``expected_version``. Raises StateConflictError."""
        check_write_guards(expected_version, version_required=True)
        async with self._lock:
            return self._core.put_session(
                tenant, session_id, blob, expected_version=expected_version
            )

    async def get_session(self, tenant: str, session_id: str) -> SessionRecord | None:
        """Return the session, or None."""
        async with self._lock:
            return self._core.get_session(tenant, session_id)

    async def delete_session(self, tenant: str, session_id: str, *, cascade: bool = False) -> bool:
        """Delete the session (and its runs and their event logs when ``cascade``).

        Raises StateInUseError.
        """
        check_flag(cascade, "cascade")
        async with self._lock:
            return self._events().delete_session(tenant, session_id, cascade=cascade)

    async def acquire_lease(self, key: RunKey, holder: str, *, ttl_seconds: float) -> RunLease:
        """Lease the run to ``holder``. Raises RunLeaseHeldError."""
        async with self._lock:
            return self._core.acquire_lease(key, holder, ttl_seconds=ttl_seconds)

    async def renew_lease(self, lease: RunLease, *, ttl_seconds: float) -> RunLease:
        """Extend a live lease, keeping its epoch. Raises LeaseLostError."""
        check_run_lease(lease)
        async with self._lock:
            return self._core.renew_lease(lease, ttl_seconds=ttl_seconds)

    async def release_lease(self, lease: RunLease) -> bool:
        """Release the lease if it is still current."""
        check_run_lease(lease)
        async with self._lock:
            return self._core.release_lease(lease)

    async def get_lease(self, key: RunKey) -> RunLease | None:
        """Return the live lease on the run, or None."""
        async with self._lock:
            return self._core.get_lease(key)

    async def prune(self, *, limit: int = 100) -> int:
        """Remove up to ``limit`` lapsed or released run leases; return how many (the memory
        store keeps no session index sets). Raises InvalidArgumentError."""
        async with self._lock:
            return self._core.prune(limit)

    async def aclose(self) -> None:
        """Nothing to release; present for the protocol."""
