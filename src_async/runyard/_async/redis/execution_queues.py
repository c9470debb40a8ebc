"""AsyncRedisExecutionQueues: the outbox, spawns, timers and trace rings of AsyncRedisStore."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runyard._async.redis.scripts import AsyncScriptRunner
from runyard._json import load_json
from runyard.clock import Clock
from runyard.errors import (
    StoreOutcomeUnknown,
)
from runyard.executions.models import (
    DueTimer,
    OutboxEntry,
    SpawnEntry,
    TraceEntry,
    TraceStep,
)
from runyard.executions.planning import (
    check_seconds,
    is_timer_path,
    trace_data,
)
from runyard.keys import validate_identifier
from runyard.redis.common import ReplyLost, text, timestamp
from runyard.redis.executions import (
    EXECUTION_SCRIPTS,
    ExecutionKeys,
    decode_entry,
    decode_spawn,
    decode_timer,
    decode_trace,
    step_json,
    timer_member,
)
from runyard.redis.flavours import (
    AsyncRedisClient,
)
from runyard.redis.settings import RedisStoreSettings
from runyard.validation import check_limit

__all__ = ["AsyncRedisExecutionQueues"]


class AsyncRedisExecutionQueues:
    """Mixin for AsyncRedisStore: what a commit queued (outbox entries, spawn intents, timers)
    and the trace rings, read and acknowledged per shard."""

    settings: RedisStoreSettings
    clock: Clock | None
    keys: ExecutionKeys
    _trace_max: int
    _client: AsyncRedisClient
    _runner: AsyncScriptRunner

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
        trace_data(step, self.settings.max_value_bytes)  # the data's own size, as elsewhere
        stored = step_json(step)
        now = "" if self.clock is None else timestamp(self.clock.now())
        try:
            index, recorded = await self._runner.script(
                EXECUTION_SCRIPTS["append_trace"],
                [self.keys.trace(execution_id), self.keys.trace_index(execution_id)],
                [now, stored, self._trace_max],
                idempotent=False,
            )
        except ReplyLost as lost:
            raise StoreOutcomeUnknown(f"append_trace of {execution_id!r}: {lost}") from lost
        return TraceEntry(index=int(index), recorded_at=float(text(recorded)), **load_json(stored))
