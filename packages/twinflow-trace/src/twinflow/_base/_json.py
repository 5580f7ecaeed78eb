"""The reader of a received JSON document: an object's repeated key is refused, never last-wins.

``json.loads`` keeps the last of two equal keys, another parser the first: a reply, an MCP
message, a trace line or a run directory's file read one way by twinflow and another way by
its reader would mean two things. Every reader of JSON that came from outside this process (a
model's reply and the JSON text inside it, a server's message, a file a run directory or a
bundle holds) parses through `loads` (or checks with `refuse_repeated_keys` before a
pydantic model reads the text), and turns its `ValueError` into its package's own error, as
it does for text that is not JSON at all. `twinflow.trace.parse_json` refuses the same with
``reason="duplicate_key"``.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["loads", "refuse_repeated_keys", "repeated_key"]


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
