"""The error text the worker stores for a failed job: type, message and the frames nearest
the raise, whatever the message's length; which failures dead-letter at once."""

from __future__ import annotations

import builtins

from runyard.validation import MAX_ERROR_BYTES
from runyard.worker import PermanentFailure
from runyard.worker.outcomes import MAX_MESSAGE_CHARS, describe_failure, is_permanent


def _raise_deep(message: str) -> None:
    raise ValueError(message)


def _failure(message: str) -> BaseException:
    try:
        _raise_deep(message)
    except ValueError as exc:
        return exc
    raise AssertionError("not raised")


def test_a_short_message_is_stored_whole_with_the_traceback() -> None:
    text = describe_failure(_failure("boom"))
    assert text.startswith("builtins.ValueError: boom\n\nTraceback")
    assert "in _raise_deep" in text and text.endswith("ValueError: boom\n")


def test_a_long_message_is_cut_and_does_not_push_the_frames_out() -> None:
    message = "x" * 20_000
    text = describe_failure(_failure(message))
    cut = f"{'x' * MAX_MESSAGE_CHARS}... ({20_000 - MAX_MESSAGE_CHARS} more characters)"
    assert text.startswith(f"builtins.ValueError: {cut}\n\nTraceback")
    assert "in _raise_deep" in text and text.endswith(f"ValueError: {cut}\n")
    assert len(text.encode()) <= MAX_ERROR_BYTES


def test_a_group_of_permanent_failures_is_permanent_and_a_mixed_one_is_not() -> None:
    assert is_permanent(PermanentFailure("no"))
    assert not is_permanent(ValueError("retry me"))
    group = getattr(builtins, "BaseExceptionGroup", None)
    if group is None:  # Python 3.10: no exception groups, nothing else to hold
        return
    # What an asyncio.TaskGroup raises when its tasks failed.
    assert is_permanent(group("tasks", [PermanentFailure("a"), PermanentFailure("b")]))
    assert is_permanent(group("outer", [group("inner", [PermanentFailure("a")])]))
    assert not is_permanent(group("tasks", [PermanentFailure("a"), ValueError("b")]))
