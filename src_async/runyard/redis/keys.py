"""The Redis key space: length-prefixed segments under a namespace, hash-tagged for Cluster.

State keys carry the tenant as their hash tag, so everything one tenant owns lives in one slot
and a script may touch any of it; a queue tags its namespace, so one queue lives in one slot.
See docs/redis.md for the table of keys.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from runyard.errors import ConfigurationError

__all__ = [
    "MAX_PRIORITY",
    "QUEUE_LAYOUT",
    "QueueKeys",
    "StateKeys",
    "cleanup_patterns",
    "escape_glob",
    "join_key",
    "priority_key",
    "segment",
    "time_key",
    "validate_namespace",
]

_GLOB = re.compile(r"([*?\[\]\\])")


def segment(value: str) -> str:
    """Return ``value`` prefixed with its UTF-8 byte length: ``acme`` -> ``4:acme``."""
    return f"{len(value.encode('utf-8'))}:{value}"


def join_key(namespace: str, *parts: str) -> str:
    """Build ``namespace:part:part...`` where caller-supplied parts are already segments."""
    return ":".join((namespace, *parts))


def escape_glob(value: str) -> str:
    """Escape the characters Redis ``SCAN MATCH`` treats as a pattern."""
    return _GLOB.sub(r"\\\1", value)


# Priorities are encoded as fixed-width decimal text so a sorted set orders them lexically.
MAX_PRIORITY = 10**15 - 1
# The queue's key layout; queue/prelude.lua's LAYOUT. 1: every column of every item was a field
# of one `items` hash; 2: one small hash per item and a `meta` hash holding this version; 3: short
# item keys and field names, defaults left out, binary line entries, per-tenant item counts.
QUEUE_LAYOUT = 3
_NAMESPACE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")


def validate_namespace(namespace: str) -> str:
    """Return ``namespace`` if it is 1-64 characters of letters, digits, ``_``, ``.`` or ``-``.

    Braces are refused because the first ``{...}`` of a key is its Cluster hash tag.
    Raises ConfigurationError.
    """
    if not isinstance(namespace, str) or not _NAMESPACE.match(namespace):
        raise ConfigurationError(
            f"namespace {namespace!r} is not usable: use 1-64 letters, digits, '_', '.' or '-'"
        )
    return namespace


def priority_key(priority: int) -> str:
    """Return the 16-digit text that sorts higher priorities first.

    Raises ValueError outside +-MAX_PRIORITY.
    """
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ValueError(f"priority must be an int, not {type(priority).__name__}")
    if not -MAX_PRIORITY <= priority <= MAX_PRIORITY:
        raise ValueError(f"priority must be within +-{MAX_PRIORITY}, not {priority}")
    return f"{10**15 - priority:016d}"


def time_key(moment: float) -> str:
    """Return 16 hex digits that sort like ``moment`` (a non-negative time in seconds)."""
    return struct.pack(">d", max(moment, 0.0)).hex()


@dataclass(frozen=True)
class StateKeys:
    """Keys of one tenant's runs, sessions and run leases (hash tag: the tenant)."""

    namespace: str
    tenant: str

    @property
    def prefix(self) -> str:
        """``{ns}:state:{<tenant segment>}``; every key of the tenant starts with it."""
        return f"{self.namespace}:state:{{{segment(self.tenant)}}}"

    def run(self, run_id: str) -> str:
        """HASH: one run's blob, version, status, session, counters, times and seq."""
        return f"{self.prefix}:run:{segment(run_id)}"

    @property
    def runs(self) -> str:
        """ZSET: run ids scored by their creation sequence (the listing order)."""
        return f"{self.prefix}:runs"

    @property
    def seq(self) -> str:
        """STRING: the tenant's run sequence counter."""
        return f"{self.prefix}:seq"

    def lease(self, run_id: str) -> str:
        """HASH: a run's lease (holder, expires_at) and its fencing epoch, which outlives it."""
        return f"{self.prefix}:lease:{segment(run_id)}"

    @property
    def lease_floor(self) -> str:
        """STRING: the highest epoch prune() removed with a lease of the tenant's; a new epoch
        is above it."""
        return f"{self.prefix}:lease-floor"

    def session(self, session_id: str) -> str:
        """HASH: one session's blob, version and times."""
        return f"{self.prefix}:session:{segment(session_id)}"

    def session_runs(self, session_id: str) -> str:
        """SET: run ids ever written with this session (checked against each run on delete)."""
        return f"{self.prefix}:session-runs:{segment(session_id)}"

    def run_tombstone(self, run_id: str) -> str:
        """STRING: the last write id of a deleted run, for runyard.writes.TOMBSTONE_SECONDS."""
        return f"{self.prefix}:deleted-run:{segment(run_id)}"

    def session_tombstone(self, session_id: str) -> str:
        """STRING: the last write id of a deleted session, as run_tombstone."""
        return f"{self.prefix}:deleted-session:{segment(session_id)}"


@dataclass(frozen=True)
class QueueKeys:
    """Keys of one work queue (hash tag: the namespace): every queue script gets ``all()``, then
    the keys of the items (``item()``) and lines (``line()``) it is told about."""

    namespace: str

    @property
    def prefix(self) -> str:
        """``{ns}:queue:{<ns>}``; every key of the queue starts with it."""
        return f"{self.namespace}:queue:{{{self.namespace}}}"

    def all(self) -> list[str]:
        """The queue's keys in the order every queue script declares them in ``KEYS``."""
        p = self.prefix
        return [
            f"{p}:meta",  # HASH  layout -> QUEUE_LAYOUT
            f"{p}:ready",  # prefix of the tenants' ready lines (line())
            f"{p}:delayed",  # ZSET  score available_at, member <seq><item>
            f"{p}:leases",  # ZSET  score expires_at, member <token><item>
            f"{p}:workers",  # ZSET  lex <worker seg><token><item>
            f"{p}:dead",  # ZSET  lex <tenant seg><time key><item id>
            f"{p}:turns",  # HASH  tenant -> its turn in the rotation
            f"{p}:rotation",  # ZSET  score turn, member tenant (tenants with ready items)
            f"{p}:dedupe",  # HASH  <tenant seg><dedupe seg> -> item id
            f"{p}:counters",  # HASH  seq, token, turn
            self.legacy_items,
            self.wake,  # LIST  wake hints (wake.WAKE_LIST_MAX at most)
            f"{p}:tenants",  # HASH  tenant -> how many items it holds (absent: none)
            f"{p}:idle",  # ZSET  score turn: tenants left with no item (prune forgets them)
        ]

    @property
    def wake(self) -> str:
        """LIST: hints pushed by the scripts that make items ready; idle workers BLPOP it."""
        return f"{self.prefix}:wake"

    @property
    def legacy_items(self) -> str:
        """HASH of layout 1 (``<item>:<column>`` fields); only looked for, to refuse it."""
        return f"{self.prefix}:items"

    def line(self, tenant: str) -> str:
        """ZSET: one tenant's ready line (lex: priority, due time, seq, item id); declared to the
        scripts told the tenant, built inside the ones that pick it (lua/queue/prelude.lua)."""
        return f"{self.prefix}:ready:{segment(tenant)}"

    def item(self, tenant: str, item_id: str) -> str:
        """HASH: one item's columns (runyard.redis.items.FIELDS); ``{<ns>}:i:<tenant
        segment><id segment>``, short because there is one per item."""
        return f"{{{self.namespace}}}:i:{segment(tenant)}{segment(item_id)}"


def cleanup_patterns(namespace: str) -> list[str]:
    """``SCAN MATCH`` patterns that cover every key of ``namespace`` (glob characters escaped):
    its keys, and its queue's item hashes (``{<ns>}:i:...``)."""
    return [f"{escape_glob(namespace)}:*", f"{{{escape_glob(namespace)}}}:*"]
