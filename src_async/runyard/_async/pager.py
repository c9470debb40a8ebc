"""Walk every run of a tenant, page by page, as an iterator."""

from __future__ import annotations

from runyard._async.protocols import AsyncStateStore
from runyard.models import RunRecord

__all__ = ["AsyncRunIteration", "AsyncRunPager"]


class AsyncRunPager:
    """Iterate a tenant's runs in creation order, fetching ``page_size`` at a time."""

    def __init__(
        self,
        store: AsyncStateStore,
        tenant: str,
        *,
        status: str | None = None,
        session_id: str | None = None,
        page_size: int = 100,
    ) -> None:
        self._store = store
        self._tenant = tenant
        self._status = status
        self._session_id = session_id
        self._page_size = page_size
        self._buffer: list[RunRecord] = []
        self._cursor: str | None = None
        self._done = False

    def __aiter__(self) -> AsyncRunPager:
        return self

    async def __anext__(self) -> RunRecord:
        while not self._buffer:
            if self._done:
                raise StopAsyncIteration
            page = await self._store.list_runs(
                self._tenant,
                status=self._status,
                session_id=self._session_id,
                limit=self._page_size,
                cursor=self._cursor,
            )
            self._buffer = list(page.items)
            self._cursor = page.next_cursor
            self._done = page.next_cursor is None
        return self._buffer.pop(0)


class AsyncRunIteration:
    """Gives a state store ``iter_runs`` on top of its ``list_runs``."""

    def iter_runs(
        self: AsyncStateStore,
        tenant: str,
        *,
        status: str | None = None,
        session_id: str | None = None,
        page_size: int = 100,
    ) -> AsyncRunPager:
        """Iterate every run of the tenant in creation order, page by page."""
        return AsyncRunPager(
            self, tenant, status=status, session_id=session_id, page_size=page_size
        )
