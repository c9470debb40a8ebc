"""Parsing the state keys a prune SCAN returns (length-prefixed segments, so no tenant or id
can be mistaken for another key's)."""

from __future__ import annotations

import pytest
from runyard.redis.keys import StateKeys
from runyard.redis.retention import (
    PruneCandidates,
    ScanWalk,
    StateKeyName,
    parse_state_key,
    state_pattern,
)


@pytest.mark.parametrize(
    ("tenant", "ident"),
    [("acme", "r1"), ("a}:lease:5:b", "c:d"), ("ünï", "✓"), ("*", "[x]"), ("t", "")],
)
def test_lease_and_session_keys_parse_back(tenant: str, ident: str) -> None:
    keys = StateKeys("ns", tenant)
    assert parse_state_key("ns", keys.lease(ident)) == StateKeyName(tenant, "lease", ident)
    assert parse_state_key("ns", keys.session_runs(ident).encode()) == StateKeyName(
        tenant, "session-runs", ident
    )


def test_keys_of_other_shapes_are_not_parsed() -> None:
    keys = StateKeys("ns", "acme")
    assert parse_state_key("ns", keys.runs) is None
    assert parse_state_key("ns", keys.lease_floor) is None
    assert parse_state_key("other", keys.lease("r")) is None
    assert parse_state_key("ns", keys.lease("r") + "x") is None


def test_the_pattern_escapes_the_namespace() -> None:
    assert state_pattern("a*b") == "a\\*b:state:{*"


def test_a_scan_walk_ends_a_pass_when_every_node_replied_cursor_zero() -> None:
    walk = ScanWalk()
    assert walk.advance(b"17", nodes=3) is False and (walk.node, walk.cursor) == (0, 17)
    assert walk.advance(0, nodes=3) is False and walk.node == 1
    assert walk.advance("0", nodes=3) is False and walk.node == 2
    assert walk.advance(0, nodes=3) is True and (walk.node, walk.cursor) == (0, 0)
    assert ScanWalk().advance(0) is True  # one server: its cursor 0 ends the pass


def test_prune_candidates_keep_leases_and_session_sets_up_to_the_limit() -> None:
    a, b = StateKeys("ns", "a"), StateKeys("ns", "b")
    candidates = PruneCandidates("ns", limit=3)
    assert candidates.add([a.lease("r1"), a.runs, a.run("r1"), b.session_runs("s")]) is False
    assert candidates.add([b.lease("r2"), a.lease("r3"), a.lease("r4")]) is True
    assert candidates.leases == {"a": ["r1"], "b": ["r2"]}
    assert candidates.sessions == [("b", "s")]
