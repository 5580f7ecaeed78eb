"""The error tree: one root, usage mistakes apart, builtin bases where the meaning matches."""

import pytest

from twinflow.trace import TwinflowError, UserError
from twinflow.vocab import (
    Attempt,
    InvalidValueError,
    StructuredOutputError,
    VocabError,
    WireFormatError,
)


@pytest.mark.parametrize(
    ("error", "bases"),
    [
        (UserError, (TwinflowError,)),
        (VocabError, (TwinflowError,)),
        (InvalidValueError, (VocabError, ValueError)),
        (WireFormatError, (VocabError,)),
        (StructuredOutputError, (VocabError,)),
    ],
)
def test_error_tree(error: type[Exception], bases: tuple[type[Exception], ...]) -> None:
    """Each vocab error sits where the module docstring draws it."""
    assert bases == error.__bases__


def test_wire_format_error_carries_path() -> None:
    """WireFormatError keeps the JSON pointer and shows it in the message."""
    err = WireFormatError("expected a string", path="/messages/0/content")
    expected = "/messages/0/content"
    assert expected == err.path
    expected = "expected a string (at /messages/0/content)"
    assert expected == str(err)


def test_structured_output_error_carries_attempts() -> None:
    """StructuredOutputError keeps every attempt."""
    attempts = (Attempt(number=1, emission="{", error="bad json"),)
    err = StructuredOutputError("gave up", attempts=attempts)
    assert attempts == err.attempts
