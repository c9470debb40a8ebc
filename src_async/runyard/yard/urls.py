"""Which backend a Yard URL names, and the default URL (no I/O)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

from runyard.errors import ConfigurationError

__all__ = ["DEFAULT_URL", "URL_VARIABLE", "YardTarget", "default_url", "parse_url"]

DEFAULT_URL = "sqlite:///runyard.db"
URL_VARIABLE = "RUNYARD_URL"
_SUPPORTED = "memory:// or sqlite:///path (sqlite:////absolute/path, sqlite:///:memory:)"


@dataclass(frozen=True)
class YardTarget:
    """A parsed Yard URL: the backend and, for SQLite, the database path."""

    backend: Literal["memory", "sqlite"]
    path: str | None = None


def default_url(environ: dict[str, str] | None = None) -> str:
    """``RUNYARD_URL`` when set and not empty, else ``sqlite:///runyard.db``."""
    value = (os.environ if environ is None else environ).get(URL_VARIABLE, "")
    return value.strip() or DEFAULT_URL


def parse_url(url: str) -> YardTarget:
    """Return what ``url`` names.

    ``memory://`` is the in-process backend; ``sqlite:///runyard.db`` a file relative to the
    working directory, ``sqlite:////var/lib/app.db`` an absolute one, ``sqlite://`` or
    ``sqlite:///:memory:`` a private in-memory database. Raises ConfigurationError for
    anything else, naming what is supported.
    """
    if not isinstance(url, str) or "://" not in url:
        raise ConfigurationError(f"url {url!r} is not a URL; Yard.from_url takes {_SUPPORTED}")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "memory":
        if parts.netloc or parts.path or parts.query:
            raise ConfigurationError(f"url {url!r}: memory:// takes no host, path or query")
        return YardTarget("memory")
    if scheme == "sqlite":
        if parts.netloc or parts.query or parts.fragment:
            raise ConfigurationError(
                f"url {url!r}: a sqlite URL has no host, query or fragment; use {_SUPPORTED}"
            )
        path = unquote(parts.path[1:]) if parts.path.startswith("/") else ""
        return YardTarget("sqlite", path or ":memory:")
    raise ConfigurationError(
        f"url scheme {parts.scheme!r} is not supported by Yard.from_url yet; use {_SUPPORTED}, "
        "or build the Redis or PostgreSQL stores directly (see docs/redis.md, docs/postgres.md)"
    )
