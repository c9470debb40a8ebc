"""AsyncRedisStore: the ExecutionStore on Redis or Redis Cluster, one script per commit."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any
from uuid import uuid4

from runyard._async.closing import AsyncClosing
from runyard._async.redis.scripts import AsyncScriptRunner, client_from_url
from runyard._checks import check_limit
from runyard._json import dump_json, load_json
from runyard.capabilities import StoreCapabilities
from runyard.clock import Clock, SystemClock
from runyard.errors import (
    ConfigurationError,
    StatePersistenceError,
    StoreConflict,
    StoreOutcomeUnknown,
)
from runyard.executions.models import (
    DEFAULT_TRACE_MAX,
    DueTimer,
    Emit,
    Execution,
    ExecutionPage,
    ExecutionSummary,
    OutboxEntry,
    SpawnEntry,
    SpawnIntent,
    TimerOp,
    TraceEntry,
    TraceStep,
)
from runyard.executions.planning import (
    CommitPlan,
    check_seconds,
    check_trace_max,
    is_timer_path,
    plan_commit,
    summary_matches,
)
from runyard.keys import decode_cursor, encode_cursor, validate_identifier
from runyard.redis.common import ReplyLost, text, timestamp
from runyard.redis.executions import (
    DEFAULT_SHARDS,
    EXECUTION_SCRIPTS,
    SUMMARY_FIELDS,
    ExecutionKeys,
    check_shards,
    commit_args,
    conflict_from,
    decode_entry,
    decode_execution,
    decode_spawn,
    decode_summary,
    decode_timer,
    decode_trace,
    is_fast_path,
    listing_cursor,
    listing_position,
    save_args,
    timer_member,
)
from runyard.redis.flavours import (
    AsyncRedisClient,
    ResponseError,
)
from runyard.redis.settings import RedisStoreSettings

__all__ = ["AsyncRedisStore"]

_LIST_BATCH = 100
# What one list_executions call reads at most: index entries (or limit + 1, if more) and index
# batches (an empty shard costs a batch). Past either, the page ends with a cursor.
_LIST_SCAN = 300
_LIST_READS = 16


def _unavailable(message: str) -> StatePersistenceError:
    return StatePersistenceError(message, reason="unavailable")


class AsyncRedisStore(AsyncClosing):
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
        self.clock = clock or SystemClock()
        self.keys = ExecutionKeys(self.settings.namespace, check_shards(shards))
        self._trace_max = check_trace_max(trace_max)
        self._client = client
        self._owns_client = owns_client
        self._runner = AsyncScriptRunner(client, self.settings, _unavailable)

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
        client = client_from_url(url, settings)
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
        now = self.clock.now()
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

    async def list_executions(
        self,
        *,
        status: str | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """Return a page of matching executions, shard by shard in creation order.

        Walks each shard's listing index (an update never moves an execution, so a walk never
        skips or repeats one), then reads the summaries of a batch in one pipelined round trip.
        One call reads at most ``max(limit + 1, 300)`` index entries and ``16`` index batches:
        a filter that matches little gives a short (even empty) page whose cursor continues
        after the last entry read.
        """
        check_limit(limit)
        if status is not None:
            validate_identifier(status, "status")
        if definition_id is not None:
            validate_identifier(definition_id, "definition_id")
        shard, after = listing_position(decode_cursor(cursor))
        filtered = status is not None or definition_id is not None or roots_only
        matches: list[tuple[int, int, ExecutionSummary]] = []
        budget, reads = max(limit + 1, _LIST_SCAN), _LIST_READS
        while shard < self.keys.shards and len(matches) <= limit and budget > 0 and reads > 0:
            want = limit + 1 - len(matches)
            if filtered:
                want = max(want, _LIST_BATCH)
            want = min(want, budget)
            read_index = partial(
                self._client.zrangebyscore,
                self.keys.index(shard),
                f"({after}",
                "+inf",
                start=0,
                num=want,
                withscores=True,
            )
            batch: list[Any] = await self._runner.call(read_index, idempotent=True)
            budget, reads = budget - len(batch), reads - 1
            if batch:
                ids = [text(member) for member, _ in batch]
                rows = await self._runner.call(partial(self._read_summaries, ids), idempotent=True)
                for (member, score), values in zip(batch, rows, strict=True):
                    summary = decode_summary(text(member), values)
                    if summary is not None and summary_matches(
                        summary, status, definition_id, roots_only
                    ):
                        matches.append((shard, int(score), summary))
                after = int(batch[-1][1])
            if len(batch) < want:
                shard, after = shard + 1, 0
        page = matches[:limit]
        if len(matches) > limit:
            next_cursor: str | None = encode_cursor(listing_cursor(page[-1][0], page[-1][1]))
        elif shard < self.keys.shards:
            # Stopped by the budget: continue after the last entry read.
            next_cursor = encode_cursor(listing_cursor(shard, after))
        else:
            next_cursor = None
        return ExecutionPage(items=[s for _, _, s in page], next_cursor=next_cursor)

    async def _read_summaries(self, ids: list[str]) -> list[Any]:
        async with self._client.pipeline(transaction=False) as pipe:
            for execution_id in ids:
                pipe.hmget(self.keys.execution(execution_id), list(SUMMARY_FIELDS))
            return list(await pipe.execute())

    # -- outbox and spawns -------------------------------------------------------------------
    async def _each_shard(self, queue: Callable[[Any, int], object]) -> list[Any]:
        """One pipelined round trip (one per node on a cluster) over every shard."""
        async with self._client.pipeline(transaction=False) as pipe:
            for shard in range(self.keys.shards):
                queue(pipe, shard)
            return list(await pipe.execute())

    async def pending_outbox(self, limit: int = 100) -> list[OutboxEntry]:
        """Return up to ``limit`` unacknowledged outbox entries, oldest first (by seq)."""
        check_limit(limit)
        replies = await self._runner.call(
            lambda: self._each_shard(lambda p, k: p.zrange(self.keys.outbox(k), 0, limit - 1)),
            idempotent=True,
        )
        entries = [decode_entry(member) for reply in replies for member in reply]
        return sorted(entries, key=lambda e: e.seq)[:limit]

    async def ack_outbox(self, seq: int) -> bool:
        """Remove the outbox entry ``seq``; return whether it was pending."""
        return await self._ack(seq, self.keys.outbox)

    async def pending_spawns(self, limit: int = 100) -> list[SpawnEntry]:
        """Return up to ``limit`` unacknowledged spawn entries, oldest first (by seq)."""
        check_limit(limit)
        replies = await self._runner.call(
            lambda: self._each_shard(lambda p, k: p.zrange(self.keys.spawns(k), 0, limit - 1)),
            idempotent=True,
        )
        entries = [decode_spawn(member) for reply in replies for member in reply]
        return sorted(entries, key=lambda e: e.seq)[:limit]

    async def ack_spawn(self, seq: int) -> bool:
        """Remove the spawn entry ``seq``; return whether it was pending."""
        return await self._ack(seq, self.keys.spawns)

    async def _ack(self, seq: int, index: Callable[[int], str]) -> bool:
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
            return False
        key = index(self.keys.shard_of_seq(seq))
        # Removing by score is idempotent: a resend after a lost reply changes nothing more.
        removed = await self._runner.call(
            lambda: self._client.zremrangebyscore(key, seq, seq), idempotent=True
        )
        return bool(removed)

    # -- timers ------------------------------------------------------------------------------
    async def due_timers(self, now: float, limit: int = 100) -> list[DueTimer]:
        """Return up to ``limit`` timers due at ``now``, earliest first (ties by execution id,
        then path). They stay scheduled until deleted."""
        now = check_seconds(now, "now")
        check_limit(limit)
        at = timestamp(now)
        replies = await self._runner.call(
            lambda: self._each_shard(
                lambda p, k: p.zrangebyscore(
                    self.keys.timers(k), "-inf", at, start=0, num=limit, withscores=True
                )
            ),
            idempotent=True,
        )
        found = {(m, s) for reply in replies for m, s in reply}
        # A shard cut at `limit` may hold more timers at its last score: fetch those ties too.
        cut = [(k, reply[-1][1]) for k, reply in enumerate(replies) if len(reply) >= limit]
        if cut:
            ties = await self._runner.call(
                lambda: self._ties(cut),
                idempotent=True,
            )
            found.update((m, s) for reply in ties for m, s in reply)
        due = sorted(
            (decode_timer(m, s) for m, s in found),
            key=lambda t: (t.fire_at, t.execution_id, t.path),
        )
        return due[:limit]

    async def _ties(self, cut: list[tuple[int, float]]) -> list[Any]:
        async with self._client.pipeline(transaction=False) as pipe:
            for shard, score in cut:
                at = timestamp(score)
                pipe.zrangebyscore(self.keys.timers(shard), at, at, withscores=True)
            return list(await pipe.execute())

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> bool:
        """Delete the timer iff its stored fire time is still ``fire_at`` (one script)."""
        validate_identifier(execution_id, "execution_id")
        fire_at = check_seconds(fire_at, "fire_at")
        if not is_timer_path(path):
            return False
        key = self.keys.timers(self.keys.shard_of(execution_id))
        reply = await self._runner.script(
            EXECUTION_SCRIPTS["delete_timer"],
            [key],
            [timer_member(execution_id, path), timestamp(fire_at)],
            idempotent=True,
        )
        return bool(int(reply))

    # -- trace -------------------------------------------------------------------------------
    async def read_trace(self, execution_id: str) -> list[TraceEntry]:
        """Return the execution's kept trace entries (at most ``trace_max``), oldest first."""
        validate_identifier(execution_id, "execution_id")
        key = self.keys.trace(execution_id)
        items = await self._runner.call(
            lambda: self._client.lrange(key, -self._trace_max, -1), idempotent=True
        )
        return [decode_trace(item) for item in items]

    async def append_trace(self, execution_id: str, step: TraceStep) -> TraceEntry:
        """Record ``step`` with the execution's next index (one script); return the entry.

        Raises TypeError, StatePersistenceError, StoreOutcomeUnknown.
        """
        validate_identifier(execution_id, "execution_id")
        if not isinstance(step, TraceStep):
            raise TypeError(f"a trace step must be a TraceStep, not {type(step).__name__}")
        stored = dump_json(
            {"event_id": step.event_id, "event_name": step.event_name, "data": step.data},
            max_bytes=self.settings.max_value_bytes,
            what="trace data",
        )
        now = self.clock.now()
        try:
            index = await self._runner.script(
                EXECUTION_SCRIPTS["append_trace"],
                [self.keys.trace(execution_id), self.keys.trace_index(execution_id)],
                [timestamp(now), stored, self._trace_max],
                idempotent=False,
            )
        except ReplyLost as lost:
            raise StoreOutcomeUnknown(f"append_trace of {execution_id!r}: {lost}") from lost
        return TraceEntry(index=int(index), recorded_at=now, **load_json(stored))

    async def aclose(self) -> None:
        """Close the client if the store built it (``from_url``); an injected one is the
        caller's to close."""
        if self._owns_client:
            await self._client.aclose()
