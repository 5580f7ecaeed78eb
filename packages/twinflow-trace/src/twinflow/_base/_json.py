"""The reader of a received JSON document: an object's repeated key is refused, never last-wins.

``json.loads`` keeps the last of two equal keys, another parser the first: a reply, an MCP
message, a trace line or a run directory's file read one way by twinflow and another way by
its reader would mean two things. Every reader of JSON that came from outside this process (a
model's reply and the JSON text inside it, a server's message, a file a run directory or a
bundle holds) parses through `loads` (or checks with `refuse_repeated_keys` before a
pydantic model reads the text), and turns its `ValueError` into its package's own error, as
it does for text that is not JSON at all. the trace leaf's `parse_json` refuses the same with
``reason="duplicate_key"``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "MAX_SAFE_INTEGER",
    "decimal",
    "json_kind",
    "json_pointer",
    "loads",
    "refuse_repeated_keys",
    "repeated_key",
]

MAX_SAFE_INTEGER = 2**53 - 1
"""Largest integer with a canonical JSON form (and the negative of the smallest): I-JSON
(RFC 7493) and JCS read a number as an IEEE-754 double, which holds integers exactly only up to
here; the `rfc8785` package draws the same line. The workspace's one copy of the bound."""


def repeated_key(pairs: list[tuple[str, Any]]) -> str | None:
    """Why an object's ``pairs`` cannot be read as one object (a key in it twice), or None."""
    if len({key for key, _ in pairs}) == len(pairs):
        return None
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return (
                f"object key {key[:64]!r} appears twice; parsers that keep the first and the "
                "last read different values, so a repeated key is refused"
            )
        seen.add(key)
    return None  # pragma: no cover - a shorter set has a repeated key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    problem = repeated_key(pairs)
    if problem is not None:
        raise ValueError(problem)
    return dict(pairs)


def loads(text: str | bytes, **options: Any) -> Any:
    """`json.loads` of a received document (``options`` as json.loads takes them).

    Raises:
        ValueError: the text is not JSON (`json.JSONDecodeError`), or an object in it repeats
            a key.
        RecursionError: the text nests too deeply (callers check depth first).
    """
    return json.loads(text, object_pairs_hook=_unique, **options)


def refuse_repeated_keys(text: str | bytes) -> None:
    """Check a document a pydantic model will read (``model_validate_json``, which keeps the
    last of two equal keys) for a repeated key. Text that is not JSON is left to the model.

    Raises:
        ValueError: an object in the text repeats a key.
    """
    problems: list[str] = []

    def note(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        problem = repeated_key(pairs)
        if problem is not None and not problems:
            problems.append(problem)
        return {}

    try:
        json.loads(text, object_pairs_hook=note)
    except (ValueError, RecursionError):
        return
    if problems:
        raise ValueError(problems[0])


def json_pointer(tokens: tuple[str | int, ...]) -> str:
    """Build an RFC 6901 JSON pointer from reference tokens (`()` is the whole document, `""`).

    Args:
        tokens: Object keys and array indexes, outermost first.

    Returns:
        The pointer.
    """
    return "".join("/" + str(t).replace("~", "~0").replace("/", "~1") for t in tokens)


def json_kind(value: object) -> str:
    """The JSON type a value encodes as (`null`, `boolean`, `number`, ...), for error messages.

    Args:
        value: Any value.

    Returns:
        The JSON type's name, or the Python type's name for a value with no JSON form.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def decimal(text: str, most: int = 18) -> int | None:
    """The integer ``text`` writes in 1 to ``most`` ASCII digits, or None.

    For a number a received text holds (an array index, a length, a name's counter):
    `str.isdigit` alone also takes superscripts (``²``), which `int` refuses, other scripts'
    digits (``٣``), which `int` reads as 3, and thousands of digits, which `int` refuses.
    """
    if 0 < len(text) <= most and text.isascii() and text.isdigit():
        return int(text)
    return None
