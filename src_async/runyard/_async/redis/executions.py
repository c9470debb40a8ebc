"""AsyncRedisStore: the ExecutionStore on Redis or Redis Cluster, one script per commit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import uuid4

from runyard._async.closing import AsyncClosing
from runyard._async.redis.execution_listing import AsyncRedisExecutionListing
from runyard._async.redis.execution_queues import AsyncRedisExecutionQueues
from runyard._async.redis.retention import AsyncRedisExecutionRetention
from runyard._async.redis.scripts import AsyncScriptRunner, client_from_url
from runyard.capabilities import StoreCapabilities
from runyard.clock import Clock
from runyard.errors import (
    ConfigurationError,
    StoreConflict,
    StoreOutcomeUnknown,
)
from runyard.executions.models import (
    DEFAULT_TRACE_MAX,
    Emit,
    Execution,
    SpawnIntent,
    TimerOp,
    TraceStep,
)
from runyard.executions.planning import (
    CommitPlan,
    check_trace_max,
    plan_commit,
)
from runyard.keys import validate_identifier
from runyard.redis.common import ReplyLost, state_unavailable, text
from runyard.redis.executions import (
    DEFAULT_SHARDS,
    EXECUTION_SCRIPTS,
    ExecutionKeys,
    check_shards,
    commit_args,
    conflict_from,
    decode_execution,
    is_fast_path,
    save_args,
)
from runyard.redis.flavours import (
    AsyncRedisClient,
    ResponseError,
)
from runyard.redis.settings import RedisStoreSettings

__all__ = ["AsyncRedisStore"]


class AsyncRedisStore(
    AsyncRedisExecutionQueues,
    AsyncRedisExecutionListing,
    AsyncRedisExecutionRetention,
    AsyncClosing,
):
    """An ExecutionStore on Redis or Redis Cluster.

    Build it with ``await AsyncRedisStore.open(client, ...)`` (runs ``preflight()``) or
    ``await AsyncRedisStore.from_url(url, ...)``; direct construction skips preflight. Every
    key is under ``settings.namespace``, split into ``shards`` hash-tagged shards (every store
    sharing a namespace must use the same count). Every commit is one script round trip; the
    store owns retries (see docs/redis.md and docs/executions.md).
    """

    capabilities = StoreCapabilities(version=1, retry_ids=True, deployment="multi_server")

    def __init__(
        self,
        client: AsyncRedisClient,
        *,
        clock: Clock | None = None,
        settings: RedisStoreSettings | None = None,
        shards: int = DEFAULT_SHARDS,
        trace_max: int = DEFAULT_TRACE_MAX,
        owns_client: bool = False,
    ) -> None:
        self.settings = settings or RedisStoreSettings()
        # None: the server's clock (TIME in the scripts) decides times and outbox seqs.
        self.clock = clock
        self.keys = ExecutionKeys(self.settings.namespace, check_shards(shards))
        self._trace_max = check_trace_max(trace_max)
        self._client = client
        self._owns_client = owns_client
        self._runner = AsyncScriptRunner(client, self.settings, state_unavailable)

    @classmethod
    async def open(
        cls,
        client: AsyncRedisClient,
        *,
        clock: Clock | None = None,
        settings: RedisStoreSettings | None = None,
        shards: int = DEFAULT_SHARDS,
        trace_max: int = DEFAULT_TRACE_MAX,
    ) -> AsyncRedisStore:
        """Return a store on ``client`` after ``preflight()``. Raises ConfigurationError."""
        store = cls(client, clock=clock, settings=settings, shards=shards, trace_max=trace_max)
        await store.preflight()
        await store.check_layout()
        return store

    @classmethod
    async def from_url(
        cls,
        url: str | None = None,
        *,
        clock: Clock | None = None,
        settings: RedisStoreSettings | None = None,
        shards: int = DEFAULT_SHARDS,
        trace_max: int = DEFAULT_TRACE_MAX,
    ) -> AsyncRedisStore:
        """Build a client (redis-py's retries off) for ``url`` or ``settings.dsn``, then open.

        The store owns that client and closes it in ``aclose()``. Raises ConfigurationError.
        """
        settings = settings or RedisStoreSettings()
        client = client_from_url(url, settings, state_unavailable)
        store = cls(
            client,
            clock=clock,
            settings=settings,
            shards=shards,
            trace_max=trace_max,
            owns_client=True,
        )
        try:
            await store.preflight()
            await store.check_layout()
        except BaseException:
            await store.aclose()
            raise
        return store

    @property
    def trace_max(self) -> int:
        """How many trace steps are kept per execution."""
        return self._trace_max

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(namespace={self.settings.namespace!r}, "
            f"shards={self.keys.shards}, trace_max={self._trace_max})"
        )

    async def preflight(self) -> None:
        """Refuse a server that may evict or forget data (see RedisStoreSettings.durable).

        Raises ConfigurationError naming the setting, its value and why; never sets anything.
        """
        await self._runner.preflight()

    async def check_layout(self) -> None:
        """Record the namespace's shard count on first use and refuse any other one.

        Every store sharing a namespace must use one shard count (it places executions and is
        encoded in outbox and spawn seqs). ``open()`` and ``from_url()`` call this; direct
        construction skips it. Raises ConfigurationError.
        """
        key, shards = self.keys.layout(), str(self.keys.shards)
        await self._runner.call(lambda: self._client.set(key, shards, nx=True), idempotent=True)
        stored = await self._runner.call(lambda: self._client.get(key), idempotent=True)
        if stored is not None and text(stored) != shards:
            raise ConfigurationError(
                f"namespace {self.keys.namespace!r} holds executions in {text(stored)} shards; "
                f"this store was opened with shards={shards}: open it with shards={text(stored)}"
            )

    # -- executions --------------------------------------------------------------------------
    async def load(self, execution_id: str) -> Execution | None:
        """Return a fresh copy of the execution (one ``HGETALL``), or None."""
        validate_identifier(execution_id, "execution_id")
        key = self.keys.execution(execution_id)
        raw = await self._runner.call(lambda: self._client.hgetall(key), idempotent=True)
        return decode_execution(execution_id, raw)

    async def load_for_event(
        self, execution_id: str, event_id: str
    ) -> tuple[Execution | None, bool]:
        """Return the execution (or None) and whether ``event_id`` was already processed,
        read in one pipelined round trip."""
        validate_identifier(execution_id, "execution_id")
        validate_identifier(event_id, "event_id")
        raw, member = await self._runner.call(
            lambda: self._read_for_event(execution_id, event_id), idempotent=True
        )
        return decode_execution(execution_id, raw), bool(member)

    async def _read_for_event(self, execution_id: str, event_id: str) -> list[Any]:
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.keys.execution(execution_id))
            pipe.sismember(self.keys.processed(execution_id), event_id)
            return list(await pipe.execute())

    async def save(self, exe: Execution) -> None:
        """Write ``exe`` iff the stored version is ``exe.version``; bump it in place.

        Raises StoreConflict, StatePersistenceError, StoreOutcomeUnknown.
        """
        await self.commit(exe)

    async def commit(
        self,
        exe: Execution,
        *,
        emits: Sequence[Emit] = (),
        processed_event_id: str | None = None,
        timers: Sequence[TimerOp] = (),
        spawns: Sequence[SpawnIntent] = (),
        trace: TraceStep | None = None,
    ) -> list[int]:
        """Write ``exe`` and everything it caused in one script; return the outbox seqs.

        A commit carrying only the execution (and perhaps ``processed_event_id``) takes the
        fast path (lua/executions/save.lua), anything more the full path
        (lua/executions/commit.lua); both are one round trip. A lost reply is settled by reading
        the execution back.
        Raises StoreConflict, StatePersistenceError, TypeError, ValueError, StoreOutcomeUnknown.
        """
        plan = plan_commit(
            exe,
            emits=emits,
            processed_event_id=processed_event_id,
            timers=timers,
            spawns=spawns,
            trace=trace,
            max_value_bytes=self.settings.max_value_bytes,
        )
        seqs = await self._send(plan, uuid4().hex, sends=2)
        exe.version = plan.execution.version + 1
        return seqs

    async def _send(
        self, plan: CommitPlan, commit_id: str, *, sends: int, resent: bool = False
    ) -> list[int]:
        # ``commit_id`` is this call's nonce, the same on a re-send: the scripts keep it on the
        # execution, so a read-back tells this commit from another worker's.
        exe = plan.execution
        now = None if self.clock is None else self.clock.now()
        fast = is_fast_path(plan)
        if fast:
            script = EXECUTION_SCRIPTS["save"]
            keys = self.keys.save_keys(exe.id)
            args = save_args(plan, now, commit_id)
        else:
            script = EXECUTION_SCRIPTS["commit"]
            keys = self.keys.commit_keys(exe.id)
            args = commit_args(
                plan,
                now,
                commit_id,
                shards=self.keys.shards,
                shard=self.keys.shard_of(exe.id),
                trace_max=self._trace_max,
            )
        try:
            reply = await self._runner.script(script, keys, args, idempotent=False)
        except ResponseError as exc:
            conflict = conflict_from(str(exc), exe.id, exe.version)
            if conflict is None:
                raise
            if resent:
                # The first send, whose reply was lost, may have landed since the read-back
                # (it was still running): only the commit id tells whose commit beat this one.
                return await self._settle(plan, commit_id, conflict, sends=0)
            raise conflict from None
        except ReplyLost as lost:
            return await self._settle(plan, commit_id, lost, sends=sends - 1)
        return [] if fast else [int(seq) for seq in reply]

    async def _settle(
        self, plan: CommitPlan, commit_id: str, cause: Exception, *, sends: int
    ) -> list[int]:
        """Read the execution back to learn whether this commit (``commit_id``) landed.

        Ours: it did (return the seqs it kept). Still at the expected version with a send
        left: it did not yet, send it again (the CAS makes that safe). At the next version but
        not ours: another worker's commit won, so ours never can (StoreConflict). Anything
        else: StoreOutcomeUnknown.
        """
        exe = plan.execution
        key = self.keys.execution(exe.id)
        try:
            raw = await self._runner.call(
                lambda: self._client.hmget(key, ["version", "commit_id", "seqs"]), idempotent=True
            )
        except Exception as exc:
            raise StoreOutcomeUnknown(
                f"{cause}; reading back to settle it failed too ({exc})"
            ) from cause
        version, stored_id, seqs = (None if v is None else text(v) for v in raw)
        found = int(version or "0")
        if stored_id == commit_id:
            return [int(seq) for seq in (seqs or "").split(",") if seq]
        if found == exe.version and sends > 0:
            return await self._send(plan, commit_id, sends=sends, resent=True)
        if found == exe.version + 1:
            raise StoreConflict(exe.id, exe.version, found) from None
        raise StoreOutcomeUnknown(
            f"commit of {exe.id!r}: {cause}, and the execution is now at version {found} "
            "without this commit's id; load it and decide"
        ) from cause

    async def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Return whether a commit of the execution marked ``event_id`` processed."""
        validate_identifier(execution_id, "execution_id")
        validate_identifier(event_id, "event_id")
        key = self.keys.processed(execution_id)
        member = await self._runner.call(
            lambda: self._client.sismember(key, event_id), idempotent=True
        )
        return bool(member)

    async def aclose(self) -> None:
        """Close the client if the store built it (``from_url``); an injected one is the
        caller's to close. Every call after it is refused (StatePersistenceError
        "unavailable", nothing sent)."""
        self._runner.closed = True
        if self._owns_client:
            await self._client.aclose()
