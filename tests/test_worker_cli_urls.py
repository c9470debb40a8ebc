"""``runyard worker --url``: a Redis or PostgreSQL URL's options (``namespace``, ``durable``,
``schema``, ``table_prefix``, ...) are parsed as ``Yard.from_url`` parses them, so the worker
serves the same stores a yard opened with that URL does; a bad option value is a configuration
error (exit 2) naming it. Before, the whole URL went to the driver: psycopg refused
``table_prefix`` as an invalid URI query parameter, and ``redis+cluster://`` was an unknown
scheme."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from runyard.models import WorkItem
from runyard.postgres import StateTables, schema_sql
from runyard.redis import RedisStoreSettings, RedisWorkQueue

from tests._sync.postgres_support import open_queue
from tests.support.postgres_plugin import PG_HOST, PG_PORT, admin_connection
from tests.support.redis_plugin import Clients, RedisTarget, fresh_namespace
from tests.test_worker_cli import finish, start
from tests.test_worker_process import ROOT, SAFETY, wait_for_starts


def _serves_one(tmp_path: Path, flavour: str, url: str, queue: Any, item: WorkItem) -> None:
    """The command started on ``url`` runs ``item`` (enqueued on ``queue``), which is then
    completed; a SIGTERM ends the command cleanly. ``queue`` is closed."""
    process = start(tmp_path, flavour, {}, "--url", url)
    try:
        assert wait_for_starts(tmp_path, 1, process) == [item.item_id]
        (tmp_path / "release").touch()
        code, log = finish(process)
        assert code == 0 and "Traceback" not in log, log
        assert queue.get_item("acme", item.item_id) is None  # completed
    finally:
        if process.poll() is None:
            process.kill()
        queue.close()


@pytest.mark.parametrize("flavour", ["async", "sync"])
def test_a_worker_serves_the_postgres_schema_and_table_prefix_its_url_names(
    pg_schema: str, tmp_path: Path, flavour: str
) -> None:
    tables = StateTables.with_prefix("app_", schema=pg_schema)
    with admin_connection() as conn:
        conn.execute(schema_sql(tables))
    queue = open_queue(tables)
    item = queue.enqueue("acme", {"n": 1})
    url = f"postgresql://postgres@{PG_HOST}:{PG_PORT}/test?schema={pg_schema}&table_prefix=app_"
    url += "&options=-c%20statement_timeout%3D30s"  # a driver option: passed on to psycopg
    _serves_one(tmp_path, flavour, url, queue, item)  # from the app_ tables


@pytest.mark.parametrize("flavour", ["async", "sync"])
@pytest.mark.parametrize(
    ("target_fixture", "scheme"),
    [("local_redis_target", "redis"), ("cluster_redis_target", "redis+cluster")],
)
def test_a_worker_serves_the_redis_namespace_its_url_names(
    request: pytest.FixtureRequest, tmp_path: Path, flavour: str, target_fixture: str, scheme: str
) -> None:
    # On one server and on a Redis Cluster (redis+cluster://, as Yard.from_url takes it).
    target: RedisTarget = request.getfixturevalue(target_fixture)
    namespace = fresh_namespace()
    queue = RedisWorkQueue(
        Clients.for_target(target),
        settings=RedisStoreSettings(namespace=namespace, durable=False),
        owns_client=True,
    )
    item = queue.enqueue("acme", {"n": 1})
    url = f"{scheme}://{target.host}:{target.port}/0?namespace={namespace}&durable=false"
    _serves_one(tmp_path, flavour, url, queue, item)


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("postgresql://postgres@127.0.0.1:1/test?pool_size=many", "pool_size"),
        ("redis://127.0.0.1:1/0?socket_timeout=soon", "socket_timeout"),
        ("redis://127.0.0.1:1/0?table_prefix=app_", "table_prefix"),
        ("redis+cluster://:S3CRET@127.0.0.1:1/3", "only database 0"),
        # redis-py read it as database 0: the wrong database, served without a word.
        ("redis://:S3CRET@127.0.0.1:1/abc", "is not a number"),
        ("redis://:S3CRET@127.0.0.1:1?db=abc", "is not a number"),
        # redis-py raised its own error building the client: exit 1, a traceback.
        ("redis+cluster://:S3CRET@127.0.0.1:1?db=3", "only database 0"),
        # memory:// took any query and served; Yard.from_url refused it.
        ("memory://?namespce=x", "unknown option 'namespce'"),
        ("memory://?live_updates=banana", "option 'live_updates' must be one of"),
        # Another backend's option went to libpq, refused without its name.
        ("postgresql://postgres:S3CRET@127.0.0.1:1/test?namespace=x", "unknown option 'namespace'"),
    ],
)
def test_a_bad_option_in_a_server_url_is_a_configuration_error_naming_it(
    tmp_path: Path, url: str, named: str
) -> None:
    # Port 1: nothing listens there, so an attempt to connect would be retried as an outage
    # (no exit); the refusal comes first, from the URL alone.
    command = [sys.executable, "-c", "from runyard.cli.app import app; app()", "worker"]
    command += ["tests.support.worker_jobs:gated", "--url", url]
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=SAFETY, check=False
    )
    assert result.returncode == 2, result.stderr
    assert named in result.stderr and "Traceback" not in result.stderr
    assert "S3CRET" not in result.stderr


@pytest.mark.parametrize("handler", ["gated", "gated_sync --sync"])
@pytest.mark.parametrize(
    ("path", "named"),
    [
        ("redis://{host}:{port}/99", "DB index is out of range"),
        ("redis+cluster://{host}:{port}", "Cluster mode is not enabled"),
    ],
)
def test_a_url_the_redis_server_refuses_is_a_configuration_error(
    local_redis_target: RedisTarget, path: str, named: str, handler: str
) -> None:
    # Both came out of the driver unmapped: exit 1 and a traceback of some 230 lines (the
    # cluster one never reached the retry policy: redis-py's RedisClusterException is not a
    # RedisError). The thread twin's cluster client connects as it is built, outside the
    # retry policy: that one stayed a traceback until client_from_url mapped it too.
    url = path.format(host=local_redis_target.host, port=local_redis_target.port)
    name, *flags = handler.split()
    command = [sys.executable, "-c", "from runyard.cli.app import app; app()", "worker"]
    command += [f"tests.support.worker_jobs:{name}", *flags, "--url", url + "?durable=false"]
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=SAFETY, check=False
    )
    assert result.returncode == 2, result.stderr
    said = " ".join(result.stderr.split())
    assert named in said and "not retried" in said and "Traceback" not in said, said


@pytest.mark.parametrize(
    "dsn",
    ["redis://127.0.0.1:1/twelve", "redis://127.0.0.1:1/0?db=x", "unix:///tmp/r.sock?db=two"],
)
def test_a_store_refuses_a_redis_database_that_is_not_a_number(dsn: str) -> None:
    # Only the yard's URLs were checked: a store's from_url or settings.dsn served database 0.
    from runyard.errors import ConfigurationError
    from runyard.redis.common import check_database

    with pytest.raises(ConfigurationError, match="not a number"):
        RedisWorkQueue.from_url(dsn, settings=RedisStoreSettings(durable=False))
    with pytest.raises(ConfigurationError, match="not a number"):
        RedisWorkQueue.from_url(settings=RedisStoreSettings(dsn=dsn, durable=False))
    check_database("unix:///tmp/r.sock?db=2", cluster=False)  # a socket path is no database
    # Read as redis-py reads it: percent-decoded, and the db parameter over the path.
    for valid in ("redis://h/%31", "redis://h/%2F2", "redis://h/abc?db=1", "redis://h/3?db=3"):
        check_database(valid, cluster=False)
    check_database("redis://h:7000/%30", cluster=True)


def test_a_refused_redis_database_never_shows_the_password() -> None:
    # A password holding an unescaped / ends up in the path: the message quoted it.
    from runyard.errors import ConfigurationError

    with pytest.raises(ConfigurationError) as caught:
        RedisWorkQueue.from_url("redis://:pa/S3CRET99@127.0.0.1:1/0")
    assert "S3CRET" not in str(caught.value) and "%2F" in str(caught.value)


def test_a_blocking_cluster_client_that_reaches_no_node_is_a_retryable_store_error() -> None:
    # The blocking RedisCluster connects as it is built; its RedisClusterException escaped
    # raw (the worker's startup, which waits out an unreachable store, did not know it).
    from runyard._sync.redis.scripts import client_from_url
    from runyard.errors import QueueUnavailableError, StatePersistenceError
    from runyard.redis import RedisStoreSettings
    from runyard.redis.common import state_unavailable

    settings = RedisStoreSettings(cluster=True, retry_attempts=1)
    with pytest.raises(QueueUnavailableError, match="Redis did not answer") as caught:
        client_from_url("redis://127.0.0.1:1", settings)
    assert caught.value.retryable
    with pytest.raises(StatePersistenceError) as state:
        client_from_url("redis://127.0.0.1:1", settings, state_unavailable)
    assert state.value.reason == "unavailable" and state.value.retryable
