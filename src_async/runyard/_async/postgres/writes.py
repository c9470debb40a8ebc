"""AsyncPostgresWrites: settling the state store's writes whose reply was lost, by write id."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from runyard.errors import RunyardError, StateConflictError, StoreOutcomeUnknown
from runyard.models import RunKey, RunRecord, SessionRecord
from runyard.postgres.writes import WriteTarget, run_target
from runyard.writes import not_this_write, resent_refusal, settle_versioned_write

__all__ = ["AsyncPostgresWrites"]

R = TypeVar("R", RunRecord, SessionRecord)


class AsyncPostgresWrites:
    """Mixin for AsyncPostgresStateStore: each put, patch and finalize carries a write id that
    the row keeps (``write_id``); a lost reply is settled by reading it back (runyard.writes)."""

    if TYPE_CHECKING:  # provided by the adapter base and the state store class

        async def _fetch(
            self, name: str, *args: Any, idempotent: bool = True
        ) -> Sequence[Sequence[Any]]: ...

    async def _read_write(self, lost: StoreOutcomeUnknown, name: str, *args: Any) -> Sequence[Any]:
        """The row ``name`` reads: the record's columns (NULLs: no record), the id of its last
        write, then its tombstone's."""
        try:
            rows = await self._fetch(name, *args)
        except RunyardError as exc:
            raise StoreOutcomeUnknown(
                f"{lost}; reading back to settle it failed too ({exc})"
            ) from lost
        return rows[0]

    async def _run_written_by(
        self, lost: StoreOutcomeUnknown, key: RunKey, write_id: str, what: str
    ) -> RunRecord:
        """The run, if its last write is ``write_id``; else StoreOutcomeUnknown (``lost``)."""
        target = run_target(key)
        row = await self._read_write(lost, target.read, *target.ids)
        if row[target.columns] == write_id:
            return target.decode(row[: target.columns])
        raise not_this_write(what, key.run_id, lost) from lost

    async def _settle_versioned(
        self,
        lost: StoreOutcomeUnknown,
        target: WriteTarget[R],
        resend: Callable[[], Awaitable[R]],
        expected_version: int,
        write_id: str,
        *,
        may_resend: bool,
    ) -> R:
        """Settle a put_run/put_session whose reply was lost: its record, a re-send (once,
        with the same write id), or the right error (runyard.writes)."""
        row = await self._read_write(lost, target.read, *target.ids)
        record = target.decode(row[: target.columns]) if row[0] is not None else None
        found = record.version if record is not None else 0
        deleted_write_id = row[target.columns + 1]
        match settle_versioned_write(
            expected_version=expected_version,
            found_version=found,
            found_write_id=row[target.columns],
            write_id=write_id,
            may_resend=may_resend,
            deleted_write_id=deleted_write_id,
        ):
            case "ours":
                assert record is not None
                return record
            case "resend":
                again = partial(
                    self._settle_versioned,
                    target=target,
                    resend=resend,
                    expected_version=expected_version,
                    write_id=write_id,
                    may_resend=False,
                )
                try:
                    return await resend()
                except StoreOutcomeUnknown as unknown:
                    return await again(unknown)
                except StateConflictError:
                    # The first send may have committed while this one waited on the row:
                    # only the write id tells whose write took the next version.
                    return await again(lost)
        landed = deleted_write_id == write_id
        raise resent_refusal(
            target.what, target.subject, expected_version, found, landed=landed
        ) from lost
