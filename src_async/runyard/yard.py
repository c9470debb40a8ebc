"""Yard URLs: one URL (or ``RUNYARD_URL``) names a backend and its options; parsing, no I/O.

``memory://``, ``redis://``, ``rediss://``, ``redis+cluster://``, ``rediss+cluster://``,
``postgresql://``, ``postgres://`` and ``sqlite://``. runyard's own options ride in the query
string (``?namespace=prod&durable=false&pool_size=20&live_updates=true``,
``?table_prefix=app_``); on Redis and PostgreSQL every other query parameter is left in the
URL for the driver (``sslmode=...``, ``options=...``). The password
(before the host, or a ``password``-like query parameter) is kept out of every repr, error
and log line: only ``redacted`` is ever shown.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import (
    parse_qsl,
    quote,
    unquote,
    unquote_plus,
    urlencode,
    urlsplit,
    urlunsplit,
)

from pydantic import ValidationError

from runyard.errors import ConfigurationError, InvalidArgumentError

if TYPE_CHECKING:
    from runyard.postgres.settings import PostgresStoreSettings
    from runyard.redis.settings import RedisStoreSettings
    from runyard.sqlite.schema import SqliteTables

__all__ = [
    "DEFAULT_URL",
    "ENV_VAR",
    "POSTGRES_SCHEMES",
    "REDIS_SCHEMES",
    "SqliteOptions",
    "YardURL",
    "default_url",
    "parse_yard_url",
    "postgres_queue_settings",
    "postgres_settings",
    "redact",
    "redis_queue_settings",
    "redis_settings",
    "refuse_unknown",
    "sqlite_options",
    "sqlite_path",
]

ENV_VAR = "RUNYARD_URL"
DEFAULT_URL = "sqlite:///runyard.db"
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


_SECRET_PARAMETERS = frozenset({"password", "pass", "passwd", "sslpassword"})
_HIDDEN = "<unparsable URL, hidden>"


def redact(url: str) -> str:
    """``url`` with every password in it replaced by ``***``: the one before the host and the
    value of a ``password``, ``pass``, ``passwd`` or ``sslpassword`` query parameter.

    A URL that does not parse cleanly is not shown at all: a bad port, or an ``@`` after the
    host (an unescaped ``#``, ``/`` or ``?`` in a password moves it there, and with it the
    password out of the part a parser knows to hide).
    """
    try:
        parts = urlsplit(url)
        password = parts.password
        parts.port  # noqa: B018 - parses the port, raising ValueError for a bad one
    except ValueError:
        return _HIDDEN
    if "@" in parts.path + parts.query + parts.fragment:
        return _HIDDEN
    netloc = parts.netloc
    if password is not None:
        userinfo, _, host = netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}:***@{host}"
    query = "&".join(_redact_parameter(p) for p in parts.query.split("&"))
    if (netloc, query) == (parts.netloc, parts.query):
        return url
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def _redact_parameter(parameter: str) -> str:
    """``name=value`` with the value hidden when the name is a password's."""
    name, equals, _ = parameter.partition("=")
    if equals and unquote_plus(name).strip().lower() in _SECRET_PARAMETERS:
        return f"{name}=***"
    return parameter


@dataclass(frozen=True)
class YardURL:
    """A parsed yard URL: ``scheme``, the query parameters, and the secret full URL."""

    scheme: str
    secret: str = field(repr=False)
    query: tuple[tuple[str, str], ...] = field(repr=False)

    @property
    def redacted(self) -> str:
        """The URL with its password hidden: the only form fit to show."""
        return redact(self.secret)

    def __repr__(self) -> str:
        return f"YardURL({self.redacted!r})"

    def split(
        self, names: Collection[str], scheme: str | None = None
    ) -> tuple[str, dict[str, str]]:
        """(the URL without the ``names`` parameters, with ``scheme`` if given; those options).

        Raises ConfigurationError for an option given twice.
        """
        options: dict[str, str] = {}
        rest: list[tuple[str, str]] = []
        for name, value in self.query:
            if name not in names:
                rest.append((name, value))
            elif name in options:
                raise ConfigurationError(f"option {name!r} is given twice in {self.redacted}")
            else:
                options[name] = value
        parts = urlsplit(self.secret)
        return urlunsplit(
            parts._replace(scheme=scheme or parts.scheme, query=urlencode(rest, quote_via=quote))
        ), options


def default_url(environ: dict[str, str] | None = None) -> str:
    """``RUNYARD_URL`` when set and not empty, else the embedded default
    ``sqlite:///runyard.db`` (a file in the working directory)."""
    value = (os.environ if environ is None else environ).get(ENV_VAR, "")
    return value.strip() or DEFAULT_URL


def parse_yard_url(url: str | None, known: Iterable[str]) -> YardURL:
    """Parse ``url`` (or ``default_url()`` when None) for one of the ``known`` schemes.

    Raises InvalidArgumentError (a ValueError) naming an unknown scheme and the known ones,
    ConfigurationError for an empty or malformed URL (without showing it).
    """
    text = url if url is not None else default_url()
    if not text:
        raise ConfigurationError("the yard URL is empty")
    schemes = sorted(known)
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - parses the port, raising ValueError for a bad one
    except ValueError:
        raise ConfigurationError(
            "the yard URL is not a valid URL (details hidden: they would show it)"
        ) from None
    scheme = parts.scheme.lower()
    if scheme not in schemes:
        known_ones = ", ".join(f"{s}://" for s in schemes)
        raise InvalidArgumentError(
            f"unknown yard URL scheme {scheme!r} in {redact(text)}: known schemes are "
            + known_ones,
            argument="url",
            limit=f"a URL of one of the schemes {known_ones}",
        )
    return YardURL(scheme, text, tuple(parse_qsl(parts.query, keep_blank_values=True)))


def flag(options: dict[str, str], name: str, default: bool = False) -> bool:
    """The boolean option ``name``. Raises ConfigurationError naming it and what it accepts."""
    value = options.pop(name, None)
    if value is None:
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ConfigurationError(f"option {name!r} must be one of {_TRUE + _FALSE}, not {value!r}")


def _settings(
    cls: Any, what: str, given: dict[str, str], names: dict[str, str], **fixed: Any
) -> Any:
    """Build ``cls`` from the URL options ``given`` (renamed by ``names``) and ``fixed``."""
    values = {names[k]: v for k, v in given.items()}
    options = {names[k]: k for k in given}
    try:
        return cls(**values, **fixed)
    except ConfigurationError as exc:
        # runyard's settings raise it naming their fields: name the options as the URL does.
        fields: tuple[str, ...] = getattr(exc, "fields", ()) or ()
        named = ", ".join(f"option {options.get(f, f)!r}" for f in fields)
        raise ConfigurationError(f"bad {what} yard URL: {named or 'options'}: {exc}") from None
    except ValidationError as exc:
        # Only the option names and pydantic's reasons: never the URL (it holds the password).
        reasons = "; ".join(
            f"option {options.get(str(e['loc'][0]), str(e['loc'][0]))!r}: {e['msg']}"
            for e in exc.errors()
            if e["loc"]
        )
        raise ConfigurationError(f"bad {what} yard URL: {reasons}") from None


REDIS_OPTIONS = {
    "namespace": "namespace",
    "durable": "durable",
    "pool_size": "max_connections",
    "max_connections": "max_connections",
    "socket_timeout": "socket_timeout",
    "retry_attempts": "retry_attempts",
    "max_value_bytes": "max_value_bytes",
}


def refuse_unknown(given: Iterable[str], known: Collection[str], what: str) -> None:
    """Raise ConfigurationError naming the first option of ``given`` not in ``known``."""
    for name in given:
        if name not in known:
            raise ConfigurationError(
                f"unknown option {name!r} in a {what} yard URL; runyard's options there are: "
                + ", ".join(sorted(known))
            )


def _runyard_looking(name: str, known: Collection[str]) -> bool:
    """Whether a query parameter looks meant for runyard rather than the driver: an option of
    another backend, or a near miss of one of ``known`` (``namespce``, ``live_update``)."""
    others = {*POSTGRES_OPTIONS, "live_updates"} - set(known)
    return name in others or bool(difflib.get_close_matches(name, known, n=1, cutoff=0.8))


def redis_settings(url: YardURL) -> tuple[str, RedisStoreSettings, bool]:
    """(the driver's URL, the store settings, live_updates) of a ``redis*://`` yard URL.

    Other query parameters go to redis-py, except one that looks meant for runyard (another
    backend's option, or a near miss of a Redis one): ConfigurationError names it.
    """
    from runyard.redis.common import check_database
    from runyard.redis.settings import RedisStoreSettings

    cluster = url.scheme.endswith("+cluster")
    scheme = url.scheme.removesuffix("+cluster")
    known = {*REDIS_OPTIONS, "live_updates"}
    refuse_unknown(
        (name for name, _ in url.query if name not in known and _runyard_looking(name, known)),
        known,
        "Redis",
    )
    dsn, options = url.split(known, scheme=scheme)
    try:
        check_database(dsn, cluster)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{url.redacted}: {exc}") from None
    live = flag(options, "live_updates")
    settings = _settings(
        RedisStoreSettings, "Redis", options, REDIS_OPTIONS, dsn=dsn, cluster=cluster
    )
    return dsn, settings, live


POSTGRES_OPTIONS = {
    "pool_size": "pool_max_size",
    "pool_max_size": "pool_max_size",
    "pool_min_size": "pool_min_size",
    "pool_timeout": "pool_timeout_seconds",
    "schema": "db_schema",
    "table_prefix": "table_prefix",
    "prepare": "prepare",
    "retry_attempts": "retry_attempts",
    "max_value_bytes": "max_value_bytes",
}


def _libpq_keywords() -> frozenset[str]:
    """The connection parameters the installed libpq takes (and ``ssl``, which its URIs take)."""
    from psycopg import pq

    return frozenset(d.keyword.decode() for d in pq.Conninfo.get_defaults()) | {"ssl"}


def postgres_settings(url: YardURL) -> tuple[PostgresStoreSettings, bool]:
    """(the store settings, live_updates) of a ``postgres[ql]://`` yard URL.

    Other query parameters go to libpq; one it does not take either (another backend's
    option such as ``namespace``, a typo) raises ConfigurationError naming it (libpq's own
    refusal could only be reported without details: it shows the DSN).
    """
    from runyard.postgres.settings import PostgresStoreSettings

    known = {*POSTGRES_OPTIONS, "live_updates"}
    libpq = _libpq_keywords()
    for name, _ in url.query:
        if name not in known and name not in libpq:
            raise ConfigurationError(
                f"unknown option {name!r} in a PostgreSQL yard URL: it is none of runyard's "
                f"options there ({', '.join(sorted(known))}) nor a libpq connection parameter"
            )
    dsn, options = url.split(known, scheme="postgresql")
    live = flag(options, "live_updates")
    return _settings(PostgresStoreSettings, "PostgreSQL", options, POSTGRES_OPTIONS, dsn=dsn), live


REDIS_SCHEMES = ("redis", "rediss", "redis+cluster", "rediss+cluster")
POSTGRES_SCHEMES = ("postgresql", "postgres")


def redis_queue_settings(url: str) -> tuple[str, RedisStoreSettings]:
    """(the driver's URL, the settings) that ``runyard worker`` opens for a Redis ``url``,
    parsed as ``Yard.from_url`` parses it. Raises ConfigurationError naming a bad option,
    before anything is opened."""
    with _options_refused():
        dsn, settings, _ = redis_settings(parse_yard_url(url, REDIS_SCHEMES))
    return dsn, settings


def postgres_queue_settings(url: str) -> PostgresStoreSettings:
    """The settings ``runyard worker`` opens for a PostgreSQL ``url`` (as
    ``redis_queue_settings``)."""
    with _options_refused():
        settings, _ = postgres_settings(parse_yard_url(url, POSTGRES_SCHEMES))
    return settings


@contextmanager
def _options_refused() -> Iterator[None]:
    """A bad option value (pydantic's ValueError) as the ConfigurationError naming it."""
    try:
        yield
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None


SQLITE_OPTIONS = ("durable", "live_updates", "table_prefix")


SQLITE_FORMS = (
    "sqlite:///relative/path.db (from the working directory), sqlite:////absolute/path.db, "
    "or sqlite:// (or sqlite:///:memory:) for a private in-memory database"
)


def sqlite_path(url: YardURL) -> str:
    """The database path of a ``sqlite:`` URL: ``sqlite:///runyard.db`` is relative to the working
    directory, ``sqlite:////var/lib/app.db`` absolute, ``sqlite://`` or ``sqlite:///:memory:``
    a private in-memory database. Raises ConfigurationError naming the forms above for any
    other: no ``//`` after ``sqlite:`` (``sqlite:runyard.db``, ``sqlite:/tmp/x.db``), an empty
    path (``sqlite:///``), a host, a fragment; and for a query option other than
    ``SQLITE_OPTIONS``."""
    parts = urlsplit(url.secret)
    if not url.secret.partition(":")[2].startswith("//"):
        raise ConfigurationError(
            f"{url.redacted}: a sqlite URL has '//' after 'sqlite:'; use {SQLITE_FORMS}"
        )
    if parts.netloc or parts.fragment:
        raise ConfigurationError(
            f"{url.redacted}: a sqlite URL has no host or fragment; use {SQLITE_FORMS}"
        )
    if parts.path == "/":
        raise ConfigurationError(f"{url.redacted}: the database path is empty; use {SQLITE_FORMS}")
    refuse_unknown((name for name, _ in url.query), SQLITE_OPTIONS, "SQLite")
    # urlsplit leaves "" for sqlite:// and "/<path>" for sqlite:///<path>.
    return unquote(parts.path[1:]) if parts.path else ":memory:"


class SqliteOptions(NamedTuple):
    """The options of a ``sqlite:`` URL."""

    durable: bool
    live_updates: bool
    tables: SqliteTables


def sqlite_options(url: YardURL) -> SqliteOptions:
    """The options of a ``sqlite:`` URL: ``durable`` (default true: ``synchronous=FULL``;
    false: ``NORMAL``), ``live_updates`` (default false) and ``table_prefix`` (default
    ``runyard_``: the tables are ``<prefix>runs``, ``<prefix>work_items`` ...).

    Raises ConfigurationError for an option given twice, a flag that is not one, or a
    table_prefix that is empty or does not make plain table names (naming the rule)."""
    from runyard.sqlite.schema import SqliteTables

    _, options = url.split(SQLITE_OPTIONS)  # raises for an option given twice
    prefix = options.get("table_prefix", "runyard_")
    if not prefix:
        raise ConfigurationError(
            f"option 'table_prefix' is empty in {url.redacted}: give a prefix, or leave the "
            "option out for the default 'runyard_'"
        )
    try:
        tables = SqliteTables.with_prefix(prefix)
    except ConfigurationError as exc:
        raise ConfigurationError(f"bad SQLite yard URL: option {exc}", fields=exc.fields) from None
    return SqliteOptions(
        flag(options, "durable", default=True), flag(options, "live_updates"), tables
    )
