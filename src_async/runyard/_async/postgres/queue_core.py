"""The PostgreSQL work queue's core: enqueue, claim and the single settles."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from typing_extensions import Self

from runyard._async.postgres._adapter import Source, _AsyncPostgresAdapter
from runyard._sql import settle_refusal
from runyard.errors import (
    ConfigurationError,
    LeaseLostError,
    QueueUnavailableError,
    RunyardError,
    StoreOutcomeUnknown,
)
from runyard.keys import validate_identifier
from runyard.models import Lease, WorkItem
from runyard.policy import RECLAIM_PER_CLAIM, QueuePolicy
from runyard.postgres.flavours import AsyncConnection
from runyard.postgres.rows import (
    PruneCursor,
    decode_item,
    decode_lease,
    item_state,
)
from runyard.postgres.statements.queue import claim_call
from runyard.postgres.wake import wake_channel
from runyard.queue_args import check_item
from runyard.validation import (
    check_failure,
    settle_target,
)

__all__ = [
    "MAX_TENANTS_PASSED_OVER",
    "MAX_UNPARK_ROUNDS",
    "RECLAIM_EVERY_SECONDS",
    "RETIRE_PER_CLAIM",
]

# How many tenants one claim passes over when their due heads are all locked by other claims.
MAX_TENANTS_PASSED_OVER = 32
# How many times one claim is sent again after putting parked tenants back into the rotation
# (UNPARK_PER_CLAIM a time, oldest due first; each round puts back at least one): a safety
# bound, 256,000 tenants coming due at once, past which the call returns what it has (None,
# or the leases taken) and the next call goes on.
MAX_UNPARK_ROUNDS = 1000
# How many tenants served by earlier claims one claim checks for retiring (drained ones).
RETIRE_PER_CLAIM = 16
# How often (server time) this client's claims look for lapsed leases while the last look
# found fewer than RECLAIM_PER_CLAIM and its claim found work: at most this long after a
# lease lapses, a claim of every busy client takes it back. In between, a claim sends the
# statement's form without the reclaim (see claim_name).
RECLAIM_EVERY_SECONDS = 0.5


class _AsyncPostgresQueueCore(_AsyncPostgresAdapter):
    """Enqueue, claim and the single settles of AsyncPostgresWorkQueue."""

    _kind = "queue"

    def __init__(
        self, source: Source, *, policy: QueuePolicy | None = None, **options: Any
    ) -> None:
        """``options`` are the adapter's (tables, clock, max_value_bytes, retry_attempts,
        retry_backoff_seconds, schema_version, prepare, close_source)."""
        super().__init__(source, **options)
        self.policy = policy or QueuePolicy()
        try:
            self._wake: str | None = wake_channel(self.tables)
        except ConfigurationError:
            self._wake = None  # no worker can LISTEN on it either: enqueue wakes no one
        self._prune_after = PruneCursor()  # where prune() resumes
        # Tenants that claims of this adapter served: its next claim retires the drained ones.
        self._drained: set[str] = set()
        self._reclaim_at = float("-inf")  # when this adapter's next claim looks for lapses

    def bound(self, session: AsyncConnection[Any]) -> Self:
        """Return this queue working inside the transaction the caller opened on ``session``
        (see the adapter's ``bound``); its claims retire drained tenants in that transaction."""
        twin = super().bound(session)
        twin._drained = set()
        return twin

    def _relations(self) -> Sequence[str]:
        return self.tables.queue_relations()

    # -- enqueue and claim -------------------------------------------------------------------
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

        Due at ``run_at`` (the server's time; a past one is due at once) or after
        ``delay_seconds``; ``max_attempts`` overrides the policy's for this item. One statement
        (safe to retry: the item id is its identity), which wakes idle workers at its commit.
        Raises InvalidArgumentError, StatePersistenceError for a payload no backend stores,
        before sending.
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
            max_bytes=self.max_value_bytes,
        )
        for _ in range(3):
            now = self._now()
            rows = await self._fetch(
                "enqueue",
                tenant,
                item.item_id,
                item.payload,
                item.priority,
                item.due_at(now),
                now,
                item.dedupe_key,
                item.max_attempts,
                self._wake,
            )
            if rows:
                return decode_item(rows[0][1:])
            # The item we collided with committed after this statement's snapshot was taken.
            rows = await self._fetch("find_item", tenant, item.item_id, item.dedupe_key)
            if rows:
                return decode_item(rows[0])
        raise QueueUnavailableError("the item kept changing while enqueuing; try again")

    async def claim(self, worker: str) -> Lease | None:
        """Lease the next due item, tenants served in rotation; None when nothing is due.

        One statement, waiting on no lock, first reclaims up to RECLAIM_PER_CLAIM lapsed leases
        (as reap() does: retried after the backoff, or dead-lettered; every
        RECLAIM_EVERY_SECONDS, and at once again after a full batch or an idle poll; when one
        it took back is due at once, a zero backoff, it claims nothing and is sent again, so
        this call serves it in its turn), then
        picks the tenant with the oldest turn whose rotation row is free (or, when all are
        held, any with due work), locks its head item (``FOR UPDATE SKIP LOCKED``), writes
        the claim and advances the turn. A tenant that a claim drained leaves the rotation in
        this adapter's next claim statement; a bound claim retires it at once, in the
        caller's transaction. Raises StoreOutcomeUnknown when the reply was lost (adopt()
        recovers such a lease).
        """
        validate_identifier(worker, "worker")
        passed_over: list[str] = []
        woken = 0
        while len(passed_over) <= MAX_TENANTS_PASSED_OVER and woken <= MAX_UNPARK_ROUNDS:
            now = self._now()
            expires = self.policy.lease_expiry(now, now)
            drained = self._take_drained()
            reclaim = self._reclaim_args(now, first=not (woken or passed_over))
            name, args = claim_call(
                (now, worker, expires, passed_over), reclaim, drained, parking=not self._bound
            )
            rows = await self._send_claim(name, args, drained, worker, "a lease it took is")
            self._reclaimed(reclaim[0], int(rows[0][1]) if rows else None)
            if not rows:
                return None
            if rows[0][0] is None:  # parked tenants put back: this statement could not see them
                woken += 1
                continue
            if rows[0][2] is None:
                passed_over.append(rows[0][0])
                continue
            lease = decode_lease(rows[0][2:])
            await self._served([lease.tenant])
            return lease
        return None

    async def _send_claim(
        self, name: str, args: Sequence[Any], drained: list[str] | None, worker: str, took: str
    ) -> Sequence[Sequence[Any]]:
        """Send a claim statement: its rows. On an error the drained tenants it carried go
        back for the next claim; a lost reply raises StoreOutcomeUnknown naming adopt()."""
        try:
            return await self._fetch(name, *args, idempotent=False)
        except StoreOutcomeUnknown as exc:
            self._drained.update(drained or ())
            raise StoreOutcomeUnknown(
                f"{exc}; {took} returned by adopt({worker!r}) or reaped when it lapses"
            ) from None
        except RunyardError:
            self._drained.update(drained or ())
            raise

    def _take_drained(self) -> list[str] | None:
        """Up to RETIRE_PER_CLAIM tenants that claims served, for the next claim statement to
        retire if drained (None for none). ``set.pop`` keeps threads sharing the sync twin
        apart."""
        taken: list[str] = []
        while len(taken) < RETIRE_PER_CLAIM:
            try:
                taken.append(self._drained.pop())
            except KeyError:
                break
        return taken or None

    async def _served(self, tenants: Sequence[str]) -> None:
        """A claim served ``tenants``: each leaves the rotation if it has no ready item left,
        checked in this adapter's next claim statement, or at once (one statement each, in
        the caller's transaction, which sees this claim) when bound."""
        if not self._bound:
            self._drained.update(tenants)
            return
        for tenant in tenants:
            await self._retire(tenant)

    def _reclaim_args(
        self, now: float, *, first: bool
    ) -> tuple[list[float] | None, float, float, int]:
        """What a claim needs to reclaim lapsed leases as reap does: one jitter draw per lease
        it may take back (RECLAIM_PER_CLAIM; None, none, until RECLAIM_EVERY_SECONDS after
        this adapter's last look, and in any statement but a call's ``first``: a claim call
        takes back one batch however many statements it sends), the backoff's base and cap,
        the attempt budget."""
        policy = self.policy
        jitter: list[float] | None = None
        if first and now >= self._reclaim_at:
            self._reclaim_at = now + RECLAIM_EVERY_SECONDS
            jitter = [float(policy.random()) for _ in range(RECLAIM_PER_CLAIM)]
        return jitter, float(policy.backoff_base), float(policy.backoff_cap), policy.max_attempts

    def _reclaimed(self, jitter: list[float] | None, taken: int | None) -> None:
        """After a claim that looked for lapses (``jitter`` set): the next claim looks again
        at once when this one took back a full batch (more may wait) or found nothing due
        (``taken`` None: an idle poll, which costs little)."""
        if jitter is not None and (taken is None or taken >= len(jitter)):
            self._reclaim_at = float("-inf")

    async def _retire(self, tenant: str) -> None:
        """Take the tenant out of the rotation if it has no ready item left (bound: inside
        the caller's transaction, which sees this claim)."""
        await self._fetch("retire", tenant, idempotent=True)

    # -- settling ----------------------------------------------------------------------------
    async def _probe(self, tenant: str, item_id: str) -> Sequence[Any] | None:
        rows = await self._fetch("probe_item", tenant, item_id)
        return rows[0] if rows else None

    async def _refused(self, tenant: str, item_id: str, token: int, now: float) -> Exception:
        probe = await self._probe(tenant, item_id)
        refusal = settle_refusal(tenant, item_id, token, probe, now, self.policy)
        return refusal or LeaseLostError(item_id, "taken")

    async def heartbeat(
        self, tenant: str | Lease, item_id: str | None = None, *, token: int | None = None
    ) -> Lease:
        """Extend the lease (never past max_lease_seconds from the claim).

        Raises LeaseLostError ("taken", "capped", "expired"), WorkItemNotFoundError.
        """
        tenant, item_id, token = settle_target(tenant, item_id, token)
        now = self._now()
        rows = await self._fetch(
            "heartbeat",
            tenant,
            item_id,
            token,
            now,
            now + float(self.policy.lease_seconds),
            float(self.policy.max_lease_seconds),
        )
        if rows:
            return decode_lease(rows[0])
        raise await self._refused(tenant, item_id, token, now)

    async def complete(
        self, tenant: str | Lease, item_id: str | None = None, *, token: int | None = None
    ) -> None:
        """Finish the item (deleting it and freeing its dedupe key), fenced on ``token``.

        Raises LeaseLostError, WorkItemNotFoundError, StoreOutcomeUnknown when the reply was
        lost and reading back cannot settle it.
        """
        tenant, item_id, token = settle_target(tenant, item_id, token)
        now = self._now()
        try:
            rows = await self._complete(tenant, item_id, token, now)
        except StoreOutcomeUnknown:
            if self._bound:
                raise
            # The token is the write's identity: gone means completed; still ours means not.
            probe = await self._probe(tenant, item_id)
            if probe is None:
                return
            if settle_refusal(tenant, item_id, token, probe, now, self.policy) is not None:
                raise
            rows = await self._complete(tenant, item_id, token, now)
        if not rows:
            raise await self._refused(tenant, item_id, token, now)

    async def _complete(
        self, tenant: str, item_id: str, token: int, now: float
    ) -> Sequence[Sequence[Any]]:
        return await self._fetch(
            "complete",
            tenant,
            item_id,
            token,
            now,
            float(self.policy.max_lease_seconds),
            idempotent=False,
        )

    async def fail(
        self,
        tenant: str | Lease,
        item_id: str | None = None,
        *,
        token: int | None = None,
        error: str | None = None,
        retryable: bool = True,
    ) -> WorkItem:
        """Record a failed attempt: retried after backoff, or dead-lettered per the policy.

        Raises LeaseLostError, WorkItemNotFoundError, StoreOutcomeUnknown when the reply was
        lost and the item no longer carries this token (reading back cannot tell this call's
        write from a reap's).
        """
        tenant, item_id, token = settle_target(tenant, item_id, token)
        check_failure(error, retryable)
        now = self._now()
        probe = await self._probe(tenant, item_id)
        refusal = settle_refusal(tenant, item_id, token, probe, now, self.policy)
        if refusal is not None or probe is None:
            raise refusal or LeaseLostError(item_id, "taken")
        decision = self.policy.on_failure(
            int(probe[4]), now, retryable=retryable, max_attempts=probe[5]
        )
        state = item_state(decision)
        args = (
            tenant,
            item_id,
            token,
            now,
            float(self.policy.max_lease_seconds),
            state,
            decision.retry_at if state == "ready" else None,
            error,
            decision.reason if state == "dead" else None,
        )
        try:
            rows = await self._fetch("fail", *args, idempotent=False)
        except StoreOutcomeUnknown:
            if self._bound:
                raise
            # The token is the write's identity: still ours and live means it was not applied.
            probe = await self._probe(tenant, item_id)
            if (
                probe is None
                or settle_refusal(tenant, item_id, token, probe, now, self.policy) is not None
            ):
                raise
            rows = await self._fetch("fail", *args, idempotent=False)
        if rows:
            return decode_item(rows[0])
        raise await self._refused(tenant, item_id, token, now)
