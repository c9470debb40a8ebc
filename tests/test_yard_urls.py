"""Yard URLs: SQLite paths, the default URL, redaction, and the clients rediss:// URLs build
(parsing and construction only, no I/O)."""

from __future__ import annotations

import pytest
import redis
from redis.asyncio import Redis as AsyncRedis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.asyncio.connection import Connection as AsyncConnection
from redis.asyncio.connection import SSLConnection as AsyncSSLConnection
from runyard import ConfigurationError
from runyard._async.redis.scripts import client_from_url as async_client_from_url
from runyard._async.yard import OPENERS as ASYNC_OPENERS
from runyard._sync.redis.scripts import client_from_url
from runyard._sync.yard import OPENERS
from runyard.sqlite.schema import MAX_TABLE_PREFIX, SqliteTables
from runyard.yard import (
    DEFAULT_URL,
    default_url,
    parse_yard_url,
    postgres_settings,
    redact,
    redis_settings,
    sqlite_options,
    sqlite_path,
)

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


@pytest.mark.parametrize("url", ["sqlite://host/x.db", "sqlite:///x.db#frag"])
def test_a_sqlite_url_with_a_host_or_fragment_is_refused(url: str) -> None:
    with pytest.raises(ConfigurationError, match="a sqlite URL has no host or fragment"):
        sqlite_path(parse_yard_url(url, KNOWN))


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("sqlite:runyard.db", "has '//' after 'sqlite:'"),
        ("sqlite:/tmp/x.db", "has '//' after 'sqlite:'"),
        ("sqlite:", "has '//' after 'sqlite:'"),
        ("sqlite:///", "the database path is empty"),
        ("sqlite:///?durable=false", "the database path is empty"),
    ],
)
def test_a_sqlite_url_not_in_a_documented_form_is_refused_naming_the_forms(
    url: str, why: str
) -> None:
    """Each of these opened a private in-memory database (or a relative path) without a word."""
    with pytest.raises(ConfigurationError, match=why) as caught:
        sqlite_path(parse_yard_url(url, KNOWN))
    assert "sqlite:////absolute/path.db" in str(caught.value)
    assert "sqlite:///relative/path.db" in str(caught.value)


def test_a_sqlite_option_given_twice_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="'durable' is given twice"):
        sqlite_options(parse_yard_url("sqlite:///x.db?durable=false&durable=true", KNOWN))


@pytest.mark.parametrize("name", ["mode", "prefix", "namespace"])
def test_a_sqlite_url_refuses_an_option_it_does_not_know_naming_it_and_the_known(
    name: str,
) -> None:
    with pytest.raises(ConfigurationError, match=rf"'{name}'.*durable, live_updates, table_prefix"):
        sqlite_path(parse_yard_url(f"sqlite:///x.db?{name}=ro", KNOWN))


@pytest.mark.parametrize(
    ("url", "options"),
    [
        ("sqlite:///x.db", (True, False, "runyard_")),
        ("sqlite:///x.db?durable=false&live_updates=true", (False, True, "runyard_")),
        ("sqlite:///x.db?live_updates=1&table_prefix=app_", (True, True, "app_")),
    ],
)
def test_a_sqlite_url_takes_durable_live_updates_and_table_prefix(
    url: str, options: tuple[bool, bool, str]
) -> None:
    parsed = parse_yard_url(url, KNOWN)
    assert sqlite_path(parsed) == "x.db"
    durable, live, prefix = options
    assert sqlite_options(parsed) == (durable, live, SqliteTables.with_prefix(prefix))


@pytest.mark.parametrize(
    "prefix",
    ["App_", "app-", "1app_", "sqlite_", "a%20b", "x" * (MAX_TABLE_PREFIX + 1), "app_%3B--"],
)
def test_a_sqlite_table_prefix_that_makes_no_plain_table_names_is_refused_naming_the_rule(
    prefix: str,
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        sqlite_options(parse_yard_url(f"sqlite:///x.db?table_prefix={prefix}", KNOWN))
    said = str(caught.value)
    assert "option table_prefix=" in said and caught.value.fields == ("table_prefix",)
    assert f"at most {MAX_TABLE_PREFIX} lower-case letters, digits and underscores" in said


def test_the_longest_sqlite_table_prefix_is_taken() -> None:
    prefix = "x" * MAX_TABLE_PREFIX
    parsed = parse_yard_url(f"sqlite:///x.db?table_prefix={prefix}", KNOWN)
    assert sqlite_options(parsed).tables.trace_heads == prefix + "execution_trace_heads"


def test_an_empty_sqlite_table_prefix_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="'table_prefix' is empty"):
        sqlite_options(parse_yard_url("sqlite:///x.db?table_prefix=", KNOWN))


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


# -- rediss:// (TLS) --------------------------------------------------------------------------
# The yard's Redis opener builds its client with redis_settings() and client_from_url(), then
# runs preflight (a round trip); these tests build the client the same way and stop there. The
# host is under .invalid (RFC 6761, never resolves): a client that connected while being built
# would raise here.


@pytest.mark.parametrize("scheme", ["rediss", "rediss+cluster"])
def test_both_twins_accept_the_tls_schemes(scheme: str) -> None:
    assert scheme in OPENERS and scheme in ASYNC_OPENERS
    assert OPENERS[scheme] is OPENERS["redis"] and ASYNC_OPENERS[scheme] is ASYNC_OPENERS["redis"]


@pytest.mark.asyncio
async def test_a_rediss_url_builds_clients_on_ssl_connections() -> None:
    url = parse_yard_url("rediss://u:s3cret@tls.invalid:6380/2?namespace=prod", OPENERS)
    dsn, settings, live = redis_settings(url)
    assert (settings.cluster, settings.namespace, live) == (False, "prod", False)
    assert dsn == "rediss://u:s3cret@tls.invalid:6380/2"
    client = async_client_from_url(dsn, settings)
    try:
        assert isinstance(client, AsyncRedis) and not isinstance(client, AsyncRedisCluster)
        pool = client.connection_pool
        assert pool.connection_class is AsyncSSLConnection
        assert (pool.connection_kwargs["host"], pool.connection_kwargs["port"]) == (
            "tls.invalid",
            6380,
        )
        assert pool.connection_kwargs["db"] == 2
    finally:
        await client.aclose()
    blocking = client_from_url(dsn, settings)  # the sync twin's client
    try:
        assert isinstance(blocking, redis.Redis)
        assert blocking.connection_pool.connection_class is redis.SSLConnection
        assert blocking.connection_pool.connection_kwargs["host"] == "tls.invalid"
    finally:
        blocking.close()


@pytest.mark.asyncio
async def test_a_rediss_cluster_url_builds_a_cluster_client_on_ssl_connections() -> None:
    # Only the asyncio RedisCluster can be built without a server: it discovers its nodes on
    # first use, whereas the blocking RedisCluster (the sync twin's) connects in its constructor.
    url = parse_yard_url("rediss+cluster://tls.invalid:7000?namespace=prod", ASYNC_OPENERS)
    dsn, settings, _ = redis_settings(url)
    assert settings.cluster is True and dsn == "rediss://tls.invalid:7000"
    client = async_client_from_url(dsn, settings)
    try:
        assert isinstance(client, AsyncRedisCluster)
        manager = client.nodes_manager
        assert manager.connection_kwargs["connection_class"] is AsyncSSLConnection
        startup = [(n.host, n.port, n.connection_class) for n in manager.startup_nodes.values()]
        assert startup == [("tls.invalid", 7000, AsyncSSLConnection)]
    finally:
        await client.aclose()


@pytest.mark.asyncio
async def test_a_redis_cluster_url_without_tls_builds_plain_connections() -> None:
    url = parse_yard_url("redis+cluster://tls.invalid:7000", ASYNC_OPENERS)
    client = async_client_from_url(*redis_settings(url)[:2])
    try:
        assert isinstance(client, AsyncRedisCluster)
        assert client.nodes_manager.connection_kwargs["connection_class"] is AsyncConnection
    finally:
        await client.aclose()


@pytest.mark.parametrize("option", ["socket_timeout=3", "durable=false", "namespace=x", "fo=1"])
def test_a_postgresql_url_names_an_option_neither_runyard_nor_libpq_takes(option: str) -> None:
    # The README listed namespace, durable and socket_timeout for every backend: on PostgreSQL
    # they went to libpq, whose refusal could only be "not a valid connection string".
    url = parse_yard_url(f"postgresql://u:S3CRET@h/db?schema=s&{option}", ["postgresql"])
    with pytest.raises(ConfigurationError, match=f"unknown option '{option.split('=')[0]}'") as bad:
        postgres_settings(url)
    assert "S3CRET" not in str(bad.value) and "libpq" in str(bad.value)
    taken = parse_yard_url(
        "postgresql://u@h/db?sslmode=disable&connect_timeout=3&ssl=true", ["postgresql"]
    )
    settings, live = postgres_settings(taken)
    assert "connect_timeout=3" in settings.dsn.get_secret_value() and live is False
