"""PostgresStoreSettings: the password never shows in a repr, a dump, a log line or an error."""

from __future__ import annotations

import logging

import pydantic
import pytest
from runyard import ConfigurationError, RunKey, RunyardError
from runyard.postgres import (
    AsyncPostgresStateStore,
    PostgresStateStore,
    PostgresStoreSettings,
    StateTables,
)

from tests.support.postgres_plugin import PG_HOST, PG_PORT
from tests.support.servers import free_port

PASSWORD = "hunter2-Sup3rSecret"
DSN = f"postgresql://runyard:{PASSWORD}@127.0.0.1:5432/test"


def test_the_password_is_not_in_repr_str_or_dumps() -> None:
    settings = PostgresStoreSettings(dsn=DSN)
    for text in (repr(settings), str(settings), settings.model_dump_json(), str(settings.dsn)):
        assert PASSWORD not in text
    assert settings.dsn.get_secret_value() == DSN


def test_the_password_is_not_in_a_validation_error() -> None:
    with pytest.raises(ConfigurationError) as caught:
        PostgresStoreSettings(dsn=DSN, max_value_bytes="lots")  # type: ignore[arg-type]
    assert PASSWORD not in str(caught.value) and PASSWORD not in repr(caught.value)
    with pytest.raises(ConfigurationError) as caught:
        PostgresStoreSettings(dsn=DSN, nonsense=DSN)  # type: ignore[call-arg]
    assert PASSWORD not in str(caught.value) and caught.value.fields == ("nonsense",)


def test_every_bad_field_raises_one_configuration_error_naming_each() -> None:
    with pytest.raises(ConfigurationError) as caught:
        PostgresStoreSettings(dsn=DSN, pool_max_size=0, retry_attempts=PASSWORD)  # type: ignore[arg-type]
    assert not isinstance(caught.value, pydantic.ValidationError)
    assert caught.value.fields == ("retry_attempts", "pool_max_size")
    message = str(caught.value)
    assert "pool_max_size" in message and "retry_attempts" in message
    assert PASSWORD not in message and caught.value.__cause__ is None


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNYARD_POSTGRES_DSN", DSN)
    monkeypatch.setenv("RUNYARD_POSTGRES_TABLE_PREFIX", "app_")
    settings = PostgresStoreSettings()  # type: ignore[call-arg]
    assert settings.tables().runs == "app_runs"
    assert PASSWORD not in repr(settings)


def test_an_unsupported_schema_version_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="schema_version: this runyard was written for"):
        PostgresStoreSettings(dsn=DSN, schema_version=7)


def test_a_failed_connection_error_and_log_never_show_the_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dsn = f"postgresql://runyard:{PASSWORD}@127.0.0.1:{free_port()}/test?connect_timeout=1"
    settings = PostgresStoreSettings(dsn=dsn, pool_timeout_seconds=0.5)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(RunyardError) as caught:
        PostgresStateStore.from_settings(settings)
    text = f"{caught.value!s} {caught.value!r} {caught.value.__cause__!r}"
    assert PASSWORD not in text
    assert PASSWORD not in caplog.text


def test_a_malformed_dsn_error_never_shows_the_password() -> None:
    settings = PostgresStoreSettings(dsn=f"host=127.0.0.1 password={PASSWORD} bogus")
    with pytest.raises(ConfigurationError, match="not a valid PostgreSQL connection string") as c:
        PostgresStateStore.from_settings(settings)
    assert PASSWORD not in f"{c.value!s} {c.value!r} {c.value.__cause__!r}"


@pytest.mark.asyncio
async def test_a_store_from_settings_shows_no_password(pg_tables: StateTables) -> None:
    # The test server trusts local connections, so the password is carried but never checked.
    dsn = f"postgresql://postgres:{PASSWORD}@{PG_HOST}:{PG_PORT}/test?options=-c%20statement_timeout%3D5s"
    settings = PostgresStoreSettings(dsn=dsn, db_schema=pg_tables.schema)
    store = await AsyncPostgresStateStore.from_settings(settings)
    async with store:
        assert await store.get_run(RunKey("acme", "r")) is None
        assert PASSWORD not in repr(store) and PASSWORD not in str(store)
