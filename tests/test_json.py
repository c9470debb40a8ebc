"""Strict JSON: every backend accepts and refuses the same values."""

from __future__ import annotations

import random

import pytest
from runyard._json import MAX_JSON_DEPTH, _depth, dump_json, load_json
from runyard.errors import StatePersistenceError


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), {"k": "a\x00b"}, {"a\x00": 1}, "\ud800", {1, 2}, object()],
    ids=["nan", "inf", "nul-value", "nul-key", "surrogate", "set", "object"],
)
def test_values_jsonb_would_refuse_are_refused_permanently(value: object) -> None:
    with pytest.raises(StatePersistenceError) as caught:
        dump_json(value)
    assert caught.value.reason == "invalid" and not caught.value.retryable


def test_escaped_backslash_before_u0000_text_is_not_a_nul() -> None:
    text = "literally \\u0000"
    assert load_json(dump_json({"t": text})) == {"t": text}


def test_size_limit_counts_encoded_bytes() -> None:
    dump_json({"s": "é" * 10}, max_bytes=30)
    with pytest.raises(StatePersistenceError) as caught:
        dump_json({"s": "é" * 20}, max_bytes=30)
    assert caught.value.reason == "too_large" and not caught.value.retryable
    assert "max_value_bytes" in str(caught.value)


def test_round_trip_keeps_unicode_and_nesting() -> None:
    value = {"a": [1, 2.5, None, True], "ü": {"✓": "ok"}}
    assert load_json(dump_json(value)) == value


def _nested(depth: int, inner: object = None) -> object:
    value: object = [] if inner is None else [inner]
    for _ in range(depth - 1):
        value = [value]
    return value


def test_nesting_is_counted_outside_strings_only() -> None:
    # Brackets, quotes and backslashes inside strings are no nesting.
    tricky = _nested(MAX_JSON_DEPTH, '"[[{{\\\\"' + "[" * 600)
    assert load_json(dump_json(tricky)) == tricky
    with pytest.raises(StatePersistenceError, match="nested 513 levels deep") as deep:
        dump_json([tricky])
    assert deep.value.reason == "invalid"
    # Thousands of brackets, none deep: stored (the count alone refuses nothing).
    wide = [{"k": [i, {"x": "]]]"}]} for i in range(5_000)]
    assert load_json(dump_json(wide)) == wide
    # 5,000 deep: past Python 3.11's C encoder recursion limit (RecursionError, "too deeply");
    # Python 3.13's encodes it and the count refuses it. The same refusal either way.
    with pytest.raises(StatePersistenceError, match=r"nested (too deeply|5000 levels deep)") as big:
        dump_json(_nested(5_000))
    assert big.value.reason == "invalid" and "the limit is 512 levels" in str(big.value)


def _reference_depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max((_reference_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_reference_depth(v) for v in value), default=0)
    return 0


def test_the_depth_count_matches_the_values_own_on_a_seeded_sample() -> None:
    # Seeded: the same 2,000 values every run. Their strings mix brackets, quotes, backslashes
    # and escapes (\n, \u00e9) that a count on the text must step over.
    rng = random.Random(20261203)
    pieces = ["[", "]", "{", "}", '"', "\\", "\n", "é", "x", '\\"', "[]"]

    def value(level: int) -> object:
        roll = rng.random()
        if level > 6 or roll < 0.3:
            return "".join(rng.choice(pieces) for _ in range(rng.randrange(6)))
        if roll < 0.65:
            return [value(level + 1) for _ in range(rng.randrange(4))]
        return {"".join(rng.choice(pieces) for _ in range(3)): value(level + 1) for _ in range(3)}

    for _ in range(2_000):
        sample = value(0)
        assert _depth(dump_json(sample)) == _reference_depth(sample), sample
