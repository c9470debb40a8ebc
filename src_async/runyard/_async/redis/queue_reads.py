"""AsyncRedisQueueReads: the script runner, layout check and reads of AsyncRedisWorkQueue."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runyard._async.redis.scripts import AsyncScriptRunner
from runyard.clock import Clock
from runyard.errors import ConfigurationError, StoreOutcomeUnknown
from runyard.keys import validate_identifier
from runyard.models import DeadLetter, QueueStats, WorkItem
from runyard.policy import RECLAIM_PER_CLAIM, QueuePolicy
from runyard.redis.common import ReplyLost, layout_message, layout_refusal, text, timestamp
from runyard.redis.flavours import (
    AsyncRedisClient,
    ResponseError,
)
from runyard.redis.items import PROMOTE_BATCH, decode_dead_letter, decode_item
from runyard.redis.keys import QUEUE_LAYOUT, QueueKeys, segment
from runyard.redis.scripts import QUEUE_SCRIPTS
from runyard.redis.settings import RedisStoreSettings
from runyard.validation import check_limit

__all__ = ["STATS_SCAN", "AsyncRedisQueueReads"]

# Due (not yet promoted) items stats() reads to count their tenants; it counts them all.
STATS_SCAN = 1000


class AsyncRedisQueueReads:
    """Mixin for AsyncRedisWorkQueue: runs its scripts (refusing a namespace written in another
    key layout) and holds the reads that change nothing."""

    settings: RedisStoreSettings
    policy: QueuePolicy
    clock: Clock | None
    _client: AsyncRedisClient
    _runner: AsyncScriptRunner
    _queue_keys: QueueKeys
    _keys: list[str]

    def _claim_args(self, worker: str) -> list[Any]:
        """worker, now, lease_seconds, promote batch, reclaim count: a claim script's first
        arguments."""
        lease = timestamp(self.policy.lease_seconds)
        return [worker, self._now_arg(), lease, PROMOTE_BATCH, RECLAIM_PER_CLAIM]

    def _item_keys(self, tenant: str, item_id: str) -> list[str]:
        """An item's hash and its tenant's ready line: the keys a script told one item declares
        when it may move the item in or out of its line."""
        return [self._queue_keys.item(tenant, item_id), self._queue_keys.line(tenant)]

    def _now_arg(self) -> str:
        """``now`` for a script: the injected clock's reading, or '' for the server's TIME."""
        return "" if self.clock is None else timestamp(self.clock.now())

    async def _script(
        self, name: str, args: list[Any], *, idempotent: bool, keys: Sequence[str] = ()
    ) -> Any:
        """Run a queue script with the queue's keys, then ``keys``: the item hashes and ready
        lines it is told about (lua/queue/prelude.lua refuses any other it did not pick)."""
        try:
            reply = await self._runner.script(
                QUEUE_SCRIPTS[name], [*self._keys, *keys], args, idempotent=idempotent
            )
        except ResponseError as exc:
            refusal = layout_refusal(str(exc), self.settings.namespace)
            if refusal is not None:
                raise refusal from exc
            raise
        return reply

    async def check_layout(self) -> None:
        """Refuse a namespace written in another key layout; a fresh one gets this layout.

        Raises ConfigurationError naming both layout versions.
        """
        meta, legacy = self._keys[0], self._queue_keys.legacy_items

        async def read() -> tuple[Any, int]:
            return await self._client.hget(meta, "layout"), await self._client.exists(legacy)

        found, old = await self._runner.call(read, idempotent=True)
        if found is None and not old:
            # Nothing written yet: the stats script stamps the layout (and changes nothing else).
            await self.stats()
            return
        version = text(found) if found is not None else "1"
        if version != str(QUEUE_LAYOUT):
            raise ConfigurationError(
                layout_message(self.settings.namespace, version, str(QUEUE_LAYOUT))
            )

    async def _find(
        self, tenant: str, item_id: str, dedupe_key: str | None, lost: ReplyLost
    ) -> WorkItem | None:
        try:
            found = await self.get_item(tenant, item_id)
            if found is None and dedupe_key is not None:
                dedupe = self._keys[8]
                field = segment(tenant) + segment(dedupe_key)
                other = await self._runner.call(
                    lambda: self._client.hget(dedupe, field),
                    idempotent=True,
                )
                if other is not None:
                    found = await self.get_item(tenant, text(other))
        except Exception as exc:
            raise StoreOutcomeUnknown(f"{lost}; reading back failed too ({exc})") from lost
        return found

    async def get_item(self, tenant: str, item_id: str) -> WorkItem | None:
        """Return the item (ready, leased or dead), or None once completed or unknown.

        Raises ConfigurationError for a namespace written in another key layout.
        """
        validate_identifier(tenant, "tenant")
        validate_identifier(item_id, "item_id")
        reply = await self._script(
            "get_item",
            [tenant, item_id],
            idempotent=True,
            keys=[self._queue_keys.item(tenant, item_id)],
        )
        return None if reply is None else decode_item(reply)

    async def dead_letters(self, tenant: str, *, limit: int = 100) -> list[DeadLetter]:
        """Return the tenant's dead-lettered items, oldest first."""
        validate_identifier(tenant, "tenant")
        check_limit(limit)
        reply = await self._script("dead_letters", [tenant, limit], idempotent=True)
        return [decode_dead_letter(r) for r in reply]

    async def stats(self) -> QueueStats:
        """Count the queue's items by state (due items not yet promoted count as ready).

        Bounded: due items are counted, not read; only the first ``STATS_SCAN`` of them are
        read to find their tenants. So ``tenants`` is exact while at most ``STATS_SCAN`` due
        items wait for promotion; past that it can be low (never high): it misses the tenants
        whose due items all come after the first ``STATS_SCAN``. The other counts are exact.
        """
        ready, delayed, leased, dead, tenants = await self._script(
            "stats", [self._now_arg(), STATS_SCAN], idempotent=True
        )
        return QueueStats(
            ready=int(ready),
            delayed=int(delayed),
            leased=int(leased),
            dead=int(dead),
            tenants=int(tenants),
        )
