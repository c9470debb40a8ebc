"""The error text the worker stores for a failed job: type, message and the frames nearest
the raise, whatever the length of the message, of the notes, of a chained exception's message
or of an exception group member's; which failures dead-letter at once."""

from __future__ import annotations

import builtins
import sys
from typing import Any

import pytest
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


PY311 = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="notes and exception groups: Python 3.11 and later"
)


def _frames_and_limit_kept(text: str, *lines: str) -> None:
    """The raise lines given are in the stored text, which fits the queue's limit."""
    for line in lines:
        assert line in text, line
    assert len(text.encode()) <= MAX_ERROR_BYTES


def _raise_with_note(note: str) -> None:
    error: Any = ValueError("short")
    error.add_note(note)
    raise error


@PY311
def test_a_long_note_is_cut_and_does_not_push_the_frames_out() -> None:
    try:
        _raise_with_note("n" * 20_000)
    except ValueError as exc:
        text = describe_failure(exc)
    cut = f"{'n' * MAX_MESSAGE_CHARS}... ({20_000 - MAX_MESSAGE_CHARS} more characters)"
    assert text.startswith("builtins.ValueError: short\n\nTraceback")
    assert text.endswith(f"ValueError: short\n{cut}\n")
    _frames_and_limit_kept(text, "raise error")


@PY311
def test_many_notes_are_kept_to_one_message_length_together() -> None:
    error: Any = ValueError("short")
    for n in range(30):
        error.add_note(f"note {n:02d} " + "n" * 500)  # 508 characters each
    try:
        raise error
    except ValueError as exc:
        text = describe_failure(exc)
    assert "note 00" in text and "note 01" in text and "note 02" not in text
    assert f"note 01 {'n' * (MAX_MESSAGE_CHARS - 508 - 8)}... (16 more characters)\n" in text
    assert text.endswith(f"... (28 more notes, {28 * 508} characters)\n")
    _frames_and_limit_kept(text, "raise error")


def _raise_from_cause(message: str) -> None:
    try:
        raise KeyError(message)
    except KeyError as cause:
        raise ValueError("outer") from cause


def test_a_long_cause_message_is_cut_and_keeps_both_raises() -> None:
    try:
        _raise_from_cause("c" * 20_000)
    except ValueError as exc:
        text = describe_failure(exc)
    assert "The above exception was the direct cause" in text
    assert f"KeyError: '{'c' * (MAX_MESSAGE_CHARS - 1)}... (" in text
    assert "c" * (MAX_MESSAGE_CHARS + 1) not in text
    assert text.endswith("ValueError: outer\n")
    _frames_and_limit_kept(text, "raise KeyError(message)", 'raise ValueError("outer")')


def _raise_during_handling(message: str) -> None:
    try:
        raise OSError(message)
    except OSError:
        raise ValueError("while handling it")  # noqa: B904 (the implicit context is tested)


def test_a_long_context_message_is_cut_and_keeps_both_raises() -> None:
    try:
        _raise_during_handling("\u00e9" * 20_000)  # two bytes each in UTF-8
    except ValueError as exc:
        text = describe_failure(exc)
    assert "During handling of the above exception, another exception occurred" in text
    cut = f"{chr(0xE9) * MAX_MESSAGE_CHARS}... ({20_000 - MAX_MESSAGE_CHARS} more characters)"
    assert f"OSError: {cut}\n" in text
    _frames_and_limit_kept(text, "raise OSError(message)", 'raise ValueError("while handling')


def _raise_group(message: str) -> None:
    group: Any = getattr(builtins, "ExceptionGroup", None)
    errors: list[Exception] = []
    for error in (ValueError(message), KeyError("short")):
        try:
            raise error
        except Exception as exc:
            errors.append(exc)
    raise group("the tasks failed", errors)


@PY311
def test_a_long_message_in_an_exception_group_is_cut_and_keeps_the_raises() -> None:
    try:
        _raise_group("g" * 20_000)
    except Exception as exc:
        text = describe_failure(exc)
    assert text.startswith("builtins.ExceptionGroup: the tasks failed (2 sub-exceptions)\n\n")
    assert f"ValueError: {'g' * MAX_MESSAGE_CHARS}... (" in text
    assert "g" * (MAX_MESSAGE_CHARS + 1) not in text
    _frames_and_limit_kept(text, "raise error", 'raise group("the tasks failed"')


def _raise_four_byte_texts(text: str) -> None:
    try:
        raise KeyError(text)
    except KeyError as cause:
        error: Any = ValueError(text)
        error.add_note(text)
        raise error from cause


@PY311
def test_texts_of_four_byte_characters_keep_the_frames_within_the_limit() -> None:
    # Cut to 1,000 characters each, the message (twice: the head and the traceback), the note
    # and the cause's message are 16,000 bytes of UTF-8: the traceback's start gives way.
    emoji = "\U0001f600"
    try:
        _raise_four_byte_texts(emoji * 20_000)
    except ValueError as exc:
        text = describe_failure(exc)
    cut = f"{emoji * MAX_MESSAGE_CHARS}... ({20_000 - MAX_MESSAGE_CHARS} more characters)"
    assert text.startswith(f"builtins.ValueError: {cut}\n\n...\n")
    assert text.endswith(f"ValueError: {cut}\n{cut}\n")
    _frames_and_limit_kept(text, "raise error from cause")
