"""runyard.redis.events.settle_conflict: what a Redis event script's refusal of a retried
event_id as other content (it compares canonical text) becomes, judged as every other backend
judges (by value), without a server."""

from __future__ import annotations

from dataclasses import replace

from runyard import RunKey
from runyard.redis.events import EventEntry, settle_conflict

KEY = RunKey("acme", "r")


def _stored(entry: EventEntry, at: float = 1.5) -> str:
    """The log entry the script wrote for ``entry``: its time, then its rest."""
    return f"{at}\n{entry.rest()}"


def test_the_same_data_by_value_is_sent_again_with_the_stored_text() -> None:
    stored = EventEntry("tick", '{"n":1,"z":-0.0}', "a", terminal=False)
    sent = replace(stored, data_text='{"n":1.0,"z":0}')
    assert settle_conflict(KEY, 1, _stored(stored), sent) == stored


def test_other_content_stands_as_a_conflict() -> None:
    stored = EventEntry("tick", '{"ok":true}', "a", terminal=False)
    for sent in (
        replace(stored, data_text='{"ok":1}'),  # a bool is never a number
        replace(stored, data_text='{"ok":false}'),
        replace(stored, type="tock"),
        replace(stored, terminal=True),  # finalize naming an appended event
    ):
        assert settle_conflict(KEY, 1, _stored(stored), sent) is None, sent


def test_an_entry_gone_or_another_events_sends_the_call_again_as_it_was() -> None:
    sent = EventEntry("tick", '{"n":1.0}', "a", terminal=False)
    assert settle_conflict(KEY, 1, None, sent) == sent
    other = replace(sent, data_text='{"n":1}', event_id="b")  # the run was made again
    assert settle_conflict(KEY, 1, _stored(other), sent) == sent
