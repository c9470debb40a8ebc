"""AsyncPostgresWrites: settling the state store's writes whose reply was lost, by write id."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from runyard.errors import RunyardError, StateConflictError, StoreOutcomeUnknown
from runyard.models import RunKey, RunRecord, SessionRecord
from runyard.postgres.rows import decode_run, decode_session
from runyard.postgres.statements import RUN_COLUMN_COUNT
from runyard.writes import not_this_write, resent_refusal, settle_versioned_write

__all__ = ["AsyncPostgresWrites"]

_SESSION_COLUMN_COUNT = 6


class AsyncPostgresWrites:
    """Mixin for AsyncPostgresStateStore: each put, patch and finalize carries a write id that
    the row keeps (``write_id``); a lost reply is settled by reading it back (runyard.writes)."""

    if TYPE_CHECKING:  # provided by the adapter base and the state store class

        async def _fetch(
            self, name: str, *args: Any, idempotent: bool = True
        ) -> Sequence[Sequence[Any]]: ...

        async def _put_run(
            self,
            key: RunKey,
            text: str,
            expected_version: int,
            status: str | None,
            session_id: str | None,
            fence: int | None,
            write_id: str,
        ) -> RunRecord: ...

        async def _put_session(
            self, tenant: str, session_id: str, text: str, expected_version: int, write_id: str
        ) -> SessionRecord: ...

    async def _read_write(
        self, lost: StoreOutcomeUnknown, name: str, *args: Any
    ) -> Sequence[Any] | None:
        """The row ``name`` reads (its columns, then the last write's id), or None."""
        try:
            rows = await self._fetch(name, *args)
        except RunyardError as exc:
            raise StoreOutcomeUnknown(
                f"{lost}; reading back to settle it failed too ({exc})"
            ) from lost
        return rows[0] if rows else None

    async def _run_written_by(
        self, lost: StoreOutcomeUnknown, key: RunKey, write_id: str, what: str
    ) -> RunRecord:
        """The run, if its last write is ``write_id``; else StoreOutcomeUnknown (``lost``)."""
        row = await self._read_write(lost, "get_run_write", key.tenant, key.run_id)
        if row is not None and row[RUN_COLUMN_COUNT] == write_id:
            return decode_run(row[:RUN_COLUMN_COUNT])
        raise not_this_write(what, key.run_id, lost) from lost

    async def _settle_put_run(
        self,
        lost: StoreOutcomeUnknown,
        key: RunKey,
        text: str,
        expected_version: int,
        status: str | None,
        session_id: str | None,
        fence: int | None,
        write_id: str,
        *,
        may_resend: bool,
    ) -> RunRecord:
        """Settle a put_run whose reply was lost: its run, a re-send, or the right error."""
        args = (key, text, expected_version, status, session_id, fence, write_id)
        row = await self._read_write(lost, "get_run_write", key.tenant, key.run_id)
        record = decode_run(row[:RUN_COLUMN_COUNT]) if row is not None else None
        found = record.version if record is not None else 0
        match settle_versioned_write(
            expected_version=expected_version,
            found_version=found,
            found_write_id=row[RUN_COLUMN_COUNT] if row is not None else None,
            write_id=write_id,
            may_resend=may_resend,
        ):
            case "ours":
                assert record is not None
                return record
            case "resend":
                try:
                    return await self._put_run(*args)
                except StoreOutcomeUnknown as again:
                    return await self._settle_put_run(again, *args, may_resend=False)
                except StateConflictError:
                    # The first send may have committed while this one waited on the row:
                    # only the write id tells whose write took the next version.
                    return await self._settle_put_run(lost, *args, may_resend=False)
        raise resent_refusal("run", key.run_id, expected_version, found) from lost

    async def _settle_put_session(
        self,
        lost: StoreOutcomeUnknown,
        tenant: str,
        session_id: str,
        text: str,
        expected_version: int,
        write_id: str,
        *,
        may_resend: bool,
    ) -> SessionRecord:
        """Settle a put_session whose reply was lost, as _settle_put_run."""
        args = (tenant, session_id, text, expected_version, write_id)
        row = await self._read_write(lost, "get_session_write", tenant, session_id)
        record = decode_session(row[:_SESSION_COLUMN_COUNT]) if row is not None else None
        found = record.version if record is not None else 0
        match settle_versioned_write(
            expected_version=expected_version,
            found_version=found,
            found_write_id=row[_SESSION_COLUMN_COUNT] if row is not None else None,
            write_id=write_id,
            may_resend=may_resend,
        ):
            case "ours":
                assert record is not None
                return record
            case "resend":
                try:
                    return await self._put_session(*args)
                except StoreOutcomeUnknown as again:
                    return await self._settle_put_session(again, *args, may_resend=False)
                except StateConflictError:
                    return await self._settle_put_session(lost, *args, may_resend=False)
        raise resent_refusal("session", session_id, expected_version, found) from lost
