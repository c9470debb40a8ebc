"""RedisStoreSettings keep the DSN's password out of every repr, dump, log and error."""

from __future__ import annotations

import logging

import pytest
from pydantic import ValidationError
from runyard.errors import ConfigurationError, StatePersistenceError
from runyard.redis import RedisStateStore, RedisStoreSettings

from tests.support.servers import free_port

PASSWORD = "hunter2-Secret"
DSN = f"redis://:{PASSWORD}@127.0.0.1:6399/0"


def test_the_password_is_not_in_repr_str_or_dumps() -> None:
    settings = RedisStoreSettings(dsn=DSN)
    for shown in (
        repr(settings),
        str(settings),
        settings.model_dump_json(),
        str(settings.model_dump()),
    ):
        assert PASSWORD not in shown
    assert settings.dsn.get_secret_value() == DSN


def test_the_password_is_not_in_a_validation_error() -> None:
    with pytest.raises(ConfigurationError) as caught:
        RedisStoreSettings(dsn=DSN, retry_attempts="many")
    assert PASSWORD not in str(caught.value) and PASSWORD not in repr(caught.value)


def test_every_bad_field_raises_one_configuration_error_naming_each() -> None:
    # A bad namespace and a bad number: one error type for both, both named.
    with pytest.raises(ConfigurationError) as caught:
        RedisStoreSettings(dsn=DSN, namespace="a b", max_connections=PASSWORD)
    assert not isinstance(caught.value, ValidationError)
    assert caught.value.fields == ("namespace", "max_connections")
    message = str(caught.value)
    assert "namespace: namespace 'a b' is not usable" in message
    assert "max_connections" in message and PASSWORD not in message
    assert caught.value.__cause__ is None


def test_the_password_is_not_in_a_connection_error_or_log(caplog: pytest.LogCaptureFixture) -> None:
    dsn = f"redis://:{PASSWORD}@127.0.0.1:{free_port()}/0"
    settings = RedisStoreSettings(
        dsn=dsn, retry_attempts=2, retry_backoff_base=0.001, retry_backoff_cap=0.001
    )
    with caplog.at_level(logging.DEBUG), pytest.raises(StatePersistenceError) as caught:
        RedisStateStore.from_url(settings=settings)
    assert PASSWORD not in str(caught.value) and PASSWORD not in repr(caught.value)
    assert PASSWORD not in caplog.text
    assert caught.value.retryable is True


def test_a_namespace_with_braces_is_refused() -> None:
    with pytest.raises(ConfigurationError):
        RedisStoreSettings(namespace="{oops}")


def test_settings_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNYARD_REDIS_DSN", DSN)
    monkeypatch.setenv("RUNYARD_REDIS_NAMESPACE", "prod")
    settings = RedisStoreSettings()
    assert settings.namespace == "prod" and settings.dsn.get_secret_value() == DSN
