"""Every SQL statement the PostgreSQL adapters send, rendered once per StateTables (no I/O).

Statements use PostgreSQL's native ``$n`` placeholders with an explicit cast on every use, so the
same text runs on psycopg (``RawCursor``) and on asyncpg, and the server never guesses a type.
Time is always a parameter: the adapters pass ``now`` (the server's, by the offset verify()
measured, or an injected clock's), never ``now()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from runyard.postgres.schema import StateTables
from runyard.postgres.statements.events import EVENT_TEMPLATES
from runyard.postgres.statements.queue import QUEUE_TEMPLATES
from runyard.postgres.statements.queue_admin import ADMIN_TEMPLATES
from runyard.postgres.statements.queue_batched import BATCHED_TEMPLATES
from runyard.postgres.statements.retention import STATE_RETENTION
from runyard.postgres.statements.state import STATE_TEMPLATES

__all__ = [
    "RUN_COLUMN_COUNT",
    "SESSION_COLUMN_COUNT",
    "WORK_COLUMN_COUNT",
    "Statements",
    "cols",
    "statements",
]

_RUN_COLUMNS = (
    "tenant",
    "run_id",
    "blob::text",
    "version",
    "status",
    "session_id",
    "input_tokens",
    "output_tokens",
    "cost_micros",
    "iterations",
    '"cursor"',
    "created_at",
    "updated_at",
    "seq",
)
_WORK_COLUMNS = (
    "tenant",
    "item_id",
    "payload::text",
    "priority",
    "state",
    "attempts",
    "available_at",
    "enqueued_at",
    "dedupe_key",
    "worker",
    "lease_expires_at",
    "last_error",
    "token",
    "claimed_at",
    "dead_reason",
    "dead_at",
    "max_attempts",
)
_SESSION_COLUMNS = ("tenant", "session_id", "blob::text", "version", "created_at", "updated_at")
RUN_COLUMN_COUNT = len(_RUN_COLUMNS)
SESSION_COLUMN_COUNT = len(_SESSION_COLUMNS)
WORK_COLUMN_COUNT = len(_WORK_COLUMNS)


def _cols(columns: tuple[str, ...], alias: str) -> str:
    return ", ".join(f"{alias}.{c}" for c in columns)


@dataclass(frozen=True)
class Statements:
    """The statement texts for one StateTables, looked up by name (``statements.claim``)."""

    texts: dict[str, str]

    def __getattr__(self, name: str) -> str:
        try:
            return self.texts[name]
        except KeyError:
            raise AttributeError(name) from None


@cache
def statements(tables: StateTables) -> Statements:
    """Return every statement rendered for ``tables`` (cached per StateTables)."""
    values = tables.placeholders()
    values["run_cols_r"] = _cols(_RUN_COLUMNS, "r")
    values["work_cols_w"] = _cols(_WORK_COLUMNS, "w")
    values["session_cols_s"] = _cols(_SESSION_COLUMNS, "s")
    values["run_nulls"] = ", ".join(["NULL"] * RUN_COLUMN_COUNT)
    return Statements(
        {
            name: text.format_map(values).strip()
            for name, text in {
                **STATE_TEMPLATES,
                **QUEUE_TEMPLATES,
                **BATCHED_TEMPLATES,
                **ADMIN_TEMPLATES,
                **STATE_RETENTION,
                **EVENT_TEMPLATES,
            }.items()
        }
    )
