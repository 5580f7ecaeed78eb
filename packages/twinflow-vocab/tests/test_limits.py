"""Bounded JSON readers: depth and size limits, iterative checks, typed errors."""

from __future__ import annotations

import pytest
from pydantic import JsonValue

from twinflow.vocab import WireFormatError
from twinflow.vocab._wire import JsonLimits, check_json, read_json_text


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[" * 5000 + "]" * 5000, "nests deeper than the limit of 64 levels"),
        ('{"a": "' + "[" * 5000 + '"}', None),  # brackets inside a string are not nesting
        ("1" * 5000, "not JSON twinflow accepts"),
        ('{"a": ', "not JSON (Expecting value at character 6)"),
        ("x" * 2_000_000, "over the limit of 1048576"),
    ],
)
def test_read_json_text_is_bounded_and_total(text: str, reason: str | None) -> None:
    """Every hostile text is a WireFormatError with its reason (or parses, when legitimate)."""
    if reason is None:
        assert {"a": "[" * 5000} == read_json_text(text, ())
        return
    with pytest.raises(WireFormatError) as caught:
        read_json_text(text, ("x",))
    assert (reason in caught.value.reason, "/x") == (True, caught.value.path)


def test_check_json_is_iterative_and_names_the_path() -> None:
    """A 100000-deep value is refused at depth 64, without a RecursionError."""
    value: JsonValue = "leaf"
    for _ in range(100_000):
        value = [value]
    with pytest.raises(WireFormatError) as caught:
        check_json(value, ())
    assert "/0" * 64 == caught.value.path
    check_json([[["ok"]]], (), JsonLimits(max_depth=3))
