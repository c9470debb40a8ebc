"""AsyncRedisStateStore: runs, sessions and run leases on Redis, one script per write."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

from runyard._async.closing import AsyncClosing
from runyard._async.pager import AsyncRunIteration
from runyard._async.redis.events import AsyncRedisEvents
from runyard._async.redis.scripts import AsyncScriptRunner, client_from_url
from runyard._async.redis.updates import AsyncRedisUpdates
from runyard._checks import DEFAULT_STATUS, check_limit, check_ttl
from runyard._json import dump_json, load_json
from runyard.capabilities import StoreCapabilities
from runyard.clock import Clock, SystemClock
from runyard.errors import (
    RunLeaseHeldError,
    StateInUseError,
    StateNotFoundError,
    StatePersistenceError,
    StoreOutcomeUnknown,
)
from runyard.keys import decode_cursor, encode_cursor, validate_identifier
from runyard.models import CounterDelta, RunKey, RunLease, RunPage, RunRecord, SessionRecord
from runyard.redis.common import (
    ReplyLost,
    decode_run,
    decode_session,
    pairs,
    raise_refusal,
    text,
    timestamp,
)
from runyard.redis.flavours import (
    AsyncRedisClient,
)
from runyard.redis.keys import StateKeys
from runyard.redis.scripts import STATE_SCRIPTS
from runyard.redis.settings import RedisStoreSettings
from runyard.validation import check_delta, check_status, counter_overflow

__all__ = ["AsyncRedisStateStore"]

T = TypeVar("T")
_SESSION_DELETE_ATTEMPTS = 8
_LIST_BATCH = 100


def _unavailable(message: str) -> StatePersistenceError:
    return StatePersistenceError(message, reason="unavailable")


class AsyncRedisStateStore(AsyncRedisEvents, AsyncRunIteration, AsyncClosing):
    """A StateStore on Redis or Redis Cluster (the tenant is the hash tag).

    Build it with ``await AsyncRedisStateStore.open(client, ...)`` (runs ``preflight()``) or
    ``await AsyncRedisStateStore.from_url(url, ...)``; direct construction skips preflight.
    Every write is one script round trip; the store owns retries (see docs/redis.md).
    """

    capabilities = StoreCapabilities(
        version=1,
        fenced_writes=True,
        retry_ids=True,
        recovery=True,
        event_log=True,
        atomic_finalize=True,
        deployment="multi_server",
    )

    def __init__(
        self,
        client: AsyncRedisClient,
        *,
        clock: Clock | None = None,
        settings: RedisStoreSettings | None = None,
        owns_client: bool = False,
        live_updates: bool | AsyncRedisUpdates | None = None,
    ) -> None:
        self.settings = settings or RedisStoreSettings()
        self.clock = clock or SystemClock()
        self._client = client
        self._owns_client = owns_client
        self._runner = AsyncScriptRunner(client, self.settings, _unavailable)
        if live_updates is True:
            live_updates = AsyncRedisUpdates(client, self.settings.namespace)
        self.live_updates = live_updates or None

    @classmethod
    async def open(
        cls,
        client: AsyncRedisClient,
        *,
        clock: Clock | None = None,
        settings: RedisStoreSettings | None = None,
    ) -> AsyncRedisStateStore:
        """Return a store on ``client`` after ``preflight()``. Raises ConfigurationError."""
        store = cls(client, clock=clock, settings=settings)
        await store.preflight()
        return store

    @classmethod
    async def from_url(
        cls,
        url: str | None = None,
        *,
        clock: Clock | None = None,
        settings: RedisStoreSettings | None = None,
    ) -> AsyncRedisStateStore:
        """Build a client (redis-py's retries off) for ``url`` or ``settings.dsn``, then open.

        The store owns that client and closes it in ``aclose()``. Raises ConfigurationError.
        """
        settings = settings or RedisStoreSettings()
        client = client_from_url(url, settings)
        store = cls(client, clock=clock, settings=settings, owns_client=True)
        try:
            await store.preflight()
        except BaseException:
            await store.aclose()
            raise
        return store

    def __repr__(self) -> str:
        return f"{type(self).__name__}(namespace={self.settings.namespace!r})"

    async def preflight(self) -> None:
        """Refuse a server that may evict or forget data (see RedisStoreSettings.durable).

        Raises ConfigurationError naming the setting, its value and why; never sets anything.
        """
        await self._runner.preflight()

    def _keys(self, tenant: str) -> StateKeys:
        return StateKeys(self.settings.namespace, tenant)

    # -- runs ------------------------------------------------------------------------------
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

        Raises StateConflictError, LeaseLostError, StatePersistenceError (``too_large`` and
        ``invalid`` before anything is sent), StoreOutcomeUnknown.
        """
        check_status(status)
        stored = dump_json(blob, max_bytes=self.settings.max_value_bytes, what="run blob")
        if session_id is not None:
            validate_identifier(session_id, "session_id")
        return await self._put_run(key, stored, expected_version, status, session_id, fence, 2)

    async def _put_run(
        self,
        key: RunKey,
        stored: str,
        expected_version: int,
        status: str | None,
        session_id: str | None,
        fence: int | None,
        sends: int,
    ) -> RunRecord:
        k = self._keys(key.tenant)
        keys = [k.run(key.run_id), k.runs, k.seq, k.lease(key.run_id)]
        if session_id is not None:
            keys.append(k.session_runs(session_id))
        args = [
            expected_version,
            stored,
            status or "",
            session_id or "",
            "" if fence is None else fence,
            timestamp(self.clock.now()),
            DEFAULT_STATUS,
            key.run_id,
        ]
        try:
            reply = await self._runner.script(
                STATE_SCRIPTS["put_run"], keys, args, idempotent=False
            )
        except ReplyLost as lost:
            # The expected version is a retry identity: read back to learn what happened.
            current = await self._read_back(lost, lambda: self.get_run(key))
            actual = current.version if current else 0
            applied = current is not None and actual == expected_version + 1
            if applied and current is not None and dump_json(current.blob) == stored:
                return current
            if actual == expected_version and sends > 1:
                return await self._put_run(
                    key, stored, expected_version, status, session_id, fence, sends - 1
                )
            raise StoreOutcomeUnknown(
                f"put_run of {key.run_id!r}: the reply was lost and the run is now at version "
                f"{actual}; read it and decide"
            ) from lost
        raise_refusal(reply, key.run_id, expected_version)
        return decode_run(key.tenant, key.run_id, pairs(reply[1:]), blob=load_json(stored))

    async def _read_back(self, lost: ReplyLost, read: Callable[[], Awaitable[T]]) -> T:
        try:
            return await read()
        except Exception as exc:
            raise StoreOutcomeUnknown(
                f"{lost}; reading back to settle it failed too ({exc})"
            ) from lost

    async def patch_run(
        self,
        key: RunKey,
        delta: CounterDelta,
        *,
        status: str | None = None,
        fence: int | None = None,
    ) -> RunRecord:
        """Add ``delta`` to the counters and bump the version.

        Raises StateNotFoundError, LeaseLostError, StoreOutcomeUnknown (a patch has no retry
        identity, so a lost reply is never settled by sending it again).
        """
        check_delta(delta)
        check_status(status)
        k = self._keys(key.tenant)
        args = [
            delta.input_tokens,
            delta.output_tokens,
            delta.cost_micros,
            delta.iterations,
            delta.cursor,
            status or "",
            "" if fence is None else fence,
            timestamp(self.clock.now()),
        ]
        keys = [k.run(key.run_id), k.lease(key.run_id)]
        try:
            reply = await self._runner.script(
                STATE_SCRIPTS["patch_run"], keys, args, idempotent=False
            )
        except ReplyLost as lost:
            raise StoreOutcomeUnknown(
                f"patch_run of {key.run_id!r}: {lost}; it may or may not have been added"
            ) from lost
        if text(reply[0]) == "not_found":
            raise StateNotFoundError(f"run {key.run_id!r} of tenant {key.tenant!r} does not exist")
        if text(reply[0]) == "out_of_range":
            name = text(reply[1])
            raise counter_overflow(name, int(reply[2]), getattr(delta, name))
        raise_refusal(reply, key.run_id)
        return decode_run(key.tenant, key.run_id, pairs(reply[1:]))

    async def get_run(self, key: RunKey) -> RunRecord | None:
        """Return the run (blob and counters in one command), or None."""
        name = self._keys(key.tenant).run(key.run_id)
        fields = await self._runner.call(lambda: self._client.hgetall(name), idempotent=True)
        if not fields:
            return None
        return decode_run(key.tenant, key.run_id, fields)

    async def delete_run(
        self, key: RunKey, *, expected_version: int | None = None, fence: int | None = None
    ) -> bool:
        """Delete the run; return whether it existed.

        Raises StateConflictError, LeaseLostError, StoreOutcomeUnknown.
        """
        k = self._keys(key.tenant)
        args = [
            "" if expected_version is None else expected_version,
            "" if fence is None else fence,
            timestamp(self.clock.now()),
            key.run_id,
        ]
        keys = [k.run(key.run_id), k.runs, k.lease(key.run_id)]
        try:
            reply = await self._runner.script(
                STATE_SCRIPTS["delete_run"], keys, args, idempotent=False
            )
        except ReplyLost as lost:
            raise StoreOutcomeUnknown(f"delete_run of {key.run_id!r}: {lost}") from lost
        raise_refusal(reply, key.run_id, expected_version or 0)
        return bool(int(reply[1]))

    async def list_runs(
        self,
        tenant: str,
        *,
        status: str | None = None,
        session_id: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> RunPage:
        """Return a page of the tenant's runs in creation order; pass ``next_cursor`` on.

        Reads the creation-sequence index, then the runs, in batches until the page (and one
        more match, to know whether there is a next page) is found.
        """
        validate_identifier(tenant, "tenant")
        check_status(status)
        if session_id is not None:
            validate_identifier(session_id, "session_id")
        check_limit(limit)
        after = decode_cursor(cursor)
        k = self._keys(tenant)
        filters = [status or "", session_id or ""]
        matches: list[RunRecord] = []
        while len(matches) <= limit:
            want = limit + 1 - len(matches)
            if status or session_id:
                want = max(want, _LIST_BATCH)
            read_index = partial(
                self._client.zrangebyscore,
                k.runs,
                f"({after}",
                "+inf",
                start=0,
                num=want,
                withscores=True,
            )
            batch: list[Any] = await self._runner.call(read_index, idempotent=True)
            if not batch:
                break
            ids = [text(member) for member, _ in batch]
            reply = await self._runner.script(
                STATE_SCRIPTS["read_runs"], [k.run(i) for i in ids], filters, idempotent=True
            )
            for run_id, fields in zip(ids, reply, strict=True):
                if fields:
                    matches.append(decode_run(tenant, run_id, pairs(fields)))
            after = int(batch[-1][1])
            if len(batch) < want:
                break
        page = matches[:limit]
        more = len(matches) > limit
        return RunPage(items=page, next_cursor=encode_cursor(page[-1].seq) if more else None)

    # -- sessions --------------------------------------------------------------------------
    async def put_session(
        self, tenant: str, session_id: str, blob: Any, *, expected_version: int
    ) -> SessionRecord:
        """Write the session iff its version is ``expected_version``.

        Raises StateConflictError, StatePersistenceError, StoreOutcomeUnknown.
        """
        validate_identifier(tenant, "tenant")
        validate_identifier(session_id, "session_id")
        stored = dump_json(blob, max_bytes=self.settings.max_value_bytes, what="session blob")
        return await self._put_session(tenant, session_id, stored, expected_version, 2)

    async def _put_session(
        self, tenant: str, session_id: str, stored: str, expected_version: int, sends: int
    ) -> SessionRecord:
        now = self.clock.now()
        keys = [self._keys(tenant).session(session_id)]
        try:
            reply = await self._runner.script(
                STATE_SCRIPTS["put_session"],
                keys,
                [expected_version, stored, timestamp(now)],
                idempotent=False,
            )
        except ReplyLost as lost:
            current = await self._read_back(lost, lambda: self.get_session(tenant, session_id))
            actual = current.version if current else 0
            applied = current is not None and actual == expected_version + 1
            if applied and current is not None and dump_json(current.blob) == stored:
                return current
            if actual == expected_version and sends > 1:
                return await self._put_session(
                    tenant, session_id, stored, expected_version, sends - 1
                )
            raise StoreOutcomeUnknown(
                f"put_session of {session_id!r}: the reply was lost and the session is now at "
                f"version {actual}; read it and decide"
            ) from lost
        raise_refusal(reply, session_id, expected_version, what="session")
        return SessionRecord(
            tenant=tenant,
            session_id=session_id,
            blob=load_json(stored),
            version=int(reply[1]),
            created_at=float(text(reply[2])),
            updated_at=now,
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
        """Delete the session (and its runs when ``cascade``); return whether anything existed.

        Two round trips: read the runs that named the session, then one script that checks
        each of them and deletes. Raises StateInUseError, StoreOutcomeUnknown.
        """
        validate_identifier(tenant, "tenant")
        validate_identifier(session_id, "session_id")
        k = self._keys(tenant)
        members_key = k.session_runs(session_id)
        for _ in range(_SESSION_DELETE_ATTEMPTS):
            members = await self._runner.call(
                lambda: self._client.smembers(members_key),
                idempotent=True,
            )
            run_ids = sorted(text(m) for m in members)
            keys = [k.session(session_id), members_key, k.runs, *(k.run(r) for r in run_ids)]
            args = ["1" if cascade else "0", session_id, *run_ids]
            try:
                reply = await self._runner.script(
                    STATE_SCRIPTS["delete_session"], keys, args, idempotent=False
                )
            except ReplyLost as lost:
                raise StoreOutcomeUnknown(f"delete_session of {session_id!r}: {lost}") from lost
            status = text(reply[0])
            if status == "in_use":
                raise StateInUseError(
                    f"session {session_id!r} still has {int(reply[1])} run(s); "
                    "delete them first or pass cascade=True"
                )
            if status == "ok":
                return bool(int(reply[1]))
        raise StatePersistenceError(
            f"session {session_id!r} kept gaining runs while it was being deleted",
            reason="contended",
        )

    # -- run leases ------------------------------------------------------------------------
    async def acquire_lease(self, key: RunKey, holder: str, *, ttl_seconds: float) -> RunLease:
        """Lease the run to ``holder`` with a new epoch (the same one if it holds it already).

        Raises RunLeaseHeldError naming the holder.
        """
        validate_identifier(holder, "holder")
        check_ttl(ttl_seconds)
        now = self.clock.now()
        expires = now + ttl_seconds
        # Sending the same holder and expiry again changes nothing, so a lost reply is retried.
        reply = await self._runner.script(
            STATE_SCRIPTS["acquire_lease"],
            [self._keys(key.tenant).lease(key.run_id)],
            [holder, timestamp(now), timestamp(expires)],
            idempotent=True,
        )
        if text(reply[0]) == "held":
            raise RunLeaseHeldError(text(reply[1]), int(reply[2]), float(text(reply[3])))
        return RunLease(
            tenant=key.tenant,
            run_id=key.run_id,
            holder=holder,
            epoch=int(reply[1]),
            expires_at=expires,
        )

    async def renew_lease(self, lease: RunLease, *, ttl_seconds: float) -> RunLease:
        """Extend a live lease, keeping its epoch. Raises LeaseLostError."""
        check_ttl(ttl_seconds)
        now = self.clock.now()
        expires = now + ttl_seconds
        reply = await self._runner.script(
            STATE_SCRIPTS["renew_lease"],
            [self._keys(lease.tenant).lease(lease.run_id)],
            [lease.epoch, timestamp(now), timestamp(expires)],
            idempotent=True,
        )
        raise_refusal(reply, lease.run_id)
        return lease.model_copy(update={"holder": text(reply[1]), "expires_at": expires})

    async def release_lease(self, lease: RunLease) -> bool:
        """Release the lease if it is still current; a stale release changes nothing.

        A lost reply is settled by reading back: each call mints a release id the script
        stores when it releases; found → True, the lease still current → sent once more,
        otherwise → False. Raises StoreOutcomeUnknown if reading back fails too, and
        StatePersistenceError (``unavailable``, retryable) if the re-sent release is lost too.
        """
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
            raise _unavailable(
                f"release_lease of {lease.run_id!r}: the reply was lost twice and the lease is "
                "still held (the release did not apply); release it again"
            ) from lost
        return bool(int(reply))

    async def get_lease(self, key: RunKey) -> RunLease | None:
        """Return the live lease on the run, or None."""
        name = self._keys(key.tenant).lease(key.run_id)
        values: list[Any] = await self._runner.call(
            lambda: self._client.hmget(name, ["epoch", "holder", "expires_at"]),
            idempotent=True,
        )
        epoch, holder, expires = values
        if holder is None or float(text(expires)) < self.clock.now():
            return None
        return RunLease(
            tenant=key.tenant,
            run_id=key.run_id,
            holder=text(holder),
            epoch=int(text(epoch)),
            expires_at=float(text(expires)),
        )

    async def aclose(self) -> None:
        """Close the client if the store built it (``from_url``); an injected one is the
        caller's to close."""
        if self._owns_client:
            await self._client.aclose()
