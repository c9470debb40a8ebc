"""The client-server clock check: leases follow the Redis server's clock, so a host whose own
clock is far off is worth a warning (it no longer decides anything, but its logs and any
injected clock would disagree with the queue)."""

from __future__ import annotations

from datetime import datetime, timezone

__all__ = ["CLOCK_WARN_SECONDS", "clock_offset_warning", "server_seconds"]

# An offset past this (beyond the round trip's own uncertainty) is reported.
CLOCK_WARN_SECONDS = 2.0


def server_seconds(reply: tuple[int, int] | list[int]) -> float:
    """Seconds since the epoch from a ``TIME`` reply (seconds, microseconds)."""
    return int(reply[0]) + int(reply[1]) / 1_000_000


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, timezone.utc).isoformat(timespec="milliseconds")


def clock_offset_warning(
    before: float, server: float, after: float, threshold: float = CLOCK_WARN_SECONDS
) -> str | None:
    """A warning naming both clocks when the server's differs from this host's by more than
    ``threshold`` (the round trip, ``before`` to ``after``, widens the allowance), else None."""
    local = (before + after) / 2
    offset = server - local
    if abs(offset) <= threshold + (after - before) / 2:
        return None
    return (
        f"this host's clock reads {_iso(local)} and the Redis server's reads {_iso(server)} "
        f"(the server is {offset:+.3f} s off this host, over {threshold} s): leases, delays and "
        "reaping follow the server's clock; fix the time synchronisation (NTP) of whichever "
        "is wrong"
    )
