"""AsyncRedisQueueRetention: cancel, purge_dead and prune of AsyncRedisWorkQueue."""

from __future__ import annotations

from runyard._async.redis.queue_reads import AsyncRedisQueueReads
from runyard.errors import ItemLeasedError, StoreOutcomeUnknown
from runyard.keys import validate_identifier
from runyard.redis.common import ReplyLost, text
from runyard.validation import check_limit, check_older_than

__all__ = ["AsyncRedisQueueRetention"]


class AsyncRedisQueueRetention(AsyncRedisQueueReads):
    """Mixin for AsyncRedisWorkQueue: removing items and idle tenants, one script each, its
    work bounded by its arguments."""

    async def cancel(self, tenant: str, item_id: str) -> bool:
        """Remove a ready, delayed or dead item (its dedupe key is freed): True; False when
        the item is unknown or already completed.

        Raises ItemLeasedError for a leased item (nothing changes); StoreOutcomeUnknown when
        the reply is lost (sent again, it could not tell a cancel that landed from an item
        that was gone).
        """
        validate_identifier(tenant, "tenant")
        validate_identifier(item_id, "item_id")
        try:
            reply = await self._script(
                "cancel", [tenant, item_id], idempotent=False, keys=self._item_keys(tenant, item_id)
            )
        except ReplyLost as lost:
            raise StoreOutcomeUnknown(f"cancel of {item_id!r}: {lost}") from lost
        status = text(reply[0])
        if status == "leased":
            raise ItemLeasedError(item_id, text(reply[1]))
        return status == "ok"

    async def purge_dead(self, tenant: str, *, older_than: float = 0.0, limit: int = 100) -> int:
        """Delete up to ``limit`` of the tenant's dead letters that died at least
        ``older_than`` seconds ago (the server's clock), oldest first; return how many.

        Raises InvalidArgumentError (before sending), StoreOutcomeUnknown.
        """
        validate_identifier(tenant, "tenant")
        older_than = check_older_than(older_than)
        check_limit(limit)
        args = [tenant, self._now_arg(), repr(older_than), limit]
        try:
            return int(await self._script("purge_dead", args, idempotent=False))
        except ReplyLost as lost:
            raise StoreOutcomeUnknown(f"purge_dead of {tenant!r}: {lost}") from lost

    async def prune(self, *, limit: int = 100) -> int:
        """Forget the rotation entries of up to ``limit`` tenants that hold no item in any
        state, least recently served first (ties by name); return how many. A later enqueue
        for such a tenant serves it as a new one.

        Bounded: the script reads only tenants listed as idle when their last item went.
        Raises StoreOutcomeUnknown.
        """
        check_limit(limit)
        try:
            return int(await self._script("prune", [limit], idempotent=False))
        except ReplyLost as lost:
            raise StoreOutcomeUnknown(f"prune: {lost}") from lost
