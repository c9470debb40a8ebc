"""SqliteStoreSettings: where the SQLite file is and how hard a commit holds on to it."""

from __future__ import annotations

import contextlib
import os
from typing import Any
from urllib.parse import parse_qsl

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from runyard.errors import ConfigurationError
from runyard.sqlite.schema import SqliteTables
from runyard.validation import DEFAULT_MAX_VALUE_BYTES, is_finite, shown

__all__ = [
    "DEFAULT_BUSY_TIMEOUT_SECONDS",
    "MAX_BUSY_TIMEOUT_SECONDS",
    "MEMORY_PATH",
    "SqliteStoreSettings",
    "check_busy_timeout",
    "check_connection_options",
    "check_open_flag",
    "check_path",
    "check_wal",
    "is_memory_path",
    "is_uri",
]

DEFAULT_BUSY_TIMEOUT_SECONDS = 5.0
# An hour: far past any write's wait worth having, and within the int milliseconds SQLite's
# busy handler takes (sqlite3 casts a longer timeout to a C int: 0 or garbage, no wait at all).
MAX_BUSY_TIMEOUT_SECONDS = 3600.0
MEMORY_PATH = ":memory:"


def check_busy_timeout(value: object) -> float:
    """``value`` as a float when it is a finite number of seconds in (0, 3600] (not a bool);
    else ConfigurationError naming ``busy_timeout_seconds`` and the limit. The one check of
    both ``open(busy_timeout_seconds=)`` / ``connect`` and ``SqliteStoreSettings``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not is_finite(value)
        or not 0 < value <= MAX_BUSY_TIMEOUT_SECONDS
    ):
        raise ConfigurationError(
            f"busy_timeout_seconds is {shown(value)}: it must be a number of seconds greater "
            f"than 0 and at most {MAX_BUSY_TIMEOUT_SECONDS:g}",
            fields=("busy_timeout_seconds",),
        )
    return float(value)


def check_path(path: str | os.PathLike[str]) -> str:
    """``path`` as a string; ConfigurationError naming ``path`` for anything but a str or an
    ``os.PathLike`` of one, and for the empty path, which sqlite3 would open as a private
    temporary database (gone at close) where a file was meant."""
    where = os.fspath(path) if isinstance(path, str | os.PathLike) else None
    if not isinstance(where, str):
        raise ConfigurationError(
            f"path must be a str or an os.PathLike of one (a file path, or ':memory:'), not "
            f"{type(path).__name__}",
            fields=("path",),
        )
    if not where:
        raise ConfigurationError(
            "the SQLite path is empty (sqlite3 would open a private temporary database, gone "
            "at close): give a file path, or ':memory:' for a private in-memory database",
            fields=("path",),
        )
    return where


def check_open_flag(value: object, argument: str) -> bool:
    """``value`` if it is a bool; else ConfigurationError naming ``argument`` (``durable``,
    ``create``, ``create_schema``: read by truthiness, ``durable=None`` relaxed the fsync
    and ``durable="no"`` kept it)."""
    if not isinstance(value, bool):
        raise ConfigurationError(
            f"{argument} must be True or False, not {value!r}", fields=(argument,)
        )
    return value


def check_connection_options(
    connection: Any, durable: bool | None, busy_timeout_seconds: float | None
) -> None:
    """Refuse ``durable`` or ``busy_timeout_seconds`` given to a store on a shared connection
    unless it is the connection's own: both are set when the connection is opened (the
    pragmas, the driver's wait), so another value was ignored without a word. ConfigurationError
    naming the argument, both values and the repair; ``None`` (not given) passes."""
    if durable is not None:
        check_open_flag(durable, "durable")
        if durable != connection.durable:
            raise ConfigurationError(
                f"durable={durable} was given with a shared connection opened with "
                f"durable={connection.durable}: a connection's durability (synchronous = FULL "
                "or NORMAL) is set when it is opened; pass durable= to connect(path, ...), or "
                "leave it out here",
                fields=("durable",),
            )
    if busy_timeout_seconds is not None:
        busy = check_busy_timeout(busy_timeout_seconds)
        if busy != connection.busy_timeout_seconds:
            raise ConfigurationError(
                f"busy_timeout_seconds={busy:g} was given with a shared connection opened with "
                f"busy_timeout_seconds={connection.busy_timeout_seconds:g}: a connection's "
                "busy timeout is set when it is opened; pass busy_timeout_seconds= to "
                "connect(path, ...), or leave it out here",
                fields=("busy_timeout_seconds",),
            )


def check_wal(path: str, mode: object) -> None:
    """ConfigurationError naming the file and ``mode`` when ``PRAGMA journal_mode = WAL`` on the
    file ``path`` returned another mode than ``wal`` (an in-memory database has none)."""
    if not is_memory_path(path) and str(mode).lower() != "wal":
        raise ConfigurationError(
            f"the SQLite database {path!r} did not switch to WAL: PRAGMA journal_mode = WAL "
            f"returned {mode!r}; runyard needs WAL (readers beside the writer): give a file on "
            "a local filesystem, not a temporary or read-only database"
        )


def is_uri(path: str) -> bool:
    """Whether ``path`` is an SQLite URI (``file:...``), opened as one."""
    return path.startswith("file:")


def is_memory_path(path: str) -> bool:
    """Whether ``path`` names an in-memory database rather than a file: ``:memory:``, or a URI
    naming ``:memory:`` or with ``mode=memory`` (``file:name?mode=memory&cache=shared``)."""
    if path == MEMORY_PATH:
        return True
    if not is_uri(path):
        return False
    location, _, query = path.removeprefix("file:").partition("?")
    return location == MEMORY_PATH or ("mode", "memory") in parse_qsl(query.partition("#")[0])


class SqliteStoreSettings(BaseSettings):
    """Settings of the SQLite stores, read from ``RUNYARD_SQLITE_*`` or passed in.

    ``durable=False`` relaxes ``synchronous`` from FULL to NORMAL (a power cut may lose the
    last commits, never corrupt the file). Raises pydantic.ValidationError for a bad setting.
    """

    model_config = SettingsConfigDict(env_prefix="RUNYARD_SQLITE_", extra="forbid", frozen=True)

    path: str = "runyard.db"
    durable: bool = True
    busy_timeout_seconds: float = DEFAULT_BUSY_TIMEOUT_SECONDS
    create_schema: bool = False
    max_value_bytes: int = Field(default=DEFAULT_MAX_VALUE_BYTES, gt=0)
    table_prefix: str = "runyard_"

    @field_validator("busy_timeout_seconds", mode="before")
    @classmethod
    def _busy_timeout(cls, value: Any) -> float:
        # check_busy_timeout decides; a string (the environment's) is read as a number first.
        if isinstance(value, str):
            with contextlib.suppress(ValueError):  # else refused below, as given
                value = float(value)
        try:
            return check_busy_timeout(value)
        except ConfigurationError as exc:
            raise ValueError(str(exc)) from None

    def tables(self) -> SqliteTables:
        """The SqliteTables these settings name. Raises ConfigurationError for a bad name."""
        return SqliteTables.with_prefix(self.table_prefix)
