"""prune and prune_processed for the Redis stores: bounded steps, one script per slot."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from runyard._async.redis.scripts import AsyncScriptRunner
from runyard.clock import Clock
from runyard.redis.clocks import server_seconds
from runyard.redis.common import now_arg, text, timestamp
from runyard.redis.executions import (
    EXECUTION_SCRIPTS,
    ExecutionKeys,
    split_processed_member,
)
from runyard.redis.flavours import AsyncRedisClient, AsyncRedisCluster
from runyard.redis.keys import StateKeys
from runyard.redis.retention import (
    PRUNE_SCAN_COUNT,
    PRUNE_SCAN_STEPS,
    PruneCandidates,
    ScanWalk,
    state_pattern,
)
from runyard.redis.scripts import STATE_SCRIPTS
from runyard.redis.settings import RedisStoreSettings
from runyard.validation import check_limit, check_older_than

__all__ = ["AsyncRedisExecutionRetention", "AsyncRedisStateRetention"]

# The members of one session run set prune checks in one visit at most.
_SESSION_BATCH = 200


class AsyncRedisStateRetention:
    """Mixin for AsyncRedisStateStore: ``prune`` of lease hashes that are not live and of
    session run sets left without a run, found by a bounded SCAN step (the store keeps the
    cursor, so successive calls walk the key space once per pass)."""

    settings: RedisStoreSettings
    clock: Clock | None
    _client: AsyncRedisClient
    _runner: AsyncScriptRunner
    _prune_walk: ScanWalk | None = None

    async def prune(self, *, limit: int = 100) -> int:
        """Remove up to ``limit`` entries: lease hashes that were released or lapsed, and
        session run sets whose runs no longer name the session; return how many.

        Run leases have no TTL on Redis (the hash keeps the fencing epoch), so prune deletes
        them; each tenant keeps the highest epoch deleted (``lease-floor``), so the next lease
        of that run gets a higher one. A call takes at most 8 SCAN steps of COUNT 500 over the
        server (each node of a cluster in turn) and stops at ``limit`` candidates; a pass over
        the key space may take several calls, so a call that removes nothing does not mean
        nothing is left. Raises InvalidArgumentError.
        """
        check_limit(limit)
        namespace = self.settings.namespace
        candidates = PruneCandidates(namespace, limit)
        for _ in range(PRUNE_SCAN_STEPS):
            keys, wrapped = await self._scan_step(state_pattern(namespace))
            if candidates.add(keys) or wrapped:
                break
        removed = 0
        for tenant, run_ids in candidates.leases.items():
            k = StateKeys(namespace, tenant)
            # Safe to send again: deleting a lease that is not live a second time is a no-op.
            deleted = await self._runner.script(
                STATE_SCRIPTS["prune_leases"],
                [k.lease_floor, *(k.lease(run_id) for run_id in run_ids)],
                [now_arg(self.clock)],
                idempotent=True,
            )
            removed += int(deleted)
        for tenant, session_id in candidates.sessions:
            removed += await self._prune_session_runs(StateKeys(namespace, tenant), session_id)
        return removed

    async def _scan_step(self, pattern: str) -> tuple[list[Any], bool]:
        """One SCAN step from where the store's walk stands; True when a whole pass ended."""
        if self._prune_walk is None:
            self._prune_walk = ScanWalk()
        walk, client = self._prune_walk, self._client
        scan = partial(client.scan, cursor=walk.cursor, match=pattern, count=PRUNE_SCAN_COUNT)
        if isinstance(client, AsyncRedisCluster):
            nodes = sorted(client.get_primaries(), key=lambda n: str(n.name))  # type: ignore[no-untyped-call,unused-ignore]
            node = nodes[walk.node % len(nodes)]
            # A cluster's SCAN replies ({node name: cursor}, keys).
            reply: Any = await self._runner.call(partial(scan, target_nodes=node), idempotent=True)
            cursors, keys = reply
            return list(keys), walk.advance(cursors[node.name], len(nodes))
        cursor, keys = await self._runner.call(scan, idempotent=True)
        return list(keys), walk.advance(cursor)

    async def _prune_session_runs(self, k: StateKeys, session_id: str) -> int:
        """Drop the stale members of one session run set (one batch); 1 if the set is gone."""
        members_key = k.session_runs(session_id)
        _, members = await self._runner.call(
            partial(self._client.sscan, members_key, 0, count=_SESSION_BATCH), idempotent=True
        )
        run_ids = sorted(text(m) for m in members)[:_SESSION_BATCH]
        if not run_ids:
            return 0
        gone = await self._runner.script(
            STATE_SCRIPTS["prune_session_runs"],
            [members_key, *(k.run(run_id) for run_id in run_ids)],
            [session_id, *run_ids],
            idempotent=True,
        )
        return int(gone)


class AsyncRedisExecutionRetention:
    """Mixin for AsyncRedisStore: ``prune_processed`` through each shard's processed-ages
    index (a ZSET scored by when each mark was made)."""

    clock: Clock | None
    keys: ExecutionKeys
    _client: AsyncRedisClient
    _runner: AsyncScriptRunner

    async def prune_processed(self, *, older_than: float, limit: int = 100) -> int:
        """Delete up to ``limit`` processed marks recorded at least ``older_than`` seconds ago,
        oldest first across shards; return how many.

        One pipelined read of at most ``limit`` index entries per shard, then one script per
        shard with marks to delete (it re-checks each mark's time, so a mark made again since
        the read is kept). Marks made before the index existed (runyard < this version) are
        not in it and are never pruned. Raises InvalidArgumentError.
        """
        age = check_older_than(older_than)
        check_limit(limit)
        cutoff = await self._now() - age
        shards = range(self.keys.shards)
        per_shard: Sequence[Any] = await self._runner.call(
            partial(self._oldest_marks, shards, timestamp(cutoff), limit), idempotent=True
        )
        candidates = sorted(
            (float(score), text(member), shard)
            for shard, marks in zip(shards, per_shard, strict=True)
            for member, score in marks
        )[:limit]
        by_shard: dict[int, list[str]] = {}
        for _, member, shard in candidates:
            by_shard.setdefault(shard, []).append(member)
        deleted = 0
        for shard, members in sorted(by_shard.items()):
            marks = [split_processed_member(member) for member in members]
            args: list[Any] = [timestamp(cutoff)]
            for member, (_, event_id) in zip(members, marks, strict=True):
                args += [member, event_id]
            count = await self._runner.script(
                EXECUTION_SCRIPTS["forget_processed"],
                [self.keys.processed_ages(shard), *(self.keys.processed(e) for e, _ in marks)],
                args,
                idempotent=True,
            )
            deleted += int(count)
        return deleted

    async def _now(self) -> float:
        """The injected clock's time, else the server's (TIME)."""
        if self.clock is not None:
            return float(self.clock.now())
        reply = await self._runner.call(self._client.time, idempotent=True)
        return server_seconds(reply)

    async def _oldest_marks(self, shards: range, cutoff: str, limit: int) -> list[Any]:
        async with self._client.pipeline(transaction=False) as pipe:
            for shard in shards:
                pipe.zrangebyscore(
                    self.keys.processed_ages(shard),
                    "-inf",
                    cutoff,
                    start=0,
                    num=limit,
                    withscores=True,
                )
            return list(await pipe.execute())
