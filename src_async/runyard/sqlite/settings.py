"""SqliteStoreSettings: where the SQLite file is and how hard a commit holds on to it."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from runyard.sqlite.schema import SqliteTables
from runyard.validation import DEFAULT_MAX_VALUE_BYTES

__all__ = ["DEFAULT_BUSY_TIMEOUT_SECONDS", "MEMORY_PATH", "SqliteStoreSettings", "is_memory_path"]

DEFAULT_BUSY_TIMEOUT_SECONDS = 5.0
MEMORY_PATH = ":memory:"


def is_memory_path(path: str) -> bool:
    """Whether ``path`` names a private in-memory database rather than a file."""
    return path == MEMORY_PATH or path.startswith("file::memory:")


class SqliteStoreSettings(BaseSettings):
    """Settings of the SQLite stores, read from ``RUNYARD_SQLITE_*`` or passed in.

    ``durable=False`` relaxes ``synchronous`` from FULL to NORMAL (a power cut may lose the
    last commits, never corrupt the file). Raises pydantic.ValidationError for a bad setting.
    """

    model_config = SettingsConfigDict(env_prefix="RUNYARD_SQLITE_", extra="forbid", frozen=True)

    path: str = "runyard.db"
    durable: bool = True
    busy_timeout_seconds: float = Field(default=DEFAULT_BUSY_TIMEOUT_SECONDS, gt=0, le=3600)
    create_schema: bool = False
    max_value_bytes: int = Field(default=DEFAULT_MAX_VALUE_BYTES, gt=0)
    table_prefix: str = "runyard_"

    def tables(self) -> SqliteTables:
        """The SqliteTables these settings name. Raises ConfigurationError for a bad name."""
        return SqliteTables.with_prefix(self.table_prefix)
