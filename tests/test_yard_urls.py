"""SQLite yard URLs and the default URL (parsing only, no I/O)."""

from __future__ import annotations

import pytest
from runyard import ConfigurationError
from runyard.yard import DEFAULT_URL, default_url, parse_yard_url, sqlite_path

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
