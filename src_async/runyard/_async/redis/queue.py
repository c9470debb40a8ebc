"""AsyncRedisWorkQueue: tenant-fair work items with fenced leases on Redis, one script each."""

from __future__ import annotations

from typing import Any

from runyard._async.closing import AsyncClosing
from runyard._async.redis.queue_batched import AsyncRedisQueueBatched
from runyard._async.redis.queue_retention import AsyncRedisQueueRetention
from runyard._async.redis.scripts import AsyncScriptRunner, client_from_url
from runyard._async.redis.wakeup import AsyncRedisWakeup
from runyard.capabilities import StoreCapabilities
from runyard.clock import Clock
from runyard.errors import QueueUnavailableError, StoreOutcomeUnknown, WorkItemNotFoundError
from runyard.keys import validate_identifier
from runyard.models import Lease, WorkItem
from runyard.policy import QueuePolicy
from runyard.queue_args import check_item
from runyard.redis.common import ReplyLost, text, timestamp
from runyard.redis.flavours import AsyncRedisClient
from runyard.redis.items import (
    decode_item,
    decode_lease,
    item_args,
    raise_settle_refusal,
    retry_table,
)
from runyard.redis.keys import QueueKeys
from runyard.redis.settings import RedisStoreSettings
from runyard.validation import check_failure, check_limit, settle_target

__all__ = ["AsyncRedisWorkQueue"]

# Index entries one adopt script reads at most (lapsed leases it steps over included).
_ADOPT_SCAN = 1000


class AsyncRedisWorkQueue(AsyncRedisQueueBatched, AsyncRedisQueueRetention, AsyncClosing):
    """A WorkQueue on Redis or Redis Cluster; one queue (one namespace) lives in one slot.

    Build it with ``await AsyncRedisWorkQueue.open(client, ...)`` (runs ``preflight()``, checks
    the key layout and the clock offset) or ``await AsyncRedisWorkQueue.from_url(url, ...)``;
    direct construction skips those checks. Claims, heartbeats and settles are one script each,
    fenced on the lease token. Time is the server's (``TIME`` in the scripts) unless a ``clock``
    is injected (tests, the conformance kit).
    """

    capabilities = StoreCapabilities(
        version=1,
        fenced_writes=True,
        retry_ids=True,
        atomic_settle=True,
        recovery=True,
        batched_operations=True,
        deployment="multi_server",
    )

    def __init__(
        self,
        client: AsyncRedisClient,
        *,
        policy: QueuePolicy | None = None,
        clock: Clock | None = None,
        settings: RedisStoreSettings | None = None,
        owns_client: bool = False,
    ) -> None:
        self.settings = settings or RedisStoreSettings()
        self.policy = policy or QueuePolicy()
        self.clock = clock
        self._client = client
        self._owns_client = owns_client
        self._runner = AsyncScriptRunner(client, self.settings, QueueUnavailableError)
        self._queue_keys = QueueKeys(self.settings.namespace)
        self._keys = self._queue_keys.all()

    @classmethod
    async def open(
        cls,
        client: AsyncRedisClient,
        *,
        policy: QueuePolicy | None = None,
        clock: Clock | None = None,
        settings: RedisStoreSettings | None = None,
    ) -> AsyncRedisWorkQueue:
        """Return a queue on ``client`` after ``preflight()`` and the layout and clock checks.

        Raises ConfigurationError (a refused server, a namespace in another key layout).
        """
        queue = cls(client, policy=policy, clock=clock, settings=settings)
        await queue.preflight()
        await queue.check_layout()
        await queue._runner.check_clock()
        return queue

    @classmethod
    async def from_url(
        cls,
        url: str | None = None,
        *,
        policy: QueuePolicy | None = None,
        clock: Clock | None = None,
        settings: RedisStoreSettings | None = None,
    ) -> AsyncRedisWorkQueue:
        """Build a client (redis-py's retries off) for ``url`` or ``settings.dsn``, then open.

        The queue owns that client and closes it in ``aclose()``. Raises ConfigurationError.
        """
        settings = settings or RedisStoreSettings()
        client = client_from_url(url, settings)
        queue = cls(client, policy=policy, clock=clock, settings=settings, owns_client=True)
        try:
            await queue.preflight()
            await queue.check_layout()
            await queue._runner.check_clock()
        except BaseException:
            await queue.aclose()
            raise
        return queue

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(namespace={self.settings.namespace!r}, policy={self.policy!r})"
        )

    async def open_wakeup(self) -> AsyncRedisWakeup | None:
        """The wake-up an idle worker of this queue blocks on (``BLPOP`` on its wake key), on
        a client of its own with this queue's connection settings (``AsyncRedisWakeup.beside``;
        None on a cluster client). A worker given no ``wakeup`` opens it when it starts and
        closes it when it stops."""
        return AsyncRedisWakeup.beside(self._client, self.settings)

    async def preflight(self) -> None:
        """Refuse a server that may evict or forget data (see RedisStoreSettings.durable).

        Raises ConfigurationError naming the setting, its value and why; never sets anything.
        """
        await self._runner.preflight()

    async def enqueue(
        self,
        tenant: str,
        payload: Any,
        *,
        item_id: str | None = None,
        dedupe_key: str | None = None,
        priority: int = 0,
        delay_seconds: float = 0.0,
        run_at: float | None = None,
        max_attempts: int | None = None,
    ) -> WorkItem:
        """Add an item; a repeated ``item_id`` or live ``dedupe_key`` returns the existing one.

        ``run_at`` (the server's clock, or the injected one) or ``delay_seconds`` delays it; an
        item due at once pushes a wake hint for idle workers in the same script.
        Raises InvalidArgumentError or StatePersistenceError (before sending),
        StoreOutcomeUnknown when the reply is lost and no caller-minted identity settles it.
        """
        item = check_item(
            tenant,
            payload,
            item_id=item_id,
            dedupe_key=dedupe_key,
            priority=priority,
            delay_seconds=delay_seconds,
            run_at=run_at,
            max_attempts=max_attempts,
            max_bytes=self.settings.max_value_bytes,
        )
        item_id = item.item_id
        scripted = item_args(item)
        for sends in (2, 1):
            args = [tenant, *scripted[:4], self._now_arg(), *scripted[4:]]
            try:
                reply = await self._script(
                    "enqueue", args, idempotent=False, keys=self._item_keys(tenant, item_id)
                )
            except ReplyLost as lost:
                if item.anonymous:
                    raise StoreOutcomeUnknown(f"enqueue to {tenant!r}: {lost}") from lost
                # A caller-minted id or dedupe key is a retry identity: read back.
                existing = await self._find(tenant, item_id, dedupe_key, lost)
                if existing is not None:
                    return existing
                if sends == 1:
                    raise StoreOutcomeUnknown(f"enqueue to {tenant!r}: {lost}") from lost
                continue
            return decode_item(reply[1])
        raise AssertionError("unreachable")  # pragma: no cover

    async def claim(self, worker: str) -> Lease | None:
        """Lease the next due item, tenants served in rotation; None when nothing is due.

        One script: reclaim up to RECLAIM_PER_CLAIM lapsed leases (as ``reap``), promote due
        delayed items, pick the tenant whose turn it is, lease its head with a fresh token,
        advance the rotation. Raises StoreOutcomeUnknown when the reply is lost (a lease that
        was taken lapses and is reclaimed).
        """
        validate_identifier(worker, "worker")
        args = [*self._claim_args(worker), *retry_table(self.policy)]
        try:
            reply = await self._script("claim", args, idempotent=False)
        except ReplyLost as lost:
            raise StoreOutcomeUnknown(
                f"claim by {worker!r}: {lost}; an item it may have leased is reaped when the "
                "lease lapses"
            ) from lost
        if text(reply[0]) == "empty":
            return None
        return decode_lease(reply[1])

    async def heartbeat(
        self, tenant: str | Lease, item_id: str | None = None, *, token: int | None = None
    ) -> Lease:
        """Extend the lease (never past max_lease_seconds).

        Raises LeaseLostError (``taken``, ``capped``, ``expired``), WorkItemNotFoundError.
        """
        tenant, item_id, token = settle_target(tenant, item_id, token)
        args = [
            tenant,
            item_id,
            str(int(token)),
            self._now_arg(),
            timestamp(self.policy.lease_seconds),
            timestamp(self.policy.max_lease_seconds),
        ]
        # Sent again, it extends the same lease once more (never past the cap), so a lost
        # reply is retried.
        keys = [self._queue_keys.item(tenant, item_id)]
        reply = await self._script("heartbeat", args, idempotent=True, keys=keys)
        raise_settle_refusal(reply, tenant, item_id)
        return decode_lease(reply[1])

    async def complete(
        self, tenant: str | Lease, item_id: str | None = None, *, token: int | None = None
    ) -> None:
        """Finish the item; it is deleted and frees its dedupe key.

        Raises LeaseLostError, WorkItemNotFoundError, StoreOutcomeUnknown.
        """
        tenant, item_id, token = settle_target(tenant, item_id, token)
        args = [
            tenant,
            item_id,
            str(int(token)),
            self._now_arg(),
            timestamp(self.policy.max_lease_seconds),
        ]
        try:
            reply = await self._script(
                "complete", args, idempotent=False, keys=[self._queue_keys.item(tenant, item_id)]
            )
        except ReplyLost as lost:
            raise StoreOutcomeUnknown(f"complete of {item_id!r}: {lost}") from lost
        raise_settle_refusal(reply, tenant, item_id)

    async def fail(
        self,
        tenant: str | Lease,
        item_id: str | None = None,
        *,
        token: int | None = None,
        error: str | None = None,
        retryable: bool = True,
    ) -> WorkItem:
        """Record a failed attempt: retried after the policy's backoff, or dead-lettered.

        Raises LeaseLostError, WorkItemNotFoundError, StoreOutcomeUnknown.
        """
        tenant, item_id, token = settle_target(tenant, item_id, token)
        check_failure(error, retryable)
        args = [
            tenant,
            item_id,
            str(int(token)),
            self._now_arg(),
            timestamp(self.policy.max_lease_seconds),
            "0" if error is None else "1",
            error or "",
            "1" if retryable else "0",
            *retry_table(self.policy),
        ]
        try:
            reply = await self._script(
                "fail", args, idempotent=False, keys=self._item_keys(tenant, item_id)
            )
        except ReplyLost as lost:
            raise StoreOutcomeUnknown(f"fail of {item_id!r}: {lost}") from lost
        raise_settle_refusal(reply, tenant, item_id)
        return decode_item(reply[1])

    async def reap(self, *, limit: int = 100) -> list[WorkItem]:
        """Return lapsed leases to ready after the policy's backoff (or to the dead letter), at
        most ``limit`` per call.

        Raises StoreOutcomeUnknown when the reply is lost.
        """
        check_limit(limit)
        args = [self._now_arg(), limit, *retry_table(self.policy)]
        try:
            reply = await self._script("reap", args, idempotent=False)
        except ReplyLost as lost:
            raise StoreOutcomeUnknown(f"reap: {lost}; run reap again") from lost
        return [decode_item(r) for r in reply]

    async def adopt(self, worker: str, *, limit: int = 100) -> list[Lease]:
        """Return (and extend) the live leases ``worker`` held, in claim order, each with a
        fresh token: the old tokens are refused from then on (LeaseLostError ``taken``), so
        a paused process that held them cannot settle behind its restarted twin.

        Each script reads at most ``_ADOPT_SCAN`` index entries, starting after the last one
        the previous script read, so lapsed leases that reap has not taken yet cost more round
        trips, never a long script. When a page's reply is lost, the tokens it minted are
        unknown and a resend of that page would step over them (they are past the ceiling the
        first page read): the whole pass starts again, minting fresh tokens for every lease,
        up to ``retry_attempts`` passes; then StoreOutcomeUnknown (adopt again).
        """
        validate_identifier(worker, "worker")
        check_limit(limit)
        for _ in range(max(1, self.settings.retry_attempts)):
            try:
                return await self._adopt_pass(worker, limit)
            except ReplyLost as lost:
                last = lost
        raise StoreOutcomeUnknown(f"adopt of {worker!r}: {last}; adopt again") from last

    async def _adopt_pass(self, worker: str, limit: int) -> list[Lease]:
        leases: list[Lease] = []
        after = ceiling = ""
        while len(leases) < limit:
            args = [
                worker,
                self._now_arg(),
                timestamp(self.policy.lease_seconds),
                timestamp(self.policy.max_lease_seconds),
                limit - len(leases),
                after,
                _ADOPT_SCAN,
                ceiling,
            ]
            found, last, ceiling = await self._script("adopt", args, idempotent=False)
            ceiling = text(ceiling)
            leases += [decode_lease(r) for r in found]
            after = text(last)
            if not after:
                break
        return leases

    async def requeue(self, tenant: str, item_id: str) -> WorkItem:
        """Move a dead-lettered item back to ready with its attempts reset.

        Raises WorkItemNotFoundError, StoreOutcomeUnknown.
        """
        validate_identifier(tenant, "tenant")
        validate_identifier(item_id, "item_id")
        args = [tenant, item_id, self._now_arg()]
        try:
            reply = await self._script(
                "requeue", args, idempotent=False, keys=self._item_keys(tenant, item_id)
            )
        except ReplyLost as lost:
            raise StoreOutcomeUnknown(f"requeue of {item_id!r}: {lost}") from lost
        if text(reply[0]) == "not_found":
            raise WorkItemNotFoundError(f"no dead-lettered item {item_id!r} in tenant {tenant!r}")
        return decode_item(reply[1])

    async def aclose(self) -> None:
        """Close the client if the queue built it (``from_url``); an injected one is the
        caller's to close. Every call after it is refused (QueueUnavailableError, nothing
        sent)."""
        self._runner.closed = True
        if self._owns_client:
            await self._client.aclose()
