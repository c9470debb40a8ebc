"""AsyncRedisExecutionListing: list_executions of AsyncRedisStore, shard by shard through each
shard's listing index."""

from __future__ import annotations

from functools import partial
from typing import Any

from runyard._async.redis.scripts import AsyncScriptRunner
from runyard.executions.models import ExecutionPage, ExecutionSummary
from runyard.executions.planning import summary_matches
from runyard.keys import decode_cursor, encode_cursor, validate_identifier
from runyard.redis.common import text
from runyard.redis.executions import (
    SUMMARY_FIELDS,
    ExecutionKeys,
    decode_summary,
    listing_cursor,
    listing_position,
)
from runyard.redis.flavours import AsyncRedisClient
from runyard.validation import check_flag, check_limit

__all__ = ["AsyncRedisExecutionListing"]

_LIST_BATCH = 100
# What one list_executions call reads at most: index entries (or limit + 1, if more) and index
# batches (an empty shard costs a batch). Past either, the page ends with a cursor.
_LIST_SCAN = 300
_LIST_READS = 16


class AsyncRedisExecutionListing:
    """Mixin for AsyncRedisStore: ``list_executions``."""

    keys: ExecutionKeys
    _client: AsyncRedisClient
    _runner: AsyncScriptRunner

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
        check_flag(roots_only, "roots_only")
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
