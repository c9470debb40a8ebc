"""AsyncYard.from_url: every scheme opens its three stores; errors name what is wrong and never
show the password."""

from __future__ import annotations

import logging
import socket
import traceback
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from pydantic import SecretStr
from runyard import (
    AsyncMemoryStateStore,
    AsyncYard,
    ConfigurationError,
    InvalidArgumentError,
    QueueUnavailableError,
    RunKey,
    StatePersistenceError,
)
from runyard._async.redis.scripts import client_from_url
from runyard._flavours import AsyncEvent, async_gather, async_sleep
from runyard.errors import RunyardError
from runyard.postgres import AsyncPostgresStateStore, PostgresStoreSettings, StateTables
from runyard.redis import RedisStoreSettings
from runyard.yard import redact

from tests.support.postgres_plugin import PG_HOST, PG_PORT
from tests.support.redis_plugin import RedisTarget, fresh_namespace

KEY = RunKey("acme", "yarded")
SECRET = "s3cret-pw-x9"
PG_OPTIONS = "options=-c%20statement_timeout%3D30s"


def _pg_url(tables: StateTables, scheme: str = "postgresql", password: str = "") -> str:
    auth = f"postgres:{password}" if password else "postgres"
    return f"{scheme}://{auth}@{PG_HOST}:{PG_PORT}/test?{PG_OPTIONS}&schema={tables.schema}"


@pytest.fixture
def namespace(local_redis_target: RedisTarget) -> Iterator[str]:
    name = fresh_namespace()
    yield name
    local_redis_target.purge(name)


async def _round_trip(yard: AsyncYard) -> None:
    await yard.state.put_run(KEY, {"n": 1}, expected_version=0)
    record = await yard.state.get_run(KEY)
    assert record is not None and record.blob == {"n": 1}
    item = await yard.queue.enqueue("acme", {"run": KEY.run_id})
    assert item.payload == {"run": KEY.run_id}
    assert await yard.executions.load("never-started") is None


@pytest.mark.asyncio
async def test_memory_opens_the_three_stores() -> None:
    async with await AsyncYard.from_url("memory://?live_updates=true") as yard:
        assert isinstance(yard.state, AsyncMemoryStateStore)
        assert yard.state.live_updates is not None
        await _round_trip(yard)


@pytest.mark.asyncio
async def test_runyard_url_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNYARD_URL", "memory://")
    async with await AsyncYard.from_url() as yard:
        assert isinstance(yard.state, AsyncMemoryStateStore)


@pytest.mark.asyncio
@pytest.mark.parametrize("scheme", ["redis", "redis+cluster"])
async def test_redis_schemes_open_with_the_query_options(
    scheme: str, request: pytest.FixtureRequest
) -> None:
    fixture = "cluster_redis_target" if scheme.endswith("cluster") else "local_redis_target"
    target: RedisTarget = request.getfixturevalue(fixture)
    name = fresh_namespace()
    url = f"{scheme}://{target.host}:{target.port}?namespace={name}&durable=false&pool_size=8"
    try:
        async with await AsyncYard.from_url(url + "&live_updates=true") as yard:
            assert yard.state.settings.namespace == name  # type: ignore[attr-defined]
            assert yard.state.settings.cluster is scheme.endswith("cluster")  # type: ignore[attr-defined]
            assert yard.state.settings.max_connections == 8  # type: ignore[attr-defined]
            assert yard.state.live_updates is not None  # type: ignore[attr-defined]
            await _round_trip(yard)
            state: Any = yard.state  # the event log's protocol
            updates = state.live_updates
            await state.append_event(KEY, "step", {})
            followed = []
            async for event in state.follow(KEY):
                followed.append(event.type)
                if event.type == "step":
                    await state.finalize(KEY, status="completed", event_type="done", event_data={})
            assert followed == ["step", "done"]
            assert updates.connections > 0  # the follower listened on a connection of its own
        assert updates.connections == 0  # closed with the yard
    finally:
        target.purge(name)


@pytest.mark.asyncio
async def test_redis_preflight_runs(dedicated_redis_target: RedisTarget) -> None:
    # The dedicated server persists nothing: durable (the default) is refused by preflight.
    with pytest.raises(ConfigurationError, match="durable"):
        await AsyncYard.from_url(f"redis://127.0.0.1:{dedicated_redis_target.port}")


@pytest.mark.asyncio
@pytest.mark.parametrize("live", [False, True])
async def test_a_closed_redis_yard_refuses_its_stores_calls_and_opens_no_connection(
    dedicated_redis_target: RedisTarget, live: bool
) -> None:
    # After close the stores went on working: redis-py reconnected on the next command (a
    # follower of the closed yard polled on, its connection never closed). Now every call is
    # the store's unavailable error, nothing sent, and no connection is opened.
    port = dedicated_redis_target.port
    url = f"redis://127.0.0.1:{port}/0?namespace={fresh_namespace()}&durable=false"
    with redis.Redis(port=port) as admin:
        before = {c["id"] for c in admin.client_list()} - {str(admin.client_id())}
    yard = await AsyncYard.from_url(url + ("&live_updates=true" if live else ""))
    await yard.state.put_run(KEY, {}, expected_version=0)
    item = await yard.queue.enqueue("acme", {})
    followed: list[int] = []
    ended: list[BaseException] = []
    closed = AsyncEvent()

    async def follow() -> None:
        try:
            async for event in yard.state.follow(KEY, poll_seconds=0.05):  # type: ignore[attr-defined]
                followed.append(event.seq)
                if closed.is_set():
                    return  # it went on after close: the asserts below say so
        except Exception as exc:  # what the follower ended with
            ended.append(exc)

    async def close_while_followed() -> None:
        await async_sleep(0.2)  # the follower polls (or waits on its hints) meanwhile
        await yard.aclose()
        closed.set()
        # Another yard appends: a follower still working would be given these and stop.
        other = await AsyncYard.from_url(url)
        try:
            for n in range(40):
                if ended:
                    break
                await other.state.append_event(KEY, "tick", n)  # type: ignore[attr-defined]
                await async_sleep(0.05)
        finally:
            await other.aclose()

    await async_gather([follow, close_while_followed])
    assert followed == []
    assert len(ended) == 1 and isinstance(ended[0], StatePersistenceError), ended
    assert "closed" in str(ended[0]) and ended[0].reason == "unavailable"
    with pytest.raises(StatePersistenceError, match="closed"):
        await yard.state.get_run(KEY)
    with pytest.raises(QueueUnavailableError, match="closed"):
        await yard.queue.claim("w")
    with pytest.raises(QueueUnavailableError, match="closed"):
        await yard.queue.enqueue("acme", {})
    with pytest.raises(StatePersistenceError, match="closed"):
        await yard.executions.load("e1")
    with redis.Redis(port=port) as admin:
        # None of the yard's connections (nor a follower's) is left, and none was opened.
        me = admin.client_id()
        assert {c["id"] for c in admin.client_list()} - {str(me)} <= before
    other = await AsyncYard.from_url(url)
    try:  # the refused claim took nothing: the item is still ready, never attempted
        stored = await other.queue.get_item("acme", item.item_id)
        assert stored is not None and (stored.state, stored.attempts) == ("ready", 0)
    finally:
        await other.aclose()


@pytest.mark.asyncio
@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
async def test_postgres_schemes_share_one_verified_pool(
    scheme: str, pg_tables: StateTables
) -> None:
    async with await AsyncYard.from_url(_pg_url(pg_tables, scheme) + "&pool_size=3") as yard:
        executor = yard.state.executor  # type: ignore[attr-defined]
        assert yard.queue.executor is executor  # type: ignore[attr-defined]
        assert yard.executions.executor is executor  # type: ignore[attr-defined]
        assert executor.source.max_size == 3
        await _round_trip(yard)


@pytest.mark.asyncio
async def test_postgres_verify_runs(pg_schema: str) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        await AsyncYard.from_url(
            f"postgresql://postgres@{PG_HOST}:{PG_PORT}/test?{PG_OPTIONS}&schema={pg_schema}"
        )


@pytest.mark.asyncio
async def test_an_unknown_scheme_is_named_with_the_known_ones() -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        await AsyncYard.from_url(f"mysql://user:{SECRET}@somewhere/db")
    assert isinstance(caught.value, ValueError) and caught.value.argument == "url"
    message = str(caught.value)
    assert "'mysql'" in message
    for known in (
        "memory://",
        "redis://",
        "rediss://",
        "redis+cluster://",
        "postgresql://",
        "sqlite://",
    ):
        assert known in message
    assert SECRET not in message


@pytest.mark.asyncio
async def test_a_bad_option_names_it(namespace: str) -> None:
    with pytest.raises(ConfigurationError, match="'durable'"):
        await AsyncYard.from_url(f"redis://127.0.0.1:6379?namespace={namespace}&durable=maybe")


@pytest.mark.asyncio
async def test_the_password_never_shows_in_a_repr(pg_tables: StateTables) -> None:
    async with await AsyncYard.from_url(_pg_url(pg_tables, password=SECRET)) as yard:
        assert SECRET not in repr(yard)
        assert "postgres:***@" in repr(yard)
    assert SECRET not in redact(f"redis://:{SECRET}@h:1/0")


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "url",
    [
        f"redis://:{SECRET}@127.0.0.1:1/0?retry_attempts=1&durable=false",
        f"postgresql://postgres:{SECRET}@127.0.0.1:1/test?{PG_OPTIONS}",
    ],
)
async def test_the_password_never_shows_in_an_error_or_a_log_line(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(Exception) as caught:
        await AsyncYard.from_url(url)
    shown = "".join(traceback.format_exception(caught.value))
    assert SECRET not in shown
    assert SECRET not in caplog.text


@pytest.mark.asyncio
async def test_a_bad_option_is_named_as_the_url_spells_it() -> None:
    with pytest.raises(ConfigurationError, match="'pool_size'"):
        await AsyncYard.from_url(f"postgresql://postgres@{PG_HOST}:{PG_PORT}/test?pool_size=0")


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("query", "options"),
    [
        ("table_prefix=App_", ["'table_prefix'"]),
        ("table_prefix=" + "a" * 61, ["'table_prefix'"]),
        ("schema=Bad-Name", ["'schema'"]),
        ("pool_min_size=5&pool_size=2", ["'pool_min_size'", "'pool_size'"]),
    ],
)
async def test_a_bad_postgres_name_or_pool_bound_is_refused_before_connecting(
    query: str, options: list[str]
) -> None:
    # table_prefix and schema were checked only once a connection was made, naming no option;
    # pool_min_size above pool_size made a pool of pool_min_size connections. A listener
    # that counts connection attempts stands in for the server: none is made.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        port = listener.getsockname()[1]
        url = f"postgresql://postgres@127.0.0.1:{port}/test?{PG_OPTIONS}&connect_timeout=1&"
        with pytest.raises(ConfigurationError, match="bad PostgreSQL yard URL") as caught:
            await AsyncYard.from_url(url + query)
        for option in options:
            assert f"option {option}" in str(caught.value)
        with pytest.raises(BlockingIOError):
            listener.accept()  # no connection was attempted


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("url", "option"),
    [
        ("memory://?namespace=prod", "namespace"),
        ("memory://?live_updates=true&bogus=1", "bogus"),
        ("redis://127.0.0.1:6379/0?schema=jobs", "schema"),
        ("redis://127.0.0.1:6379/0?namespce=prod", "namespce"),
        ("redis://127.0.0.1:6379/0?live_update=true", "live_update"),
    ],
)
async def test_an_unknown_runyard_option_is_refused_naming_it(url: str, option: str) -> None:
    with pytest.raises(ConfigurationError, match=f"unknown option '{option}'"):
        await AsyncYard.from_url(url)


@pytest.mark.asyncio
@pytest.mark.parametrize("query", ["sslmode=require", "unknownparam=1"])
async def test_a_redis_url_parameter_redis_py_does_not_take_is_refused_naming_it(
    query: str,
) -> None:
    # redis-py hands a parameter it does not know to the connection: a bare TypeError at the
    # first command ("__init__() got an unexpected keyword argument 'sslmode'").
    name = query.split("=")[0]
    url = f"redis://127.0.0.1:6379/0?namespace={fresh_namespace()}&durable=false&{query}"
    with pytest.raises(ConfigurationError, match=f"'{name}'"):
        await AsyncYard.from_url(url)
    # Parameters redis-py's connections do take still pass.
    good = "client_name=runyard-test&socket_connect_timeout=2&health_check_interval=5"
    yard = await AsyncYard.from_url(url.replace(query, good))
    await yard.aclose()


@pytest.mark.asyncio
async def test_a_bad_libpq_value_in_the_url_is_refused_at_once_naming_it() -> None:
    # The probe connection passed a connect_timeout of its own, which overrode the URL's: the
    # probe connected, then every pool connection failed on the bad value, and after the
    # pool's 5 s the error was a retryable "could not connect within 5.0 s".
    with pytest.raises(ConfigurationError, match="bad value for connect_timeout"):
        await AsyncYard.from_url(
            f"postgresql://postgres@{PG_HOST}:{PG_PORT}/test?{PG_OPTIONS}&connect_timeout=abc"
        )


@pytest.mark.asyncio
@pytest.mark.parametrize("scheme", ["redis+cluster", "rediss+cluster"])
async def test_a_cluster_url_parameter_redis_py_does_not_take_is_refused_before_connecting(
    scheme: str,
) -> None:
    # One cluster client raised a bare TypeError; the thread twin's connected first (and on a
    # cluster went on to fail in its nodes' connections). Nothing listens on port 1: the
    # refusal comes before any connection.
    url = f"{scheme}://127.0.0.1:1?namespace={fresh_namespace()}&durable=false&sslmode=require"
    with pytest.raises(ConfigurationError, match="'sslmode'"):
        await AsyncYard.from_url(url)


@pytest.mark.asyncio
async def test_settings_copied_past_their_checks_are_checked_again_by_from_settings() -> None:
    # model_copy(update=...) skips pydantic's validators: psycopg_pool then raised its own
    # ValueError ("max_size must be greater or equal than min_size").
    settings = PostgresStoreSettings(
        dsn=SecretStr(f"host={PG_HOST} port={PG_PORT} user=postgres dbname=test")
    ).model_copy(update={"pool_min_size": 12})
    with pytest.raises(ConfigurationError, match="pool_min_size=12 is more than") as caught:
        await AsyncPostgresStateStore.from_settings(settings)
    assert caught.value.fields == ("pool_min_size", "pool_max_size")


def test_postgres_settings_name_every_bad_field_at_once() -> None:
    # The first check to fail was the only one named (the class promises every bad field).
    with pytest.raises(ConfigurationError) as caught:
        PostgresStoreSettings(
            dsn=SecretStr("host=x"),
            pool_min_size=5,
            pool_max_size=2,
            table_prefix="App_",
            db_schema="Bad-Name",
        )
    assert caught.value.fields == ("pool_min_size", "pool_max_size", "table_prefix", "db_schema")


@pytest.mark.asyncio
async def test_a_cluster_dsn_may_size_its_nodes_pools() -> None:
    # max_connections sizes each node's pool (redis-py takes it): refused by the first version
    # of the cluster URL check. Nothing listens on port 1: the client's first command would
    # fail, not its construction.
    settings = RedisStoreSettings(
        dsn=SecretStr("redis://127.0.0.1:1/0?max_connections=5&socket_connect_timeout=1"),
        cluster=True,
        durable=False,
        namespace=fresh_namespace(),
    )
    try:
        client = client_from_url(None, settings)
    except ConfigurationError as exc:  # a refusal of a parameter redis-py takes
        raise AssertionError(exc) from None
    except RunyardError:
        return  # the thread twin's cluster client connects as it is built: unavailable here
    await client.aclose()
