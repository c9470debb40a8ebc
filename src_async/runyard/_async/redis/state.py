"""AsyncRedisStateStore: runs, sessions and run leases on Redis, one script per write."""

from __future__ import annotations

from functools import partial
from typing import Any, TypeVar

from runyard._async.closing import AsyncClosing
from runyard._async.pager import AsyncRunIteration
from runyard._async.redis.events import AsyncRedisEvents
from runyard._async.redis.retention import AsyncRedisStateRetention
from runyard._async.redis.scripts import AsyncScriptRunner, client_from_url
from runyard._async.redis.sessions import AsyncRedisSessions
from runyard._async.redis.updates import AsyncRedisUpdates, own_updates
from runyard._json import dump_json, load_json
from runyard.capabilities import StoreCapabilities
from runyard.clock import Clock
from runyard.errors import (
    StateNotFoundError,
    StoreOutcomeUnknown,
)
from runyard.keys import decode_cursor, encode_cursor, validate_identifier
from runyard.models import CounterDelta, RunKey, RunPage, RunRecord
from runyard.redis.common import (
    ReplyLost,
    decode_run,
    now_arg,
    pairs,
    raise_refusal,
    state_unavailable,
    text,
)
from runyard.redis.events import EventKeys
from runyard.redis.flavours import (
    AsyncRedisClient,
)
from runyard.redis.scripts import STATE_SCRIPTS
from runyard.redis.settings import RedisStoreSettings
from runyard.validation import (
    DEFAULT_STATUS,
    check_delta,
    check_limit,
    check_status,
    check_write_guards,
    counter_overflow,
)
from runyard.writes import TOMBSTONE_SECONDS, mint_write_id, resent_refusal

__all__ = ["AsyncRedisStateStore"]

T = TypeVar("T")
_LIST_BATCH = 100
# Runs one filtered list_runs call reads at most (more when limit + 1 is larger).
_LIST_SCAN = 1000


class AsyncRedisStateStore(
    AsyncRedisEvents, AsyncRedisSessions, AsyncRedisStateRetention, AsyncRunIteration, AsyncClosing
):
    """A StateStore on Redis or Redis Cluster (the tenant is the hash tag).

    Build it with ``await AsyncRedisStateStore.open(client, ...)`` (runs ``preflight()``) or
    ``await AsyncRedisStateStore.from_url(url, ...)``; direct construction skips preflight.
    Every write is one script round trip; the store owns retries (see docs/redis.md). Time
    (``created_at``/``updated_at``, run lease expiry, event times) is the server's (``TIME`` in
    the scripts) unless a ``clock`` is injected (tests, the conformance kit).
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
        self.clock = clock
        self._client = client
        self._owns_client = owns_client
        self._runner = AsyncScriptRunner(client, self.settings, state_unavailable)
        # True: updates of the store's own (the store closes them); an instance is checked
        # against the namespace and cluster kind, shared, and left open.
        self.live_updates = own_updates(live_updates, client, self.settings.namespace)
        self._owns_updates = live_updates is True

    @classmethod
    async def open(
        cls,
        client: AsyncRedisClient,
        *,
        clock: Clock | None = None,
        settings: RedisStoreSettings | None = None,
        live_updates: bool | AsyncRedisUpdates | None = None,
    ) -> AsyncRedisStateStore:
        """Return a store on ``client`` after ``preflight()`` and the clock check (a warning,
        naming both clocks, when this host's and the server's differ by more than
        ``runyard.redis.clocks.CLOCK_WARN_SECONDS``); ``live_updates`` as the constructor
        takes it. Raises ConfigurationError."""
        store = cls(client, clock=clock, settings=settings, live_updates=live_updates)
        try:
            await store.preflight()
            await store._runner.check_clock()
        except BaseException:
            await store.aclose()  # closes live updates of its own; the client is the caller's
            raise
        return store

    @classmethod
    async def from_url(
        cls,
        url: str | None = None,
        *,
        clock: Clock | None = None,
        settings: RedisStoreSettings | None = None,
        live_updates: bool | AsyncRedisUpdates | None = None,
    ) -> AsyncRedisStateStore:
        """Build a client (redis-py's retries off) for ``url`` or ``settings.dsn``, then open
        (``live_updates`` as the constructor takes it).

        The store owns that client and closes it in ``aclose()``. Raises ConfigurationError.
        """
        settings = settings or RedisStoreSettings()
        client = client_from_url(url, settings, state_unavailable)
        store = cls(
            client, clock=clock, settings=settings, owns_client=True, live_updates=live_updates
        )
        try:
            await store.preflight()
            await store._runner.check_clock()
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

        Each call carries a write id the run keeps; a lost reply is settled by reading it back
        (runyard.writes). Raises StateConflictError, LeaseLostError, StatePersistenceError
        (``too_large`` and ``invalid`` before anything is sent), StoreOutcomeUnknown.
        """
        check_write_guards(expected_version, fence, version_required=True)
        check_status(status)
        stored = dump_json(blob, max_bytes=self.settings.max_value_bytes, what="run blob")
        if session_id is not None:
            validate_identifier(session_id, "session_id")
        return await self._put_run(
            key, stored, expected_version, status, session_id, fence, mint_write_id()
        )

    async def _put_run(
        self,
        key: RunKey,
        stored: str,
        expected_version: int,
        status: str | None,
        session_id: str | None,
        fence: int | None,
        write_id: str,
        sends: int = 2,
    ) -> RunRecord:
        # ``write_id`` is this call's, the same on a re-send: the run keeps its last write's
        # id, so a read-back tells this write from another writer's (runyard.writes).
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
            now_arg(self.clock),
            DEFAULT_STATUS,
            key.run_id,
            write_id,
            *self._terminal_hint_args(key, status),
        ]
        try:
            reply = await self._runner.script(
                STATE_SCRIPTS["put_run"], keys, args, idempotent=False
            )
        except ReplyLost as lost:
            return await self._settle_put(
                lost,
                (keys[0], k.run_tombstone(key.run_id)),
                partial(decode_run, key.tenant, key.run_id),
                partial(
                    self._put_run,
                    key,
                    stored,
                    expected_version,
                    status,
                    session_id,
                    fence,
                    write_id,
                    1,
                ),
                ("run", key.run_id, expected_version, write_id),
                may_resend=sends > 1,
            )
        if sends < 2 and text(reply[0]) == "conflict":
            # A re-send that found no trace of this write at the next version: another write
            # took it. Further on, this write may have landed first and been written over.
            raise resent_refusal("run", key.run_id, expected_version, int(reply[1]))
        raise_refusal(reply, key.run_id, expected_version)
        return decode_run(key.tenant, key.run_id, pairs(reply[1:]), blob=load_json(stored))

    async def patch_run(
        self,
        key: RunKey,
        delta: CounterDelta,
        *,
        status: str | None = None,
        fence: int | None = None,
    ) -> RunRecord:
        """Add ``delta`` to the counters and bump the version.

        A lost reply is settled by reading back this patch's write id: found, the run is
        returned; not found, the patch is never sent again (it may still land, or have landed
        and been written over). Raises StateNotFoundError, LeaseLostError,
        StoreOutcomeUnknown.
        """
        check_write_guards(None, fence)
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
            now_arg(self.clock),
            write_id := mint_write_id(),
            *self._terminal_hint_args(key, status),
        ]
        keys = [k.run(key.run_id), k.lease(key.run_id)]
        try:
            reply = await self._runner.script(
                STATE_SCRIPTS["patch_run"], keys, args, idempotent=False
            )
        except ReplyLost as lost:
            return await self._run_written_by(lost, key, write_id, "patch_run")
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
        """Delete the run and its event log (one script); return whether it existed.

        The run's last write id stays for runyard.writes.TOMBSTONE_SECONDS (its tombstone), so
        a put whose reply was lost is not sent again over the delete. Raises
        StateConflictError, LeaseLostError, StoreOutcomeUnknown.
        """
        check_write_guards(expected_version, fence)
        k = self._keys(key.tenant)
        args = [
            "" if expected_version is None else expected_version,
            "" if fence is None else fence,
            now_arg(self.clock),
            key.run_id,
            TOMBSTONE_SECONDS,
        ]
        log = EventKeys(self.settings.namespace, key.tenant, key.run_id)
        keys = [
            k.run(key.run_id),
            k.runs,
            k.lease(key.run_id),
            log.log,
            log.ids,
            k.run_tombstone(key.run_id),
        ]
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
        more match, to know whether there is a next page) is found, or, with a filter, until
        ``_LIST_SCAN`` runs (at least ``limit + 1``) have been read: then the page may hold
        fewer than ``limit`` runs (none, even) and ``next_cursor`` goes on from there.
        """
        validate_identifier(tenant, "tenant")
        check_status(status)
        if session_id is not None:
            validate_identifier(session_id, "session_id")
        check_limit(limit)
        after = decode_cursor(cursor, tenant)
        k = self._keys(tenant)
        filters = [status or "", session_id or ""]
        matches: list[RunRecord] = []
        budget = max(_LIST_SCAN, limit + 1)
        scanned = 0
        exhausted = False
        while len(matches) <= limit and scanned < budget:
            want = limit + 1 - len(matches)
            if status or session_id:
                want = min(max(want, _LIST_BATCH), budget - scanned)
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
                exhausted = True
                break
            ids = [text(member) for member, _ in batch]
            reply = await self._runner.script(
                STATE_SCRIPTS["read_runs"], [k.run(i) for i in ids], filters, idempotent=True
            )
            for run_id, fields in zip(ids, reply, strict=True):
                if fields:
                    matches.append(decode_run(tenant, run_id, pairs(fields)))
            after = int(batch[-1][1])
            scanned += len(batch)
            if len(batch) < want:
                exhausted = True
                break
        if len(matches) > limit:
            page = matches[:limit]
            return RunPage(items=page, next_cursor=encode_cursor(page[-1].seq, tenant))
        # The scan budget ran out before the page filled: go on after the last run read.
        return RunPage(
            items=matches, next_cursor=None if exhausted else encode_cursor(after, tenant)
        )

    async def aclose(self) -> None:
        """Close the live updates the store opened, and the client if the store built it
        (``from_url``); an injected one is the caller's to close. Every call after it is
        refused (the store's unavailable error, nothing sent)."""
        self._runner.closed = True
        if self._owns_updates and self.live_updates is not None:
            self._owns_updates = False
            await self.live_updates.aclose()
        if self._owns_client:
            await self._client.aclose()
