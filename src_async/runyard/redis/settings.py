"""RedisStoreSettings: where the server is and how the store treats it (pydantic-settings)."""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from runyard._settings import RunyardSettings
from runyard.errors import ConfigurationError
from runyard.redis.keys import validate_namespace
from runyard.validation import DEFAULT_MAX_VALUE_BYTES

__all__ = ["RedisStoreSettings"]


class RedisStoreSettings(RunyardSettings):
    """Settings of a Redis store or queue, read from arguments or ``RUNYARD_REDIS_*``.

    ``dsn`` is a SecretStr: the password never appears in a repr, a log line or an error.
    ``durable=False`` accepts a server that persists nothing (tests, caches). Raises
    ConfigurationError naming every bad field (its ``fields``), never the values given.
    """

    model_config = SettingsConfigDict(
        env_prefix="RUNYARD_REDIS_", hide_input_in_errors=True, frozen=True, extra="forbid"
    )

    dsn: SecretStr = SecretStr("redis://127.0.0.1:6379/0")
    cluster: bool = False
    namespace: str = "runyard"
    durable: bool = True
    max_value_bytes: int = Field(default=DEFAULT_MAX_VALUE_BYTES, ge=1)
    retry_attempts: int = Field(default=6, ge=1, le=100)
    retry_backoff_base: float = Field(default=0.05, ge=0)
    retry_backoff_cap: float = Field(default=2.0, ge=0)
    socket_timeout: float = Field(default=5.0, gt=0)
    max_connections: int = Field(default=64, ge=1)
    # How long a command waits for a free connection of a full pool before PoolExhaustedError
    # (single server, clients built by from_url; a cluster client's node pools fail at once).
    pool_timeout_seconds: float = Field(default=5.0, gt=0)

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        try:
            return validate_namespace(value)
        except ConfigurationError as exc:
            # A ValueError, so pydantic reports it with the other fields' errors.
            raise ValueError(str(exc)) from None
