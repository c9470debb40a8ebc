"""AsyncRedisWorkQueue: tenant-fair work items with fenced leases on Redis, one script each."""

from __future__ import annotations

from typing import Any

from runyard._async.closing import AsyncClosing
from runyard._async.redis.scripts import AsyncScriptRunner, client_from_url
from runyard._checks import check_limit
from runyard._json import dump_json, load_json
from runyard.capabilities import StoreCapabilities
from runyard.clock import Clock, SystemClock
from runyard.errors import QueueUnavailableError, StoreOutcomeUnknown, WorkItemNotFoundError
from runyard.keys import segment, validate_identifier
from runyard.models import DeadLetter, Lease, QueueStats, WorkItem
from runyard.policy import QueuePolicy
from runyard.redis.common import (
    ITEM_COLUMNS,
    ReplyLost,
    decode_dead_letter,
    decode_item,
    decode_lease,
    failure_table,
    lapse_table,
    raise_settle_refusal,
    text,
    timestamp,
)
from runyard.redis.flavours import (
    AsyncRedisClient,
)
from runyard.redis.keys import QueueKeys, priority_key, time_key
from runyard.redis.scripts import QUEUE_SCRIPTS
from runyard.redis.settings import RedisStoreSettings
from runyard.validation import (
    check_delay,
    check_error_text,
    check_priority,
    item_id_or_new,
    settle_target,
)

__all__ = ["AsyncRedisWorkQueue"]

# Due delayed items made ready per claim; the rest follow on the next claims.
_PROMOTE_BATCH = 1000
# Due (not yet promoted) items stats() reads to count their tenants; it counts them all.
_STATS_SCAN = _PROMOTE_BATCH


class AsyncRedisWorkQueue(AsyncClosing):
    """A WorkQueue on Redis or Redis Cluster; one queue (one namespace) lives in one slot.

    Build it with ``await AsyncRedisWorkQueue.open(client, ...)`` (runs ``preflight()``) or
    ``await AsyncRedisWorkQueue.from_url(url, ...)``; direct construction skips preflight.
    Claims, heartbeats and settles are one script each, fenced on the lease token.
    """

    capabilities = StoreCapabilities(
        version=1,
        fenced_writes=True,
        retry_ids=True,
        atomic_settle=True,
        recovery=True,
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
        self.clock = clock or SystemClock()
        self._client = client
        self._owns_client = owns_client
        self._runner = AsyncScriptRunner(client, self.settings, QueueUnavailableError)
        self._keys = QueueKeys(self.settings.namespace).all()

    @classmethod
    async def open(
        cls,
        client: AsyncRedisClient,
        *,
        policy: QueuePolicy | None = None,
        clock: Clock | None = None,
        settings: RedisStoreSettings | None = None,
    ) -> AsyncRedisWorkQueue:
        """Return a queue on ``client`` after ``preflight()``. Raises ConfigurationError."""
        queue = cls(client, policy=policy, clock=clock, settings=settings)
        await queue.preflight()
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
        except BaseException:
            await queue.aclose()
            raise
        return queue

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(namespace={self.settings.namespace!r}, policy={self.policy!r})"
        )

    async def preflight(self) -> None:
        """Refuse a server that may evict or forget data (see RedisStoreSettings.durable).

        Raises ConfigurationError naming the setting, its value and why; never sets anything.
        """
        await self._runner.preflight()

    async def _script(self, name: str, args: list[Any], *, idempotent: bool) -> Any:
        return await self._runner.script(
            QUEUE_SCRIPTS[name], self._keys, args, idempotent=idempotent
        )

    async def enqueue(
        self,
        tenant: str,
        payload: Any,
        *,
        item_id: str | None = None,
        dedupe_key: str | None = None,
        priority: int = 0,
        delay_seconds: float = 0.0,
    ) -> WorkItem:
        """Add an item; a repeated ``item_id`` or live ``dedupe_key`` returns the existing one.

        Raises StatePersistenceError for a payload that cannot be stored (before sending),
        StoreOutcomeUnknown when the reply is lost and no caller-minted identity settles it.
        """
        validate_identifier(tenant, "tenant")
        item_id, minted = item_id_or_new(item_id)
        if dedupe_key is not None:
            validate_identifier(dedupe_key, "dedupe_key")
        priority = check_priority(priority)
        delay_seconds = check_delay(delay_seconds)
        pkey = priority_key(priority)
        stored = dump_json(payload, max_bytes=self.settings.max_value_bytes, what="payload")
        for sends in (2, 1):
            now = self.clock.now()
            available = now + delay_seconds
            args = [
                tenant,
                item_id,
                dedupe_key or "",
                stored,
                priority,
                pkey,
                timestamp(now),
                timestamp(available),
            ]
            try:
                reply = await self._script("enqueue", args, idempotent=False)
            except ReplyLost as lost:
                if minted and dedupe_key is None:
                    raise StoreOutcomeUnknown(f"enqueue to {tenant!r}: {lost}") from lost
                # A caller-minted id or dedupe key is a retry identity: read back.
                existing = await self._find(tenant, item_id, dedupe_key, lost)
                if existing is not None:
                    return existing
                if sends == 1:
                    raise StoreOutcomeUnknown(f"enqueue to {tenant!r}: {lost}") from lost
                continue
            if text(reply[0]) == "exists":
                return decode_item(reply[1])
            return WorkItem(
                tenant=tenant,
                item_id=item_id,
                payload=load_json(stored),
                priority=priority,
                state="ready",
                available_at=available,
                enqueued_at=now,
                dedupe_key=dedupe_key,
            )
        raise AssertionError("unreachable")  # pragma: no cover

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

    async def claim(self, worker: str) -> Lease | None:
        """Lease the next due item, tenants served in rotation; None when nothing is due.

        One script: promote due delayed items, pick the tenant whose turn it is, lease its
        head with a fresh token, advance the rotation. Raises StoreOutcomeUnknown when the
        reply is lost (a lease that was taken lapses and is reaped).
        """
        validate_identifier(worker, "worker")
        now = self.clock.now()
        expires = self.policy.lease_expiry(now, now)
        args = [worker, timestamp(now), timestamp(expires), _PROMOTE_BATCH]
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
        now = self.clock.now()
        args = [
            tenant,
            item_id,
            str(int(token)),
            timestamp(now),
            timestamp(now + self.policy.lease_seconds),
            timestamp(self.policy.max_lease_seconds),
        ]
        # The same arguments sent again set the same expiry, so a lost reply is retried.
        reply = await self._script("heartbeat", args, idempotent=True)
        raise_settle_refusal(reply, tenant, item_id)
        return decode_lease(reply[1])

    async def complete(
        self, tenant: str | Lease, item_id: str | None = None, *, token: int | None = None
    ) -> None:
        """Finish the item; it is deleted and frees its dedupe key.

        Raises LeaseLostError, WorkItemNotFoundError, StoreOutcomeUnknown.
        """
        tenant, item_id, token = settle_target(tenant, item_id, token)
        now = self.clock.now()
        args = [
            tenant,
            item_id,
            str(int(token)),
            timestamp(now),
            timestamp(self.policy.max_lease_seconds),
        ]
        try:
            reply = await self._script("complete", args, idempotent=False)
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
        check_error_text(error)
        now = self.clock.now()
        args = [
            tenant,
            item_id,
            str(int(token)),
            timestamp(now),
            timestamp(self.policy.max_lease_seconds),
            "0" if error is None else "1",
            error or "",
            time_key(now),
            *failure_table(self.policy, now, retryable=retryable),
        ]
        try:
            reply = await self._script("fail", args, idempotent=False)
        except ReplyLost as lost:
            raise StoreOutcomeUnknown(f"fail of {item_id!r}: {lost}") from lost
        raise_settle_refusal(reply, tenant, item_id)
        return decode_item(reply[1])

    async def reap(self, *, limit: int = 100) -> list[WorkItem]:
        """Return lapsed leases to ready (or the dead letter), at most ``limit`` per call.

        Raises StoreOutcomeUnknown when the reply is lost.
        """
        check_limit(limit)
        now = self.clock.now()
        args = [timestamp(now), limit, time_key(now), *lapse_table(self.policy, now)]
        try:
            reply = await self._script("reap", args, idempotent=False)
        except ReplyLost as lost:
            raise StoreOutcomeUnknown(f"reap: {lost}; run reap again") from lost
        return [decode_item(r) for r in reply]

    async def adopt(self, worker: str, *, limit: int = 100) -> list[Lease]:
        """Return (and extend) the live leases ``worker`` held, in claim order."""
        validate_identifier(worker, "worker")
        check_limit(limit)
        now = self.clock.now()
        args = [
            worker,
            timestamp(now),
            timestamp(now + self.policy.lease_seconds),
            timestamp(self.policy.max_lease_seconds),
            limit,
        ]
        reply = await self._script("adopt", args, idempotent=True)
        return [decode_lease(r) for r in reply]

    async def dead_letters(self, tenant: str, *, limit: int = 100) -> list[DeadLetter]:
        """Return the tenant's dead-lettered items, oldest first."""
        validate_identifier(tenant, "tenant")
        check_limit(limit)
        reply = await self._script("dead_letters", [tenant, limit], idempotent=True)
        return [decode_dead_letter(r) for r in reply]

    async def requeue(self, tenant: str, item_id: str) -> WorkItem:
        """Move a dead-lettered item back to ready with its attempts reset.

        Raises WorkItemNotFoundError, StoreOutcomeUnknown.
        """
        validate_identifier(tenant, "tenant")
        validate_identifier(item_id, "item_id")
        args = [tenant, item_id, timestamp(self.clock.now())]
        try:
            reply = await self._script("requeue", args, idempotent=False)
        except ReplyLost as lost:
            raise StoreOutcomeUnknown(f"requeue of {item_id!r}: {lost}") from lost
        if text(reply[0]) == "not_found":
            raise WorkItemNotFoundError(f"no dead-lettered item {item_id!r} in tenant {tenant!r}")
        return decode_item(reply[1])

    async def get_item(self, tenant: str, item_id: str) -> WorkItem | None:
        """Return the item (ready, leased or dead), or None once completed or unknown."""
        validate_identifier(tenant, "tenant")
        validate_identifier(item_id, "item_id")
        item = f"{segment(tenant)}:{segment(item_id)}"
        fields = [f"{item}:{c}" for c in ITEM_COLUMNS]
        items = self._keys[0]
        values = await self._runner.call(
            lambda: self._client.hmget(items, fields),
            idempotent=True,
        )
        if values[2] is None:
            return None
        return decode_item([tenant, item_id, *values])

    async def stats(self) -> QueueStats:
        """Count the queue's items by state (due items not yet promoted count as ready).

        Bounded: due items are counted, not read; only the first ``_STATS_SCAN`` of them are
        read to find their tenants.
        """
        ready, delayed, leased, dead, tenants = await self._script(
            "stats", [timestamp(self.clock.now()), _STATS_SCAN], idempotent=True
        )
        return QueueStats(
            ready=int(ready),
            delayed=int(delayed),
            leased=int(leased),
            dead=int(dead),
            tenants=int(tenants),
        )

    async def aclose(self) -> None:
        """Close the client if the queue built it (``from_url``); an injected one is the
        caller's to close."""
        if self._owns_client:
            await self._client.aclose()
