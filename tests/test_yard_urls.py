"""SQLite yard URLs and the default URL (parsing only, no I/O)."""

from __future__ import annotations

import pytest
from runyard import ConfigurationError
from runyard.yard import DEFAULT_URL, default_url, parse_yard_url, redact, sqlite_path

KNOWN = {"memory", "sqlite", "redis", "postgresql"}


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///runyard.db", "runyard.db"),
        ("sqlite:///data/app.db", "data/app.db"),
        ("sqlite:////var/lib/app.db", "/var/lib/app.db"),
        ("sqlite:///my%20file.db", "my file.db"),
        ("sqlite://", ":memory:"),
        ("sqlite:///:memory:", ":memory:"),
        ("SQLITE:///x.db", "x.db"),
    ],
)
def test_sqlite_urls_name_their_path(url: str, path: str) -> None:
    parsed = parse_yard_url(url, KNOWN)
    assert parsed.scheme == "sqlite"
    assert sqlite_path(parsed) == path


@pytest.mark.parametrize("url", ["sqlite://host/x.db", "sqlite:///x.db?mode=ro"])
def test_a_sqlite_url_with_a_host_or_query_is_refused(url: str) -> None:
    with pytest.raises(ConfigurationError, match="a sqlite URL has no host, query or fragment"):
        sqlite_path(parse_yard_url(url, KNOWN))


def test_the_default_url_is_runyard_url_else_the_sqlite_file() -> None:
    assert DEFAULT_URL == "sqlite:///runyard.db"
    assert default_url({}) == DEFAULT_URL
    assert default_url({"RUNYARD_URL": "  "}) == DEFAULT_URL
    assert default_url({"RUNYARD_URL": "memory://"}) == "memory://"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql://h/db?password=s3cret&sslmode=require",
            "postgresql://h/db?password=***&sslmode=require",
        ),
        ("postgres://u@h/db?PASS=s3cret", "postgres://u@h/db?PASS=***"),
        (
            "postgres://h/db?passwd=s3cret&sslpassword=s3cret",
            "postgres://h/db?passwd=***&sslpassword=***",
        ),
        ("redis://u:s3cret@h:6379/0?password=s3cret", "redis://u:***@h:6379/0?password=***"),
        ("redis://h:6379/0?namespace=prod", "redis://h:6379/0?namespace=prod"),
    ],
)
def test_redact_hides_every_password(url: str, shown: str) -> None:
    assert redact(url) == shown


@pytest.mark.parametrize(
    "url",
    ["redis://u:pa#s3cret@host:6379/0", "postgres://u:pa/s3cret@h/db", "redis://u:s3cret@h:port/0"],
)
def test_redact_shows_nothing_of_a_url_that_does_not_parse_cleanly(url: str) -> None:
    assert redact(url) == "<unparsable URL, hidden>"


def test_no_error_shows_a_query_password() -> None:
    twice_url = parse_yard_url("postgresql://h/db?schema=a&schema=b&password=s3cret", KNOWN)
    with pytest.raises(ConfigurationError, match="given twice") as twice:
        twice_url.split({"schema"})
    assert "s3cret" not in str(twice.value) and "password=***" in str(twice.value)
    with pytest.raises(ValueError, match="unknown yard URL scheme") as unknown:
        parse_yard_url("mysql://h/db?password=s3cret", ["memory"])
    assert "s3cret" not in str(unknown.value)
    parsed = parse_yard_url("postgresql://h/db?password=s3cret", KNOWN)
    assert "s3cret" not in repr(parsed)
