"""AsyncRedisSessions: the sessions and run leases of AsyncRedisStateStore."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

from runyard._async.redis.scripts import AsyncScriptRunner
from runyard._json import dump_json, load_json
from runyard.clock import Clock
from runyard.errors import (
    RunLeaseHeldError,
    StatePersistenceError,
    StoreOutcomeUnknown,
)
from runyard.keys import validate_identifier
from runyard.models import RunKey, RunLease, RunRecord, SessionRecord
from runyard.redis.common import (
    ReplyLost,
    decode_session,
    now_arg,
    opt_text,
    pairs,
    raise_refusal,
    state_unavailable,
    text,
    timestamp,
)
from runyard.redis.events import EventKeys
from runyard.redis.flavours import (
    AsyncRedisClient,
)
from runyard.redis.keys import StateKeys
from runyard.redis.scripts import STATE_SCRIPTS
from runyard.redis.settings import RedisStoreSettings
from runyard.validation import (
    check_flag,
    check_run_lease,
    check_ttl,
    check_write_guards,
    session_in_use,
)
from runyard.writes import (
    TOMBSTONE_SECONDS,
    mint_write_id,
    resent_refusal,
    settle_versioned_write,
)

__all__ = ["AsyncRedisSessions"]

T = TypeVar("T")
R = TypeVar("R", RunRecord, SessionRecord)

_SESSION_DELETE_ATTEMPTS = 8
# Runs one delete_session_runs script checks (and with cascade deletes) at most.
_SESSION_BATCH = 200


class AsyncRedisSessions:
    """Mixin for AsyncRedisStateStore: sessions (compare-and-swap like runs) and run leases
    with a fencing epoch, one script per write."""

    settings: RedisStoreSettings
    clock: Clock | None
    _client: AsyncRedisClient
    _runner: AsyncScriptRunner

    def _keys(self, tenant: str) -> StateKeys:
        return StateKeys(self.settings.namespace, tenant)

    async def _read_back(self, lost: ReplyLost, read: Callable[[], Awaitable[T]]) -> T:
        try:
            return await read()
        except Exception as exc:
            raise StoreOutcomeUnknown(
                f"{lost}; reading back to settle it failed too ({exc})"
            ) from lost

    async def _hash_fields(self, name: str) -> dict[str, Any]:
        """The hash ``name``, field names as text (empty: no such key)."""
        fields = await self._runner.call(lambda: self._client.hgetall(name), idempotent=True)
        return {text(k): v for k, v in fields.items()}

    async def _settle_put(
        self,
        lost: ReplyLost,
        names: tuple[str, str],
        decode: Callable[[dict[str, Any]], R],
        resend: Callable[[], Awaitable[R]],
        write: tuple[str, str, int, str],
        *,
        may_resend: bool,
    ) -> R:
        """Settle a put_run/put_session whose reply was lost from the record's hash and its
        tombstone, ``names``, read back in one script (runyard.writes): ``decode`` it when its
        last write is this one, ``resend`` (once, same write id) when it is still at the
        expected version and its tombstone is not this write's, else raise. ``write`` is
        (what, subject, expected version, write id)."""
        what, subject, expected_version, write_id = write
        reply: list[Any] = await self._read_back(
            lost,
            lambda: self._runner.script(
                STATE_SCRIPTS["read_write"], list(names), [], idempotent=True
            ),
        )
        fields = pairs(reply[0])
        found = int(fields.get("version") or 0)
        deleted_write_id = opt_text(reply[1])
        match settle_versioned_write(
            expected_version=expected_version,
            found_version=found,
            found_write_id=opt_text(fields.get("write_id")),
            write_id=write_id,
            may_resend=may_resend,
            deleted_write_id=deleted_write_id,
        ):
            case "ours":
                return decode(fields)
            case "resend":
                return await resend()
        landed = deleted_write_id == write_id
        raise resent_refusal(what, subject, expected_version, found, landed=landed) from lost

    # -- sessions --------------------------------------------------------------------------
    async def put_session(
        self, tenant: str, session_id: str, blob: Any, *, expected_version: int
    ) -> SessionRecord:
        """Write the session iff its version is ``expected_version``.

        Each call carries a write id the session keeps; a lost reply is settled by reading it
        back (runyard.writes). Raises StateConflictError, StatePersistenceError,
        StoreOutcomeUnknown.
        """
        check_write_guards(expected_version, version_required=True)
        validate_identifier(tenant, "tenant")
        validate_identifier(session_id, "session_id")
        stored = dump_json(blob, max_bytes=self.settings.max_value_bytes, what="session blob")
        return await self._put_session(
            tenant, session_id, stored, expected_version, mint_write_id(), 2
        )

    async def _put_session(
        self,
        tenant: str,
        session_id: str,
        stored: str,
        expected_version: int,
        write_id: str,
        sends: int,
    ) -> SessionRecord:
        # As _put_run: the session keeps its last write's id, read back to settle a lost reply.
        k = self._keys(tenant)
        name = k.session(session_id)
        try:
            reply = await self._runner.script(
                STATE_SCRIPTS["put_session"],
                [name],
                [expected_version, stored, now_arg(self.clock), write_id],
                idempotent=False,
            )
        except ReplyLost as lost:
            return await self._settle_put(
                lost,
                (name, k.session_tombstone(session_id)),
                partial(decode_session, tenant, session_id),
                partial(
                    self._put_session, tenant, session_id, stored, expected_version, write_id, 1
                ),
                ("session", session_id, expected_version, write_id),
                may_resend=sends > 1,
            )
        if sends < 2 and text(reply[0]) == "conflict":
            raise resent_refusal("session", session_id, expected_version, int(reply[1]))
        raise_refusal(reply, session_id, expected_version, what="session")
        return SessionRecord(
            tenant=tenant,
            session_id=session_id,
            blob=load_json(stored),
            version=int(reply[1]),
            created_at=float(text(reply[2])),
            updated_at=float(text(reply[3])),
        )

    async def get_session(self, tenant: str, session_id: str) -> SessionRecord | None:
        """Return the session, or None."""
        validate_identifier(tenant, "tenant")
        validate_identifier(session_id, "session_id")
        name = self._keys(tenant).session(session_id)
        fields = await self._runner.call(lambda: self._client.hgetall(name), idempotent=True)
        if not fields:
            return None
        return decode_session(tenant, session_id, fields)

    async def delete_session(self, tenant: str, session_id: str, *, cascade: bool = False) -> bool:
        """Delete the session (and its runs and their event logs when ``cascade``); return
        whether anything existed.

        Reads the session's run set ``_SESSION_BATCH`` members at a time (SSCAN) and checks,
        and with cascade deletes, each batch's runs in one script; a last script deletes the
        session once the set is empty. A cascade cut short (an error, a lost reply) leaves the
        session with fewer runs; calling it again finishes it. Each deleted record's last
        write id stays for runyard.writes.TOMBSTONE_SECONDS (as delete_run's).
        Raises StateInUseError, StoreOutcomeUnknown.
        """
        check_flag(cascade, "cascade")
        validate_identifier(tenant, "tenant")
        validate_identifier(session_id, "session_id")
        k = self._keys(tenant)
        deleted = False
        for _ in range(_SESSION_DELETE_ATTEMPTS):
            live = await self._session_batches(k, tenant, session_id, cascade)
            if live and not cascade:
                raise session_in_use(session_id, live)
            deleted = deleted or live > 0
            try:
                reply = await self._runner.script(
                    STATE_SCRIPTS["delete_session"],
                    [
                        k.session(session_id),
                        k.session_runs(session_id),
                        k.session_tombstone(session_id),
                    ],
                    ["1" if deleted else "0", TOMBSTONE_SECONDS],
                    idempotent=False,
                )
            except ReplyLost as lost:
                raise StoreOutcomeUnknown(f"delete_session of {session_id!r}: {lost}") from lost
            if text(reply[0]) == "ok":
                return bool(int(reply[1]))
        raise StatePersistenceError(
            f"session {session_id!r} kept gaining runs while it was being deleted",
            reason="contended",
        )

    def _cascade_keys(self, tenant: str, run_ids: list[str]) -> list[str]:
        """Per run: its hash, event log, event ids and tombstone (delete_session_runs' KEYS)."""
        keys = []
        for run_id in run_ids:
            log = EventKeys(self.settings.namespace, tenant, run_id)
            keys += [log.state.run(run_id), log.log, log.ids, log.state.run_tombstone(run_id)]
        return keys

    async def _session_batches(
        self, k: StateKeys, tenant: str, session_id: str, cascade: bool
    ) -> int:
        """Run delete_session_runs over the session's run set in batches; return how many runs
        still named the session (deleted, with cascade)."""
        members_key = k.session_runs(session_id)
        live = 0
        cursor = 0
        while True:
            cursor, members = await self._runner.call(
                partial(self._client.sscan, members_key, cursor, count=_SESSION_BATCH),
                idempotent=True,
            )
            run_ids = sorted(text(m) for m in members)
            for start in range(0, len(run_ids), _SESSION_BATCH):
                chunk = run_ids[start : start + _SESSION_BATCH]
                try:
                    found = await self._runner.script(
                        STATE_SCRIPTS["delete_session_runs"],
                        [members_key, k.runs, *self._cascade_keys(tenant, chunk)],
                        ["1" if cascade else "0", session_id, TOMBSTONE_SECONDS, *chunk],
                        idempotent=False,
                    )
                except ReplyLost as lost:
                    raise StoreOutcomeUnknown(f"delete_session of {session_id!r}: {lost}") from lost
                live += int(found)
            if int(cursor) == 0:
                return live

    # -- run leases ------------------------------------------------------------------------
    async def acquire_lease(self, key: RunKey, holder: str, *, ttl_seconds: float) -> RunLease:
        """Lease the run to ``holder`` with a new epoch (the same one if it holds it already).

        Raises RunLeaseHeldError naming the holder.
        """
        validate_identifier(holder, "holder")
        check_ttl(ttl_seconds)
        # Sending the same holder again keeps its epoch (and only moves the expiry on), so a
        # lost reply is retried. The expiry is now + ttl, computed in the script.
        k = self._keys(key.tenant)
        reply = await self._runner.script(
            STATE_SCRIPTS["acquire_lease"],
            [k.lease(key.run_id), k.lease_floor],
            [holder, now_arg(self.clock), timestamp(ttl_seconds)],
            idempotent=True,
        )
        if text(reply[0]) == "held":
            raise RunLeaseHeldError(text(reply[1]), int(reply[2]), float(text(reply[3])))
        return RunLease(
            tenant=key.tenant,
            run_id=key.run_id,
            holder=holder,
            epoch=int(reply[1]),
            expires_at=float(text(reply[2])),
        )

    async def renew_lease(self, lease: RunLease, *, ttl_seconds: float) -> RunLease:
        """Extend a live lease, keeping its epoch. Raises LeaseLostError."""
        check_run_lease(lease)
        check_ttl(ttl_seconds)
        reply = await self._runner.script(
            STATE_SCRIPTS["renew_lease"],
            [self._keys(lease.tenant).lease(lease.run_id)],
            [lease.epoch, now_arg(self.clock), timestamp(ttl_seconds)],
            idempotent=True,
        )
        raise_refusal(reply, lease.run_id)
        expires = float(text(reply[2]))
        return lease.model_copy(update={"holder": text(reply[1]), "expires_at": expires})

    async def release_lease(self, lease: RunLease) -> bool:
        """Release the lease if it is still current; a stale release changes nothing.

        A lost reply is settled by reading back: each call mints a release id the script
        stores when it releases; found → True, the lease still current → sent once more,
        otherwise → False. Raises StoreOutcomeUnknown if reading back fails too, and
        StatePersistenceError (``unavailable``, retryable) if the re-sent release is lost too.
        """
        check_run_lease(lease)
        return await self._release_lease(lease, uuid.uuid4().hex, 2)

    async def _release_lease(self, lease: RunLease, release_id: str, sends: int) -> bool:
        name = self._keys(lease.tenant).lease(lease.run_id)
        try:
            reply = await self._runner.script(
                STATE_SCRIPTS["release_lease"], [name], [lease.epoch, release_id], idempotent=False
            )
        except ReplyLost as lost:
            values: list[Any] = await self._read_back(
                lost,
                lambda: self._runner.call(
                    lambda: self._client.hmget(name, ["epoch", "holder", "released_by"]),
                    idempotent=True,
                ),
            )
            epoch, holder, released_by = values
            if released_by is not None and text(released_by) == release_id:
                return True  # this call's release applied
            current = holder is not None and epoch is not None and int(text(epoch)) == lease.epoch
            if not current:
                # Not released by this call, and no longer current: sent (again) it returns 0.
                return False
            if sends > 1:
                return await self._release_lease(lease, release_id, sends - 1)
            raise state_unavailable(
                f"release_lease of {lease.run_id!r}: the reply was lost twice and the lease is "
                "still held (the release did not apply); release it again"
            ) from lost
        return bool(int(reply))

    async def get_lease(self, key: RunKey) -> RunLease | None:
        """Return the live lease on the run (live by the server's clock, or the injected one),
        or None."""
        reply: list[Any] = await self._runner.script(
            STATE_SCRIPTS["get_lease"],
            [self._keys(key.tenant).lease(key.run_id)],
            [now_arg(self.clock)],
            idempotent=True,
        )
        if not reply:
            return None
        epoch, holder, expires = reply
        return RunLease(
            tenant=key.tenant,
            run_id=key.run_id,
            holder=text(holder),
            epoch=int(text(epoch)),
            expires_at=float(text(expires)),
        )
