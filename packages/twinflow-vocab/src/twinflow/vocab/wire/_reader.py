"""Typed reading of untrusted provider JSON: every mismatch is a `WireFormatError` with a path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import JsonValue

from twinflow.vocab._canonical import canonical_bytes, json_kind, json_pointer
from twinflow.vocab._errors import CanonicalError, InvalidValueError, WireFormatError
from twinflow.vocab._values import Message, StructuredPart, Transcript

T = TypeVar("T")
Path = tuple[str | int, ...]


def fail(message: str, path: Path) -> WireFormatError:
    """A WireFormatError at `path`."""
    return WireFormatError(message, path=json_pointer(path))


def obj(value: object, path: Path) -> dict[str, Any]:
    """`value` as a JSON object with string keys."""
    if not isinstance(value, dict):
        raise fail(f"expected an object, got {json_kind(value)}", path)
    return value


def arr(value: object, path: Path) -> list[Any]:
    """`value` as a JSON array."""
    if not isinstance(value, list):
        raise fail(f"expected an array, got {json_kind(value)}", path)
    return value


def string(value: object, path: Path) -> str:
    """`value` as a string."""
    if not isinstance(value, str):
        raise fail(f"expected a string, got {json_kind(value)}", path)
    return value


def field(o: dict[str, Any], key: str, path: Path, read: Callable[[object, Path], T]) -> T:
    """A required field, read with `read`."""
    if key not in o:
        raise fail(f"missing required field {key!r}", path)
    return read(o[key], (*path, key))


def optional(
    o: dict[str, Any], key: str, path: Path, read: Callable[[object, Path], T]
) -> T | None:
    """An optional field (absent or null gives None), read with `read`."""
    value = o.get(key)
    return None if value is None else read(value, (*path, key))


def boolean(value: object, path: Path) -> bool:
    """`value` as a boolean."""
    if not isinstance(value, bool):
        raise fail(f"expected a boolean, got {json_kind(value)}", path)
    return value


def json_object(value: object, path: Path) -> dict[str, JsonValue]:
    """`value` as a JSON object that has a canonical form (tool arguments, inputs)."""
    o = obj(value, path)
    try:
        canonical_bytes(o)
    except CanonicalError as exc:
        raise fail(str(exc), path) from None
    return o


def build(path: Path, make: Callable[..., T], /, **kwargs: Any) -> T:
    """Call `make(**kwargs)`, turning a refusal into a WireFormatError at `path`."""
    try:
        return make(**kwargs)
    except InvalidValueError as exc:
        raise fail(str(exc), path) from None


def append(transcript: Transcript, message: Message, path: Path) -> Transcript:
    """Append, turning a refusal (a result for no call) into a WireFormatError at `path`."""
    try:
        return transcript.append(message)
    except InvalidValueError as exc:
        raise fail(str(exc), path) from None


def structured_text(part: StructuredPart) -> str:
    """A structured value as the text a provider carries it in: its canonical JSON."""
    return canonical_bytes(part.value).decode("utf-8")
