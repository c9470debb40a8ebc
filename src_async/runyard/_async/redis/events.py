"""AsyncRedisEvents: the event log, finalize and follow of AsyncRedisStateStore."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from runyard._async.follow import follow_events
from runyard._async.redis.scripts import AsyncScriptRunner
from runyard._async.redis.updates import AsyncRedisUpdates
from runyard._json import load_json
from runyard.clock import Clock
from runyard.events import (
    RETRY_HINT,
    TERMINAL_STATUSES,
    RunEvent,
    check_after,
    check_finalize,
    event_body,
    lost_append,
)
from runyard.models import RunKey, RunRecord
from runyard.redis.common import ReplyLost, decode_run, now_arg, opt_text, pairs, text
from runyard.redis.events import (
    EVENT_SCRIPTS,
    EventEntry,
    EventKeys,
    decode_entry,
    raise_event_refusal,
    settle_conflict,
    terminal_arg,
)
from runyard.redis.flavours import AsyncRedisClient
from runyard.redis.settings import RedisStoreSettings
from runyard.validation import check_write_guards
from runyard.writes import mint_write_id, not_this_write

__all__ = ["AsyncRedisEvents"]

T = TypeVar("T")


class AsyncRedisEvents:
    """Mixin for AsyncRedisStateStore: each run's log is a LIST in the tenant's slot.

    ``append_event`` and ``finalize`` are one script each; with ``live_updates`` on, the same
    script publishes a hint (``SPUBLISH`` on a cluster) that wakes followers early.
    """

    settings: RedisStoreSettings
    clock: Clock | None
    _client: AsyncRedisClient
    _runner: AsyncScriptRunner
    terminal_statuses: frozenset[str] = TERMINAL_STATUSES
    live_updates: AsyncRedisUpdates | None = None

    if TYPE_CHECKING:  # provided by the sessions mixin

        async def _read_back(self, lost: ReplyLost, read: Callable[[], Awaitable[T]]) -> T: ...

        async def _hash_fields(self, name: str) -> dict[str, Any]: ...

    def _event_keys(self, key: RunKey) -> EventKeys:
        return EventKeys(self.settings.namespace, key.tenant, key.run_id)

    def _hint_args(self, keys: EventKeys) -> list[str]:
        if self.live_updates is None:
            return ["", ""]
        return [keys.channel, self.live_updates.publish_command]

    async def _send_event(
        self, script: str, key: RunKey, sent: EventEntry, rest_args: list[str]
    ) -> tuple[Any, EventEntry]:
        """Send an event script for ``sent`` (its arguments after the entry's are
        ``rest_args``): its reply and the entry it settled on. Only when the script refuses a
        retried event_id as other content is the stored entry read (one LINDEX) and, per
        ``settle_conflict``, the script sent again; at most three sends. Raises ReplyLost."""
        for sends in range(1, 4):
            reply = await self._runner.script(
                EVENT_SCRIPTS[script],
                self._event_keys(key).script_keys(),
                sent.args() + rest_args,
                idempotent=sent.event_id is not None,
            )
            if sends == 3 or sent.event_id is None or text(reply[0]) != "event_conflict":
                break
            seq = int(reply[1])
            again = settle_conflict(key, seq, await self._stored_entry(key, seq), sent)
            if again is None:
                break
            sent = again
        return reply, sent

    async def _stored_entry(self, key: RunKey, seq: int) -> Any:
        """Log entry ``seq`` of the run (None when there is none): one LINDEX."""
        name = self._event_keys(key).log
        return await self._runner.call(lambda: self._client.lindex(name, seq - 1), idempotent=True)

    async def _run_written_by(
        self,
        lost: ReplyLost,
        key: RunKey,
        write_id: str,
        what: str,
        advice: str = "read it and decide",
    ) -> RunRecord:
        """Settle a lost patch_run/finalize: the run, if its last write is ``write_id``;
        else StoreOutcomeUnknown (such a write is never sent again)."""
        name = self._event_keys(key).state.run(key.run_id)
        fields = await self._read_back(lost, lambda: self._hash_fields(name))
        if fields and opt_text(fields.get("write_id")) == write_id:
            return decode_run(key.tenant, key.run_id, fields)
        raise not_this_write(what, key.run_id, lost, advice) from lost

    def _terminal_hint_args(self, key: RunKey, status: str | None) -> list[str]:
        """put_run's and patch_run's hint arguments: the run's channel when ``status`` is
        terminal (a follower waiting on it wakes), else none."""
        if status is None or status not in self.terminal_statuses:
            return ["", ""]
        return self._hint_args(self._event_keys(key))

    async def append_event(
        self,
        key: RunKey,
        type: str,
        data: Any,
        *,
        event_id: str | None = None,
        fence: int | None = None,
    ) -> RunEvent:
        """Append an event with the next seq, in one script; a repeated ``event_id`` returns
        the stored event (so a lost reply is sent again only when it carries one).

        Raises EventConflictError, StateNotFoundError, RunFinalizedError (the run is in a
        terminal status), LeaseLostError, StatePersistenceError, StoreOutcomeUnknown (a lost
        reply without an ``event_id``).
        """
        check_write_guards(None, fence)
        type_, data_text = event_body(type, data, event_id, max_bytes=self.settings.max_value_bytes)
        keys = self._event_keys(key)
        fenced = "" if fence is None else str(fence)
        args = [fenced, now_arg(self.clock), *self._hint_args(keys)]
        args.append(terminal_arg(self.terminal_statuses))
        sent = EventEntry(type_, data_text, event_id, terminal=False)
        try:
            reply, sent = await self._send_event("append_event", key, sent, args)
        except ReplyLost as lost:
            raise lost_append(key.run_id, lost) from lost
        raise_event_refusal(reply, key, event_id, 0)
        return RunEvent(
            tenant=key.tenant,
            run_id=key.run_id,
            seq=int(reply[1]),
            type=type_,
            data=load_json(sent.data_text),
            at=float(text(reply[2])),
            event_id=event_id,
        )

    async def read_events(self, key: RunKey, *, after: int = 0, limit: int = 100) -> list[RunEvent]:
        """Return up to ``limit`` events with seq > ``after``, in order (one LRANGE)."""
        check_after(after, limit)
        name = self._event_keys(key).log
        entries: list[Any] = await self._runner.call(
            # LRANGE takes int64 indexes: an end past it was refused (after near 2**63).
            lambda: self._client.lrange(name, after, min(after + limit - 1, 2**63 - 1)),
            idempotent=True,
        )
        return [decode_entry(key, after + 1 + i, entry) for i, entry in enumerate(entries)]

    async def finalize(
        self,
        key: RunKey,
        *,
        status: str,
        event_type: str,
        event_data: Any,
        expected_version: int | None = None,
        fence: int | None = None,
        event_id: str | None = None,
    ) -> RunRecord:
        """Set a terminal status and append the terminal event in one script; a lost reply is
        settled by sending it again when it carries an ``event_id`` (the retry of the finalize
        that ended the run returns the stored run), else by reading back its write id.

        Raises ValueError, RunFinalizedError (already terminal), StateConflictError,
        LeaseLostError, StateNotFoundError, EventConflictError, StoreOutcomeUnknown.
        """
        check_write_guards(expected_version, fence)
        check_finalize(status, self.terminal_statuses)
        type_, data_text = event_body(
            event_type, event_data, event_id, max_bytes=self.settings.max_value_bytes
        )
        keys = self._event_keys(key)
        fenced = "" if fence is None else str(fence)
        args = [fenced, now_arg(self.clock), *self._hint_args(keys), status]
        args.append("" if expected_version is None else str(expected_version))
        args += [terminal_arg(self.terminal_statuses), write_id := mint_write_id()]
        try:
            sent = EventEntry(type_, data_text, event_id, terminal=True)
            reply, _ = await self._send_event("finalize", key, sent, args)
        except ReplyLost as lost:
            return await self._run_written_by(lost, key, write_id, "finalize", RETRY_HINT)
        raise_event_refusal(reply, key, event_id, expected_version or 0)
        return decode_run(key.tenant, key.run_id, pairs(reply[1:]))

    def follow(
        self, key: RunKey, *, after: int = 0, poll_seconds: float | None = None
    ) -> AsyncIterator[RunEvent]:
        """Yield every event after ``after`` once, in order, until the run is terminal and
        drained; live updates (when on) wake it early, polling is the backstop."""
        return follow_events(
            self,  # type: ignore[arg-type]
            key,
            after=after,
            poll_seconds=poll_seconds,
            updates=self.live_updates,
        )
