"""A queue item's hash as the scripts write it (lua/queue/prelude.lua, store_payload): the
payload is one field, or fields p1..pn (``parts`` = n) when split to keep the hash small."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runyard.redis.common import ITEM_COLUMNS, text

__all__ = ["item_values"]


def item_values(fields: Mapping[Any, Any]) -> list[Any] | None:
    """ITEM_COLUMNS' values (None when absent) from an item's HGETALL, the payload joined from
    its parts if it was split; None when the item does not exist."""
    named = {text(k): v for k, v in fields.items()}
    if "state" not in named:
        return None
    if "payload" not in named and "parts" in named:
        parts = [named[f"p{n}"] for n in range(1, int(named["parts"]) + 1)]
        named["payload"] = b"".join(p if isinstance(p, bytes) else p.encode() for p in parts)
    return [named.get(column) for column in ITEM_COLUMNS]
