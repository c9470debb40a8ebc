"""A first connection that fails says why at once: a wrong setting is a ConfigurationError
carrying libpq's reason; a refused port is retryable and names the refusal too."""

from __future__ import annotations

import pytest
from runyard.errors import ConfigurationError, StatePersistenceError
from runyard.postgres import AsyncPostgresStateStore, AsyncPostgresWorkQueue, PostgresStoreSettings

from tests.support.postgres_plugin import PG_HOST, PG_PORT
from tests.support.servers import free_port

TIMEOUT = "options='-c statement_timeout=30s'"


def settings(dsn: str) -> PostgresStoreSettings:
    return PostgresStoreSettings(dsn=dsn)  # type: ignore[arg-type,unused-ignore]


@pytest.mark.asyncio
async def test_an_unknown_role_is_a_configuration_error_naming_the_role(pg_server: None) -> None:
    dsn = f"host={PG_HOST} port={PG_PORT} user=runyard_no_such_role dbname=test {TIMEOUT}"
    with pytest.raises(ConfigurationError, match='role "runyard_no_such_role" does not exist'):
        await AsyncPostgresStateStore.from_settings(settings(dsn))


@pytest.mark.asyncio
async def test_an_unknown_database_is_a_configuration_error_naming_it(pg_server: None) -> None:
    dsn = f"host={PG_HOST} port={PG_PORT} user=postgres dbname=runyard_no_such_db {TIMEOUT}"
    with pytest.raises(ConfigurationError, match='database "runyard_no_such_db" does not exist'):
        await AsyncPostgresWorkQueue.from_settings(settings(dsn))


@pytest.mark.asyncio
async def test_a_malformed_port_is_a_configuration_error(pg_server: None) -> None:
    dsn = f"postgresql://postgres@{PG_HOST}:notaport/test"
    with pytest.raises(ConfigurationError, match="port") as caught:
        await AsyncPostgresStateStore.from_settings(settings(dsn))
    assert caught.value.retryable is False


@pytest.mark.asyncio
async def test_a_closed_port_is_retryable_and_names_the_refusal(pg_server: None) -> None:
    dsn = f"host=127.0.0.1 port={free_port()} user=postgres dbname=test {TIMEOUT}"
    with pytest.raises(StatePersistenceError, match="Connection refused") as caught:
        await AsyncPostgresStateStore.from_settings(settings(dsn))
    assert caught.value.retryable is True
