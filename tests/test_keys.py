"""Identifiers and length-prefixed keys."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from runyard.keys import (
    MAX_IDENTIFIER_BYTES,
    InvalidIdentifierError,
    decode_cursor,
    encode_cursor,
    validate_identifier,
)
from runyard.redis.keys import StateKeys, escape_glob, join_key, segment

identifiers = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=40,
)


def run_key(tenant: str, run_id: str) -> str:
    return join_key("ns", "state", "{" + segment(tenant) + "}", "run", segment(run_id))


@given(identifiers, identifiers, identifiers, identifiers)
def test_distinct_tenant_id_pairs_never_build_the_same_key(a: str, b: str, c: str, d: str) -> None:
    if (a, b) != (c, d):
        assert run_key(a, b) != run_key(c, d)


@given(identifiers, identifiers, identifiers, identifiers)
def test_the_redis_store_never_builds_one_key_for_two_runs(a: str, b: str, c: str, d: str) -> None:
    first, second = StateKeys("ns", a).run(b), StateKeys("ns", c).run(d)
    assert (first == second) == ((a, b) == (c, d))
    assert StateKeys("ns", a).lease(b) != StateKeys("ns", c).session(d)


def test_separator_in_tenant_or_id_cannot_collide() -> None:
    assert run_key("a:b", "c") != run_key("a", "b:c")
    assert run_key("a", "b:c") == "ns:state:{1:a}:run:3:b:c"


def test_segment_counts_utf8_bytes_not_characters() -> None:
    assert segment("acme") == "4:acme"
    assert segment("é") == "2:é"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "must not be empty"),
        ("a\x00b", "NUL"),
        ("x" * (MAX_IDENTIFIER_BYTES + 1), "limit is 256 bytes"),
        ("é" * (MAX_IDENTIFIER_BYTES // 2 + 1), "limit is 256 bytes"),
        ("\ud800", "not valid UTF-8"),
        (42, "must be a str"),
    ],
)
def test_bad_identifiers_are_refused_with_a_reason(value: object, message: str) -> None:
    with pytest.raises(InvalidIdentifierError, match=message):
        validate_identifier(value, "tenant")


def test_identifier_at_the_byte_limit_is_accepted() -> None:
    assert validate_identifier("x" * MAX_IDENTIFIER_BYTES) == "x" * MAX_IDENTIFIER_BYTES


def test_invalid_identifier_error_is_a_value_error() -> None:
    assert issubclass(InvalidIdentifierError, ValueError)


def test_glob_characters_are_escaped() -> None:
    assert escape_glob("a*b?[c]\\") == "a\\*b\\?\\[c\\]\\\\"


@given(st.integers(min_value=0, max_value=2**62))
def test_cursor_round_trips(seq: int) -> None:
    assert decode_cursor(encode_cursor(seq)) == seq


@pytest.mark.parametrize("cursor", ["", "x12", "s", "s-1", "s1a", "s²", "s\u0661\u0662"])
def test_foreign_cursor_is_refused(cursor: str) -> None:
    with pytest.raises(InvalidIdentifierError, match="not issued"):
        decode_cursor(cursor)


@given(st.integers(min_value=0, max_value=2**62), st.text(min_size=1, max_size=20))
def test_a_scoped_cursor_round_trips_in_its_scope(seq: int, scope: str) -> None:
    assert decode_cursor(encode_cursor(seq, scope), scope) == seq


def test_a_scoped_cursor_is_refused_for_another_scope_and_where_none_is_taken() -> None:
    cursor = encode_cursor(5, "acme")
    assert cursor.startswith("s5.") and len(cursor) == len("s5.") + 8
    with pytest.raises(InvalidIdentifierError, match="another tenant's listing") as caught:
        decode_cursor(cursor, "globex")
    assert caught.value.argument == "cursor"
    with pytest.raises(InvalidIdentifierError, match="not issued"):
        decode_cursor(cursor)  # an execution listing's cursor has no scope
    assert decode_cursor("s5", "globex") == 5  # the form issued before scopes: any scope


@pytest.mark.parametrize(
    "cursor", ["s5.", "s5.xyz", "s5.ABCDEF01", "s5.0123456789", ".s5", "s.1234abcd"]
)
def test_a_cursor_with_a_malformed_scope_mark_is_refused(cursor: str) -> None:
    with pytest.raises(InvalidIdentifierError, match="not issued"):
        decode_cursor(cursor, "acme")
