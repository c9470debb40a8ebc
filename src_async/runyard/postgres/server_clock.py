"""The PostgreSQL server's time on this machine: timed samples of its clock, and the time
since the best of them counted on this machine's monotonic clock."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["CLOCK_SAMPLES", "ClockSample", "closest_sample", "take_sample"]

# How many times verify() reads the server's clock: the sample with the shortest round trip
# bounds the offset's error best (a slow round trip, on a loaded machine, skews it by up to
# half its length: enough for a claim made right after an enqueue's hint to miss the item).
CLOCK_SAMPLES = 5


@dataclass(frozen=True)
class ClockSample:
    """One read of the server's clock: this machine's time before ``sent`` and after
    ``received`` the round trip, the server's ``server`` time read during it (seconds), and
    this machine's monotonic clock at the middle of the round trip (``monotonic``)."""

    sent: float
    received: float
    server: float
    monotonic: float

    def server_now(self, monotonic: float) -> float:
        """The server's time when this machine's monotonic clock reads ``monotonic``: the
        sample's server reading plus the monotonic seconds since. A step of this machine's
        wall clock (an NTP step, an operator, a VM resumed) does not move it; the monotonic
        clock is only ever slewed."""
        return self.server + (monotonic - self.monotonic)

    @property
    def round_trip(self) -> float:
        """Seconds the round trip took."""
        return self.received - self.sent

    @property
    def local(self) -> float:
        """This machine's time at the middle of the round trip."""
        return (self.sent + self.received) / 2

    @property
    def offset(self) -> float:
        """How far the server's clock is ahead of this machine's (error: half the round trip)."""
        return self.server - self.local


def take_sample(
    sent: float, received: float, server: float, monotonic_sent: float, monotonic_received: float
) -> ClockSample:
    """A sample from the wall-clock and monotonic readings before and after one round trip."""
    return ClockSample(sent, received, server, (monotonic_sent + monotonic_received) / 2)


def closest_sample(samples: Iterable[ClockSample]) -> ClockSample:
    """The sample with the shortest round trip (the first of equals). Raises ValueError when
    there is none."""
    return min(samples, key=lambda sample: sample.round_trip)
