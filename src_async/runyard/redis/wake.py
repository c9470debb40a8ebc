"""The wake key of a queue: idle workers block on it; the enqueue script pushes to it."""

from __future__ import annotations

from runyard.redis.keys import QueueKeys

__all__ = ["WAKE_LIST_MAX", "wake_key"]

WAKE_LIST_MAX = 64
"""The enqueue script keeps at most this many hints (``LTRIM key 0 63``)."""


def wake_key(namespace: str) -> str:
    """``{ns}:queue:{<ns>}:wake``: a LIST in the queue's hash slot (one slot per queue)."""
    return QueueKeys(namespace).wake
