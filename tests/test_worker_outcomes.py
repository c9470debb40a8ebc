"""The error text the worker stores for a failed job: type, message and the frames nearest
the raise, whatever the message's length."""

from __future__ import annotations

from runyard.validation import MAX_ERROR_BYTES
from runyard.worker.outcomes import MAX_MESSAGE_CHARS, describe_failure


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
