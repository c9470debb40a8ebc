"""Followers for the live-updates tests: runs with one event, each followed and subscribed."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from runyard import RunKey
from runyard._async.event_protocol import AsyncEventLogStore
from runyard.events import RunEvent

__all__ = ["subscribed_followers"]


async def subscribed_followers(
    store: AsyncEventLogStore, keys: Sequence[RunKey]
) -> list[AsyncIterator[RunEvent]]:
    """Create a run with one event for each key and follow it (a 30 s poll, so only a hint
    moves it on); each follower has read the first event, so it is subscribed."""
    for key in keys:
        await store.put_run(key, {}, expected_version=0)
        await store.append_event(key, "step", {"i": 0})
    followers = []
    for key in keys:
        events = store.follow(key, poll_seconds=30).__aiter__()
        assert (await events.__anext__()).seq == 1
        followers.append(events)
    return followers
