"""Structural diff: the first place two values differ, named by JSON pointer.

Values are compared as their canonical JSON would be: models by their JSON-mode dump, numbers by
value (`1 == 1.0`, as both encode to `1`), booleans apart from numbers, objects key by key in
canonical (UTF-16) key order, arrays index by index.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, JsonValue

from twinflow._base._json import json_kind, json_pointer
from twinflow.vocab._values import FrozenValue

__all__ = ["Difference", "diff"]


_SHOWN = 200
"""Longest rendering of one side of a difference."""
_BEFORE, _AFTER = 30, 60
"""Characters shown before and from the first differing character of two long strings."""


def _show(value: JsonValue) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _windows(a: str, b: str) -> tuple[int, str, str] | None:
    """Where two long strings first differ, and each side's window around that character.

    None when both strings show whole: cutting them at the front would hide the difference
    in a long string, so the window is what is shown instead.
    """
    if (
        max(len(json.dumps(a, ensure_ascii=False)), len(json.dumps(b, ensure_ascii=False)))
        <= _SHOWN
    ):
        return None
    at = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    start = max(0, at - _BEFORE)

    def window(text: str) -> str:
        end = at + _AFTER
        shown = json.dumps(text[start:end], ensure_ascii=False)
        return f"{'...' if start else ''}{shown}{'...' if end < len(text) else ''}"

    return at, window(a), window(b)


class Difference(FrozenValue):
    """The first structural difference between an expected and an actual value."""

    pointer: str
    """RFC 6901 JSON pointer to where the values differ; `""` is the whole value."""
    expected: JsonValue
    """The expected value at `pointer` (None when the key or item is absent there)."""
    actual: JsonValue
    """The actual value at `pointer` (None when the key or item is absent there)."""
    reason: str
    """What differs: `value`, `type`, `missing` (absent in actual) or `unexpected` (absent in expected)."""

    def __str__(self) -> str:
        """One line: where, what, and both sides."""
        where = self.pointer or "/"
        if self.reason == "missing":
            return f"at {where}: missing in actual; expected {_show(self.expected)}"
        if self.reason == "unexpected":
            return f"at {where}: not expected; actual has {_show(self.actual)}"
        if isinstance(self.expected, str) and isinstance(self.actual, str):
            found = _windows(self.expected, self.actual)
            if found is not None:
                at, expected, actual = found
                return (
                    f"at {where}: {self.reason} differs from character {at} (of "
                    f"{len(self.expected)} and {len(self.actual)}): expected {expected}, "
                    f"actual {actual}"
                )
        return f"at {where}: {self.reason} differs: expected {_show(self.expected)}, actual {_show(self.actual)}"


def _utf16(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _walk(a: JsonValue, b: JsonValue, path: tuple[str | int, ...]) -> Difference | None:
    ka, kb = json_kind(a), json_kind(b)
    if ka != kb:
        return Difference(pointer=json_pointer(path), expected=a, actual=b, reason="type")
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(a.keys() | b.keys(), key=_utf16):
            if key not in b:
                return Difference(
                    pointer=json_pointer((*path, key)),
                    expected=a[key],
                    actual=None,
                    reason="missing",
                )
            if key not in a:
                return Difference(
                    pointer=json_pointer((*path, key)),
                    expected=None,
                    actual=b[key],
                    reason="unexpected",
                )
            found = _walk(a[key], b[key], (*path, key))
            if found:
                return found
        return None
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = _walk(x, y, (*path, i))
            if found:
                return found
        n = min(len(a), len(b))
        if len(a) > n:
            return Difference(
                pointer=json_pointer((*path, n)), expected=a[n], actual=None, reason="missing"
            )
        if len(b) > n:
            return Difference(
                pointer=json_pointer((*path, n)), expected=None, actual=b[n], reason="unexpected"
            )
        return None
    if a != b:
        return Difference(pointer=json_pointer(path), expected=a, actual=b, reason="value")
    return None


def diff(expected: BaseModel | JsonValue, actual: BaseModel | JsonValue) -> Difference | None:
    """Return the first structural difference between two values, or None if they are equal.

    Args:
        expected: A pydantic model (compared as its JSON-mode dump) or a JSON value.
        actual: The same.

    Returns:
        The first `Difference` in canonical order (object keys by UTF-16 order, array items by
        index), or None when the canonical encodings would be equal.
    """
    a = expected.model_dump(mode="json") if isinstance(expected, BaseModel) else expected
    b = actual.model_dump(mode="json") if isinstance(actual, BaseModel) else actual
    return _walk(a, b, ())
