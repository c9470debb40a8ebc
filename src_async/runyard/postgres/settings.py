"""PostgresStoreSettings: how to reach PostgreSQL, with the DSN kept secret."""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from runyard._settings import RunyardSettings
from runyard.errors import ConfigurationError
from runyard.postgres.schema import SCHEMA_VERSIONS, StateTables
from runyard.validation import DEFAULT_MAX_VALUE_BYTES

__all__ = ["PostgresStoreSettings"]

SUPPORTED_SCHEMA_VERSIONS = tuple(sorted(set(SCHEMA_VERSIONS.values())))


class PostgresStoreSettings(RunyardSettings):
    """Settings of the PostgreSQL stores, read from ``RUNYARD_POSTGRES_*`` or passed in.

    ``dsn`` is a SecretStr: it never appears in a repr, a JSON dump, a log line or an error
    (``hide_input_in_errors``). Raises ConfigurationError naming every bad field (its
    ``fields``), never the values given.
    """

    model_config = SettingsConfigDict(
        env_prefix="RUNYARD_POSTGRES_", hide_input_in_errors=True, extra="forbid", frozen=True
    )

    dsn: SecretStr
    # None: each component at the version this runyard was written for (SCHEMA_VERSIONS).
    schema_version: int | None = None
    max_value_bytes: int = Field(default=DEFAULT_MAX_VALUE_BYTES, gt=0)
    retry_attempts: int = Field(default=3, ge=0, le=20)
    retry_backoff_seconds: float = Field(default=0.05, ge=0)
    pool_min_size: int = Field(default=1, ge=0)
    pool_max_size: int = Field(default=10, ge=1)
    pool_timeout_seconds: float = Field(default=5.0, gt=0)
    prepare: bool = True
    db_schema: str | None = None
    table_prefix: str = "runyard_"

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int | None) -> int | None:
        if value is not None and value not in SUPPORTED_SCHEMA_VERSIONS:
            raise ValueError(
                f"this runyard was written for schema version(s) {SUPPORTED_SCHEMA_VERSIONS}"
            )
        return value

    @model_validator(mode="after")
    def _coherent(self) -> PostgresStoreSettings:
        self.check_coherent()
        return self

    def check_coherent(self) -> None:
        """The pool's bounds in order, and names PostgreSQL takes, checked as the settings are
        built and again by ``from_settings`` (``model_copy(update=...)`` skips validators): a
        yard URL's ``table_prefix`` or ``schema`` was refused only after a connection was
        made, naming no option; ``pool_min_size`` above ``pool_max_size`` made a pool of
        ``pool_min_size`` connections. ConfigurationError naming the fields."""
        problems: list[tuple[tuple[str, ...], str]] = []
        if self.pool_min_size > self.pool_max_size:
            problems.append(
                (
                    ("pool_min_size", "pool_max_size"),
                    f"pool_min_size={self.pool_min_size} is more than pool_max_size="
                    f"{self.pool_max_size}: the pool would hold {self.pool_min_size} "
                    "connections, past its maximum; lower pool_min_size or raise pool_max_size",
                )
            )
        # Each name on its own (the default prefix with the schema), so both are named.
        for field, prefix, schema in (
            ("table_prefix", self.table_prefix, None),
            ("db_schema", "runyard_", self.db_schema),
        ):
            try:
                StateTables.with_prefix(prefix, schema=schema)
            except ConfigurationError as exc:
                problems.append(((field,), f"{field}: {exc}"))
        if problems:
            raise ConfigurationError(
                "; ".join(message for _, message in problems),
                fields=tuple(f for fields, _ in problems for f in fields),
            )

    def tables(self) -> StateTables:
        """The StateTables these settings name. Raises ConfigurationError for a bad name."""
        return StateTables.with_prefix(self.table_prefix, schema=self.db_schema)
