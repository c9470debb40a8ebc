"""Parsing the state keys a prune SCAN returns (length-prefixed segments, so no tenant or id
can be mistaken for another key's)."""

from __future__ import annotations

import pytest
from runyard.redis.keys import StateKeys
from runyard.redis.retention import StateKeyName, parse_state_key, state_pattern


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
