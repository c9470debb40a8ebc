"""Event rows into RunEvents, and the notification payload, for both PostgreSQL twins."""

from __future__ import annotations

from runyard._json import load_json
from runyard.events import RunEvent
from runyard.models import RunKey
from runyard.postgres.rows import Row

__all__ = ["decode_event", "decode_hint"]


def decode_event(key: RunKey, row: Row) -> RunEvent:
    """Build a RunEvent from (seq, type, data, at, event_id, terminal)."""
    return RunEvent(
        tenant=key.tenant,
        run_id=key.run_id,
        seq=row[0],
        type=row[1],
        data=load_json(row[2]),
        at=float(row[3]),
        event_id=row[4],
        terminal=bool(row[5]),
    )


def decode_hint(payload: str) -> tuple[str, str]:
    """The (tenant, run_id) of a notification's JSON payload ``[tenant, run_id, seq]``."""
    tenant, run_id, _ = load_json(payload)
    return str(tenant), str(run_id)
