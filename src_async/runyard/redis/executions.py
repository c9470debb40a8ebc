"""What both Redis execution-store twins share and is not I/O: the sharded key space, the Lua
scripts, the arguments a commit sends and the decoding of what comes back.

An execution lives in one of ``shards`` shards (CRC-32 of its id); the shard is the Cluster hash
tag of every key the execution owns and of its shard's global indices (outbox, spawns, timers,
listing index), so a commit touches one slot. See docs/executions.md for the table of keys.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runyard._json import dump_json, load_json
from runyard.errors import StoreConflict
from runyard.executions.models import (
    DueTimer,
    Execution,
    ExecutionSummary,
    OutboxEntry,
    SpawnEntry,
    TraceEntry,
    TraceStep,
)
from runyard.executions.planning import CommitPlan
from runyard.redis.common import text, timestamp
from runyard.redis.keys import segment
from runyard.redis.scripts import load_scripts

__all__ = [
    "DEFAULT_SHARDS",
    "EXECUTION_SCRIPTS",
    "MAX_SHARDS",
    "SUMMARY_FIELDS",
    "ExecutionKeys",
    "check_shards",
    "commit_args",
    "conflict_from",
    "decode_entry",
    "decode_execution",
    "decode_spawn",
    "decode_summary",
    "decode_timer",
    "decode_trace",
    "is_fast_path",
    "listing_cursor",
    "listing_position",
    "processed_member",
    "save_args",
    "split_processed_member",
    "step_json",
    "timer_member",
]

DEFAULT_SHARDS = 16
MAX_SHARDS = 1024
# A listing cursor is one int: the shard times this, plus the creation seq within the shard.
_SHARD_STRIDE = 1 << 48
_CONFLICT = "CONFLICT "
# The execution hash's fields a listing reads (everything but the context).
SUMMARY_FIELDS = (
    "version",
    "definition_id",
    "status",
    "parent_id",
    "root_path",
    "created_at",
    "updated_at",
)


def check_shards(shards: int) -> int:
    """Return ``shards`` if it is an int in 1..MAX_SHARDS; else raise ValueError."""
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise ValueError(f"shards must be an int from 1 to {MAX_SHARDS}, not {shards!r}")
    return shards


@dataclass(frozen=True)
class ExecutionKeys:
    """The execution store's keys under one namespace, split into ``shards`` hash-tagged shards.

    Every store sharing a namespace must use the same shard count: it places executions and
    is encoded in every outbox and spawn seq (``seq % shards`` is the entry's shard).
    """

    namespace: str
    shards: int

    def shard_of(self, execution_id: str) -> int:
        """The shard an execution lives in (stable across processes and twins)."""
        return zlib.crc32(execution_id.encode("utf-8")) % self.shards

    def shard_of_seq(self, seq: int) -> int:
        """The shard an outbox or spawn seq was allocated in."""
        return seq % self.shards

    def prefix(self, shard: int) -> str:
        """``{ns}:exec:{{ns}:{shard}}``; the braces are the shard's Cluster hash tag."""
        return f"{self.namespace}:exec:{{{self.namespace}:{shard}}}"

    def _own(self, execution_id: str, kind: str) -> str:
        return f"{self.prefix(self.shard_of(execution_id))}:{kind}:{segment(execution_id)}"

    def execution(self, execution_id: str) -> str:
        """HASH: version, definition_id, status, parent_id, root_path, context, times, seq."""
        return self._own(execution_id, "e")

    def processed(self, execution_id: str) -> str:
        """SET: the event ids the execution's commits marked processed."""
        return self._own(execution_id, "processed")

    def processed_ages(self, shard: int) -> str:
        """ZSET: the shard's processed marks (``processed_member``) scored by when they were
        first marked; prune_processed walks it oldest first."""
        return f"{self.prefix(shard)}:processed-ages"

    def trace(self, execution_id: str) -> str:
        """LIST: the kept trace entries, oldest first (``index recorded_at json``)."""
        return self._own(execution_id, "trace")

    def trace_index(self, execution_id: str) -> str:
        """STRING: the last trace index given (survives the ring dropping entries)."""
        return self._own(execution_id, "trace-index")

    def layout(self) -> str:
        """STRING: the shard count the namespace was first opened with."""
        return f"{self.namespace}:exec:layout"

    def counters(self, shard: int) -> str:
        """HASH: the shard's ``created``, ``outbox`` and ``spawn`` counters."""
        return f"{self.prefix(shard)}:counters"

    def index(self, shard: int) -> str:
        """ZSET: execution ids scored by their creation seq in the shard (the listing order)."""
        return f"{self.prefix(shard)}:index"

    def outbox(self, shard: int) -> str:
        """ZSET: ``seq json`` outbox entries scored by seq."""
        return f"{self.prefix(shard)}:outbox"

    def spawns(self, shard: int) -> str:
        """ZSET: ``seq json`` spawn entries scored by seq."""
        return f"{self.prefix(shard)}:spawns"

    def timers(self, shard: int) -> str:
        """ZSET: ``len:execution_id`` + path, scored by fire time."""
        return f"{self.prefix(shard)}:timers"

    def save_keys(self, execution_id: str) -> list[str]:
        """KEYS of lua/executions/save.lua (the fast path)."""
        shard = self.shard_of(execution_id)
        return [
            self.execution(execution_id),
            self.processed(execution_id),
            self.counters(shard),
            self.index(shard),
            self.processed_ages(shard),
        ]

    def commit_keys(self, execution_id: str) -> list[str]:
        """KEYS of lua/executions/commit.lua (the full path)."""
        shard = self.shard_of(execution_id)
        return [
            *self.save_keys(execution_id)[:4],
            self.outbox(shard),
            self.spawns(shard),
            self.timers(shard),
            self.trace(execution_id),
            self.trace_index(execution_id),
            self.processed_ages(shard),
        ]


EXECUTION_SCRIPTS = load_scripts(
    "executions",
    ("save", "commit", "append_trace", "delete_timer", "forget_processed"),
)


def is_fast_path(plan: CommitPlan) -> bool:
    """True when the commit writes only the execution and perhaps its processed mark."""
    return not (plan.emits or plan.timers or plan.spawns or plan.trace is not None)


def clock_arg(now: float | None) -> str:
    """``now`` for a script: an injected clock's reading, or '' for the server's TIME."""
    return "" if now is None else timestamp(now)


def _execution_args(plan: CommitPlan, now: float | None, commit_id: str) -> list[Any]:
    exe = plan.execution
    return [
        exe.version,
        clock_arg(now),
        exe.id,
        plan.processed_event_id or "",
        exe.definition_id,
        exe.status,
        exe.parent_id or "",
        exe.root_path,
        dump_json(exe.context),
        commit_id,
    ]


def save_args(plan: CommitPlan, now: float | None, commit_id: str) -> list[Any]:
    """ARGV of lua/executions/save.lua (``commit_id``: the call's nonce, kept on the execution)."""
    return _execution_args(plan, now, commit_id)


def processed_member(execution_id: str, event_id: str) -> str:
    """The processed-ages ZSET member of a mark; the length prefix makes it unambiguous."""
    return f"{segment(execution_id)}{event_id}"


def split_processed_member(member: str) -> tuple[str, str]:
    """(execution_id, event_id) of a processed-ages member (inverse of processed_member)."""
    size, _, rest = member.partition(":")
    raw = rest.encode("utf-8")
    return raw[: int(size)].decode("utf-8"), raw[int(size) :].decode("utf-8")


def timer_member(execution_id: str, path: str) -> str:
    """The timers ZSET member of (execution, path); the length prefix makes it unambiguous."""
    if not isinstance(path, str):
        raise TypeError(f"a timer path must be a str, not {type(path).__name__}")
    return f"{segment(execution_id)}{path}"


def step_json(step: TraceStep) -> str:
    """The JSON a trace step is stored as (the script prefixes its index and time)."""
    return dump_json(
        {"event_id": step.event_id, "event_name": step.event_name, "data": step.data}, envelope=1
    )


def commit_args(
    plan: CommitPlan,
    now: float | None,
    commit_id: str,
    *,
    shards: int,
    shard: int,
    trace_max: int,
) -> list[Any]:
    """ARGV of lua/executions/commit.lua: the execution, counts, emits, timer ops and spawns."""
    exe = plan.execution
    args = _execution_args(plan, now, commit_id)
    args += [
        shards,
        shard,
        trace_max,
        "" if plan.trace is None else step_json(plan.trace),
        len(plan.emits),
        len(plan.timers),
        len(plan.spawns),
    ]
    for target_id, event in plan.emits:
        # The data sits two levels into the envelope: those are no nesting of the user's.
        args.append(dump_json({"target_id": target_id, "event": event.model_dump()}, envelope=2))
    for op in plan.timers:
        at = "" if op.fire_at is None else timestamp(op.fire_at)
        args += [op.action, timer_member(exe.id, op.path), at]
    for spawn in plan.spawns:
        args.append(
            dump_json(
                {
                    "parent_id": exe.id,
                    "child_id": spawn.child_id,
                    "root_path": spawn.root_path,
                    "context": spawn.context,
                },
                envelope=1,
            )
        )
    return args


def conflict_from(message: str, execution_id: str, expected: int) -> StoreConflict | None:
    """The StoreConflict a script's ``CONFLICT <found>`` error reply stands for, or None."""
    if not message.startswith(_CONFLICT):
        return None
    return StoreConflict(execution_id, expected, int(message[len(_CONFLICT) :]))


def _fields(raw: Mapping[Any, Any]) -> dict[str, str]:
    return {text(k): text(v) for k, v in raw.items()}


def decode_execution(execution_id: str, raw: Mapping[Any, Any]) -> Execution | None:
    """Build an Execution from its hash (None when the hash is empty)."""
    if not raw:
        return None
    f = _fields(raw)
    return Execution(
        id=execution_id,
        definition_id=f["definition_id"],
        status=f["status"],
        version=int(f["version"]),
        context=load_json(f["context"]),
        parent_id=f["parent_id"] or None,
        root_path=f["root_path"],
        created_at=float(f["created_at"]),
        updated_at=float(f["updated_at"]),
    )


def decode_summary(execution_id: str, values: Sequence[Any]) -> ExecutionSummary | None:
    """Build a summary from an ``HMGET`` of SUMMARY_FIELDS (None when the execution is gone)."""
    if values[0] is None:
        return None
    version, definition_id, status, parent_id, root_path, created_at, updated_at = (
        text(v) for v in values
    )
    return ExecutionSummary(
        id=execution_id,
        definition_id=definition_id,
        status=status,
        version=int(version),
        parent_id=parent_id or None,
        root_path=root_path,
        created_at=float(created_at),
        updated_at=float(updated_at),
    )


def _split_entry(member: Any) -> tuple[int, Any]:
    seq, body = text(member).split(" ", 1)
    return int(seq), load_json(body)


def decode_entry(member: Any) -> OutboxEntry:
    """Build an OutboxEntry from an outbox member (``seq json``)."""
    seq, body = _split_entry(member)
    return OutboxEntry(seq=seq, **body)


def decode_spawn(member: Any) -> SpawnEntry:
    """Build a SpawnEntry from a spawns member (``seq json``)."""
    seq, body = _split_entry(member)
    return SpawnEntry(seq=seq, **body)


def decode_timer(member: Any, score: float) -> DueTimer:
    """Build a DueTimer from a timers member (``len:execution_id`` + path) and its score."""
    raw = member if isinstance(member, bytes) else str(member).encode("utf-8")
    length, rest = raw.split(b":", 1)
    size = int(length)
    return DueTimer(
        execution_id=rest[:size].decode("utf-8"),
        path=rest[size:].decode("utf-8"),
        fire_at=float(score),
    )


def decode_trace(item: Any) -> TraceEntry:
    """Build a TraceEntry from a trace list item (``index recorded_at json``)."""
    index, recorded_at, body = text(item).split(" ", 2)
    return TraceEntry(index=int(index), recorded_at=float(recorded_at), **load_json(body))


def listing_position(after: int) -> tuple[int, int]:
    """The (shard, creation seq) a decoded listing cursor stands for."""
    return divmod(after, _SHARD_STRIDE)


def listing_cursor(shard: int, seq: int) -> int:
    """The int a listing cursor encodes for a position after ``seq`` in ``shard``."""
    return shard * _SHARD_STRIDE + seq
