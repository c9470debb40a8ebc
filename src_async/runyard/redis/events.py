"""The Redis event log's keys, scripts and entry format, shared by both twins (no I/O)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

from runyard._json import dump_json, load_json
from runyard.errors import RunFinalizedError, StateNotFoundError
from runyard.events import EventConflictError, RunEvent, same_content
from runyard.models import RunKey
from runyard.redis.common import raise_refusal, text
from runyard.redis.keys import StateKeys, segment
from runyard.redis.scripts import LuaScript

__all__ = [
    "EVENT_SCRIPTS",
    "EventEntry",
    "EventKeys",
    "decode_entry",
    "raise_event_refusal",
    "settle_conflict",
    "terminal_arg",
]


def _load(name: str) -> LuaScript:
    # The state prelude (fence_error, record), then the event helpers, then the script.
    lua = resources.files("runyard.redis").joinpath("lua").joinpath("state")
    parts = ("prelude.lua", "events_prelude.lua", f"{name}.lua")
    source = "\n".join(lua.joinpath(part).read_text(encoding="utf-8") for part in parts)
    return LuaScript(name, source, hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest())


EVENT_SCRIPTS = {name: _load(name) for name in ("append_event", "finalize")}


@dataclass(frozen=True)
class EventKeys:
    """Keys of one run's event log, in the tenant's slot (hash tag: the tenant)."""

    namespace: str
    tenant: str
    run_id: str

    @property
    def state(self) -> StateKeys:
        """The tenant's state keys."""
        return StateKeys(self.namespace, self.tenant)

    @property
    def log(self) -> str:
        """LIST: the run's entries; entry i holds seq i + 1."""
        return f"{self.state.prefix}:events:{segment(self.run_id)}"

    @property
    def ids(self) -> str:
        """HASH: event_id -> seq, the retry identities of the run's events."""
        return f"{self.state.prefix}:event-ids:{segment(self.run_id)}"

    @property
    def channel(self) -> str:
        """The pub/sub channel of the run's hints (same slot, for SPUBLISH on a cluster)."""
        return f"{self.state.prefix}:event-hints:{segment(self.run_id)}"

    def script_keys(self) -> list[str]:
        """KEYS of append_event and finalize: run, lease, log, event ids."""
        return [self.state.run(self.run_id), self.state.lease(self.run_id), self.log, self.ids]


@dataclass(frozen=True)
class EventEntry:
    """What an event script writes to the log besides the time: the event's type, its data
    as JSON text, its event_id, and whether it is the terminal event (finalize's)."""

    type: str
    data_text: str
    event_id: str | None
    terminal: bool

    def rest(self) -> str:
        """The entry without its time: what the script compares a retried event_id with."""
        head = dump_json([self.type, self.event_id])
        return f"{'t' if self.terminal else 'f'}\n{head}\n{self.data_text}"

    def args(self) -> list[str]:
        """The scripts' first two arguments: the rest, and the event_id ('' for none)."""
        return [self.rest(), self.event_id or ""]


def terminal_arg(terminal_statuses: frozenset[str]) -> str:
    """The scripts' terminal-statuses argument: the statuses, sorted, NUL-joined
    (runyard.validation.check_status refuses a status holding NUL)."""
    return "\0".join(sorted(terminal_statuses))


def decode_entry(key: RunKey, seq: int, entry: Any) -> RunEvent:
    """Build the RunEvent of log entry ``seq``."""
    at, flag, head, data = text(entry).split("\n", 3)
    event_type, event_id = load_json(head)
    return RunEvent(
        tenant=key.tenant,
        run_id=key.run_id,
        seq=seq,
        type=event_type,
        data=load_json(data),
        at=float(at),
        event_id=event_id,
        terminal=flag == "t",
    )


def settle_conflict(key: RunKey, seq: int, entry: Any, sent: EventEntry) -> EventEntry | None:
    """After a script refused ``sent``, a retried event_id, as other content (it compares the
    canonical text) naming log entry ``seq``, read as ``entry`` (None: gone): the entry to
    send the call again with, or None when the refusal stands. ``sent`` with the stored data
    when the stored entry is the event_id's and its content is the same by value
    (``same_content``: ``1`` and ``1.0`` are, ``true`` and ``1`` are not), as every other
    backend judges, so the script finds the stored event; ``sent`` itself when the entry is
    gone or another's (the run was deleted, and perhaps made again, since the refusal: its
    premise is stale)."""
    if entry is None:
        return sent
    stored = decode_entry(key, seq, entry)
    if stored.event_id != sent.event_id:
        return sent
    if stored.terminal != sent.terminal or not same_content(stored, sent.type, sent.data_text):
        return None
    return replace(sent, data_text=text(entry).split("\n", 3)[3])


def raise_event_refusal(
    reply: Sequence[Any], key: RunKey, event_id: str | None, expected: int
) -> None:
    """Raise what an event script refused with (not found, conflicts, a lost lease), if any."""
    status = text(reply[0])
    if status == "not_found":
        raise StateNotFoundError(f"run {key.run_id!r} of tenant {key.tenant!r} does not exist")
    if status == "finalized":
        raise RunFinalizedError(key.run_id, text(reply[1]))
    if status == "event_conflict":
        raise EventConflictError(key.run_id, event_id or "", int(reply[1]))
    raise_refusal(reply, key.run_id, expected)
