"""Which backend a Yard URL names."""

from __future__ import annotations

import pytest
from runyard import ConfigurationError
from runyard.yard import DEFAULT_URL, YardTarget, default_url, parse_url


@pytest.mark.parametrize(
    ("url", "target"),
    [
        ("memory://", YardTarget("memory")),
        ("sqlite:///runyard.db", YardTarget("sqlite", "runyard.db")),
        ("sqlite:///data/app.db", YardTarget("sqlite", "data/app.db")),
        ("sqlite:////var/lib/app.db", YardTarget("sqlite", "/var/lib/app.db")),
        ("sqlite:///my%20file.db", YardTarget("sqlite", "my file.db")),
        ("sqlite://", YardTarget("sqlite", ":memory:")),
        ("sqlite:///:memory:", YardTarget("sqlite", ":memory:")),
        ("SQLITE:///x.db", YardTarget("sqlite", "x.db")),
    ],
)
def test_supported_urls(url: str, target: YardTarget) -> None:
    assert parse_url(url) == target


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis://localhost", "not supported by Yard.from_url yet"),
        ("runyard.db", "is not a URL"),
        ("sqlite://host/x.db", "no host"),
        ("sqlite:///x.db?mode=ro", "no host, query"),
        ("memory://somewhere", "takes no host"),
    ],
)
def test_other_urls_are_refused_naming_what_is_supported(url: str, says: str) -> None:
    with pytest.raises(ConfigurationError, match=says) as caught:
        parse_url(url)
    assert "sqlite:///path" in str(caught.value) or "memory://" in str(caught.value)


def test_the_default_url_is_runyard_url_else_a_local_file() -> None:
    assert default_url({}) == DEFAULT_URL == "sqlite:///runyard.db"
    assert default_url({"RUNYARD_URL": "memory://"}) == "memory://"
    assert default_url({"RUNYARD_URL": "  "}) == DEFAULT_URL
