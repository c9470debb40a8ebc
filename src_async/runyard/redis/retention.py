"""What the Redis prune steps share and is not I/O: the SCAN pattern of a namespace's state keys,
the parsing of the keys it returns, where a store's SCAN walk stands and the candidates one call
collects (see docs/redis.md)."""

from __future__ import annotations

from dataclasses import dataclass

from runyard.redis.keys import escape_glob

__all__ = [
    "PRUNE_SCAN_COUNT",
    "PRUNE_SCAN_STEPS",
    "PruneCandidates",
    "ScanWalk",
    "StateKeyName",
    "parse_state_key",
    "state_pattern",
]

# One prune call takes at most this many SCAN steps of this COUNT (the keys Redis examines).
PRUNE_SCAN_STEPS = 8
PRUNE_SCAN_COUNT = 500


@dataclass(frozen=True)
class StateKeyName:
    """A state key taken apart: ``kind`` is ``lease``, ``session-runs``, ``run``, ..."""

    tenant: str
    kind: str
    ident: str


def state_pattern(namespace: str) -> str:
    """``SCAN MATCH`` pattern of every state key of ``namespace`` (glob characters escaped)."""
    return f"{escape_glob(namespace)}:state:{{*"


def _segment(raw: bytes) -> tuple[str, bytes] | None:
    """Split ``<len>:<value>rest`` into (value, rest); None when it is not a segment."""
    size, colon, rest = raw.partition(b":")
    if not colon or not size.isdigit() or len(rest) < int(size):
        return None
    try:
        return rest[: int(size)].decode("utf-8"), rest[int(size) :]
    except UnicodeDecodeError:
        return None


def parse_state_key(namespace: str, key: bytes | str) -> StateKeyName | None:
    """Return the tenant, kind and id of ``{ns}:state:{<tenant>}:<kind>:<id>``, or None for a
    key of another shape (a tenant-wide key such as ``:runs``, or not a state key)."""
    raw = key.encode("utf-8") if isinstance(key, str) else key
    head = f"{namespace}:state:{{".encode()
    if not raw.startswith(head):
        return None
    tenant = _segment(raw[len(head) :])
    if tenant is None or not tenant[1].startswith(b"}:"):
        return None
    kind, colon, rest = tenant[1][2:].partition(b":")
    ident = _segment(rest) if colon else None
    if ident is None or ident[1]:
        return None
    return StateKeyName(tenant[0], kind.decode("ascii", "replace"), ident[0])


class ScanWalk:
    """Where a store's prune SCAN walk stands: the node (an index into a cluster's primaries in
    name order; always 0 on one server) and that node's cursor. Successive prune calls go on
    from here, so they walk the key space once per pass."""

    def __init__(self) -> None:
        self.node = 0
        self.cursor = 0

    def advance(self, cursor: int | bytes | str, nodes: int = 1) -> bool:
        """Take the cursor a SCAN step replied; True when a whole pass (every node) ended."""
        self.cursor = int(cursor)
        if self.cursor != 0:
            return False
        self.node = (self.node + 1) % nodes
        return self.node == 0


class PruneCandidates:
    """The keys one prune call removes, collected from SCAN steps up to ``limit``: lease
    hashes by tenant, and session run sets as (tenant, session id)."""

    def __init__(self, namespace: str, limit: int) -> None:
        self.namespace, self.limit = namespace, limit
        self.leases: dict[str, list[str]] = {}
        self.sessions: list[tuple[str, str]] = []
        self.found = 0

    def add(self, keys: list[bytes | str]) -> bool:
        """Take the candidates among one SCAN step's ``keys``; True once ``limit`` are held
        (the rest of the step is left for the next pass)."""
        for key in keys:
            if self.found == self.limit:
                break
            name = parse_state_key(self.namespace, key)
            if name is None:
                continue
            if name.kind == "lease":
                self.leases.setdefault(name.tenant, []).append(name.ident)
            elif name.kind == "session-runs":
                self.sessions.append((name.tenant, name.ident))
            else:
                continue
            self.found += 1
        return self.found == self.limit
