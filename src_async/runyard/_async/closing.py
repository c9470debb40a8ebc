"""AsyncClosing: ``async with store:`` closes the store on the way out."""

from __future__ import annotations

from types import TracebackType

from typing_extensions import Self

__all__ = ["AsyncClosing"]


class AsyncClosing:
    """Gives a store ``async with`` support on top of its own ``aclose()``."""

    async def aclose(self) -> None:
        """Release the store's resources (each store says what that means)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
