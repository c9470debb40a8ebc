"""AsyncRedisQueueBatched: the batched calls of AsyncRedisWorkQueue, one script each."""

from __future__ import annotations

from collections.abc import Collection

from runyard._async.redis.queue_reads import AsyncRedisQueueReads
from runyard.errors import RunyardError, StoreOutcomeUnknown
from runyard.keys import validate_identifier
from runyard.models import Lease, NewItem, WorkItem
from runyard.queue_args import check_items, check_leases
from runyard.redis.common import ReplyLost, timestamp
from runyard.redis.items import decode_item, decode_lease, item_args, retry_table, settle_error
from runyard.validation import check_limit

__all__ = ["AsyncRedisQueueBatched"]


def _flat(targets: list[tuple[str, str, int]]) -> list[str]:
    return [value for tenant, item_id, token in targets for value in (tenant, item_id, str(token))]


class AsyncRedisQueueBatched(AsyncRedisQueueReads):
    """Mixin for AsyncRedisWorkQueue: ``enqueue_many``, ``claim_many``, ``heartbeat_many``,
    ``complete_many`` and ``release_many``, one script (one round trip) each, with per-item
    outcomes; at most 10,000 items per call (check_limit)."""

    def _target_keys(self, targets: list[tuple[str, str, int]], *, lines: bool) -> list[str]:
        """The item keys of ``targets``, then (``lines``) each of their tenants' lines once."""
        keys = [self._queue_keys.item(tenant, item_id) for tenant, item_id, _ in targets]
        if lines:
            keys += [
                self._queue_keys.line(tenant) for tenant in dict.fromkeys(t[0] for t in targets)
            ]
        return keys

    async def enqueue_many(self, tenant: str, items: Collection[NewItem]) -> list[WorkItem]:
        """Add every item, as ``enqueue`` would one by one (dedupe included), in order.

        Every item is checked before anything is sent (InvalidArgumentError,
        StatePersistenceError). A lost reply is sent once more when every item carries a
        retry identity (a caller's ``item_id`` or a ``dedupe_key``), else StoreOutcomeUnknown.
        """
        checked = check_items(tenant, items, self.settings.max_value_bytes)
        if not checked:
            return []
        args = [value for item in checked for value in item_args(item)]
        item_keys = [self._queue_keys.item(tenant, item.item_id) for item in checked]
        keys = [*item_keys, self._queue_keys.line(tenant)]
        identified = not any(item.anonymous for item in checked)
        for sends in (2, 1):
            try:
                reply = await self._script(
                    "enqueue_many", [tenant, self._now_arg(), *args], idempotent=False, keys=keys
                )
            except ReplyLost as lost:
                if not identified or sends == 1:
                    raise StoreOutcomeUnknown(f"enqueue_many to {tenant!r}: {lost}") from lost
                # Every item has an identity: sent again, the ones that landed come back as
                # they are.
                continue
            return [decode_item(r) for r in reply]
        raise AssertionError("unreachable")  # pragma: no cover

    async def claim_many(self, worker: str, *, limit: int) -> list[Lease]:
        """Lease up to ``limit`` due items in the rotation ``limit`` single claims would follow
        (after reclaiming up to RECLAIM_PER_CLAIM lapsed leases, as ``claim``).

        Raises StoreOutcomeUnknown when the reply is lost (``adopt`` finds what was leased).
        """
        validate_identifier(worker, "worker")
        check_limit(limit)
        args = [*self._claim_args(worker), limit, *retry_table(self.policy)]
        try:
            reply = await self._script("claim_many", args, idempotent=False)
        except ReplyLost as lost:
            raise StoreOutcomeUnknown(
                f"claim_many by {worker!r}: {lost}; adopt({worker!r}) returns what it leased"
            ) from lost
        return [decode_lease(r) for r in reply]

    async def heartbeat_many(self, leases: Collection[Lease]) -> list[Lease | RunyardError]:
        """Extend every lease: the renewed Lease, or that item's LeaseLostError or
        WorkItemNotFoundError. A lost reply is sent again (it extends the same leases)."""
        targets = check_leases(leases)
        if not targets:
            return []
        args = [
            self._now_arg(),
            timestamp(self.policy.lease_seconds),
            timestamp(self.policy.max_lease_seconds),
            *_flat(targets),
        ]
        reply = await self._script(
            "heartbeat_many", args, idempotent=True, keys=self._target_keys(targets, lines=False)
        )
        out: list[Lease | RunyardError] = []
        for (tenant, item_id, _), result in zip(targets, reply, strict=True):
            error = settle_error(result, tenant, item_id)
            out.append(error if error is not None else decode_lease(result[1]))
        return out

    async def _settle_many(self, mode: str, leases: Collection[Lease]) -> list[RunyardError | None]:
        targets = check_leases(leases)
        if not targets:
            return []
        args = [mode, self._now_arg(), timestamp(self.policy.max_lease_seconds), *_flat(targets)]
        try:
            keys = self._target_keys(targets, lines=mode == "release")
            reply = await self._script("settle_many", args, idempotent=False, keys=keys)
        except ReplyLost as lost:
            raise StoreOutcomeUnknown(f"{mode}_many of {len(targets)} items: {lost}") from lost
        return [
            settle_error(result, tenant, item_id)
            for (tenant, item_id, _), result in zip(targets, reply, strict=True)
        ]

    async def complete_many(self, leases: Collection[Lease]) -> list[RunyardError | None]:
        """Finish every item: None, or that item's LeaseLostError or WorkItemNotFoundError.

        Raises StoreOutcomeUnknown when the reply is lost (sent again, an item already
        finished reports WorkItemNotFoundError).
        """
        return await self._settle_many("complete", leases)

    async def release_many(self, leases: Collection[Lease]) -> list[RunyardError | None]:
        """Hand every item back to ready at once, its attempt not counted: None, or that
        item's error. Raises StoreOutcomeUnknown when the reply is lost."""
        return await self._settle_many("release", leases)
