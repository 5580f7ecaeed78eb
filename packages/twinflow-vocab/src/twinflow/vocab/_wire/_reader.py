"""Typed reading of untrusted provider JSON: every mismatch is a `WireFormatError` with a path."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from twinflow._base._json import json_kind, json_pointer
from twinflow._base._json import loads as received_json
from twinflow.trace import CanonicalError
from twinflow.vocab._canonical import value_bytes
from twinflow.vocab._errors import InvalidValueError, WireFormatError
from twinflow.vocab._reask import validation_error_text
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


class JsonLimits(BaseModel):
    """Bounds on JSON from a model server: a reply, an emission, a tool call's arguments.

    A hostile or broken server can send ``"[" * 5000``, a megabyte-long string or a
    5000-digit number; every reader refuses those with a typed error instead of a
    `RecursionError` or an unbounded parse.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_depth: int = Field(default=64, ge=1, le=500)
    """Deepest nesting of arrays and objects (a reply's envelope included)."""
    max_bytes: int = Field(default=1024 * 1024, ge=1)
    """Longest JSON text parsed (an emission, tool arguments) and longest string in a value,
    in characters."""


DEFAULT_JSON_LIMITS = JsonLimits()
"""The limits used when none are given: depth 64, 1 MiB."""

_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|([\[{])|([\]}])')


def check_json(
    value: object, path: Path, limits: JsonLimits = DEFAULT_JSON_LIMITS, *, strings: bool = True
) -> None:
    """Refuse a decoded JSON value nested deeper, or holding a longer string, than ``limits``.

    Iterative, so it is safe on any depth a JSON decoder returned. ``strings=False`` checks
    the depth only (a whole reply, whose texts are checked where they are read).

    Raises:
        WireFormatError: at the first part past a limit.
    """
    stack: list[tuple[object, Path, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, str):
            if strings and len(item) > limits.max_bytes:
                raise fail(
                    f"a string of {len(item)} characters, over the limit of {limits.max_bytes}",
                    where,
                )
            continue
        if isinstance(item, dict | list):
            if depth >= limits.max_depth:
                raise fail(f"nested deeper than the limit of {limits.max_depth} levels", where)
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in pairs:
                if strings and isinstance(key, str) and len(key) > limits.max_bytes:
                    raise fail(f"an object key over {limits.max_bytes} characters", where)
                stack.append((child, (*where, key), depth + 1))


def read_json_text(
    text: str, path: Path, limits: JsonLimits = DEFAULT_JSON_LIMITS, *, what: str = "the text"
) -> JsonValue:
    """Parse JSON text from a model (an emission, tool arguments) within ``limits``.

    The text's size and nesting are checked before it is parsed, so no parse can exhaust the
    stack; a number with more digits than Python converts is refused. `NaN`, `Infinity` and
    `1e400` parse (as floats), for the caller's canonical-form check to name where they are.

    Raises:
        WireFormatError: the text is too long, too deep, or not JSON.
    """
    if len(text) > limits.max_bytes:
        raise fail(f"{what} has {len(text)} characters, over the limit of {limits.max_bytes}", path)
    depth = 0
    for match in _TOKENS.finditer(text):
        if match.group(1):
            depth += 1
            if depth > limits.max_depth:
                raise fail(f"{what} nests deeper than the limit of {limits.max_depth} levels", path)
        elif match.group(2):
            depth -= 1
    try:
        value: JsonValue = received_json(text)
    except json.JSONDecodeError as exc:
        raise fail(f"{what} is not JSON ({exc.msg} at character {exc.pos})", path) from None
    except (ValueError, RecursionError) as exc:
        raise fail(f"{what} is not JSON twinflow accepts ({exc})", path) from None
    return value


def json_object(value: object, path: Path) -> dict[str, JsonValue]:
    """`value` as a JSON object that has a canonical form (tool arguments, inputs)."""
    o = obj(value, path)
    check_json(o, path)
    try:
        value_bytes(o)
    except CanonicalError as exc:
        raise fail(str(exc), path) from None
    return o


def _refusal(exc: InvalidValueError) -> str:
    """A refused construction in one line: each problem as ``pointer: message``, without
    pydantic's multi-line layout and its documentation URLs (which name its version, and a
    reader's error can end up in a trace: an MCP result that maps onto no part)."""
    found = exc.__context__
    if isinstance(found, ValidationError):
        return f"invalid {found.title}: " + "; ".join(validation_error_text(found).splitlines())
    return str(exc)


def build(path: Path, make: Callable[..., T], /, **kwargs: Any) -> T:
    """Call `make(**kwargs)`, turning a refusal into a WireFormatError at `path`."""
    try:
        return make(**kwargs)
    except InvalidValueError as exc:
        raise fail(_refusal(exc), path) from None


def append(transcript: Transcript, message: Message, path: Path) -> Transcript:
    """Append, turning a refusal (a result for no call) into a WireFormatError at `path`."""
    try:
        return transcript.append(message)
    except InvalidValueError as exc:
        raise fail(_refusal(exc), path) from None


def structured_text(part: StructuredPart) -> str:
    """A structured value as the text a provider carries it in: its canonical JSON."""
    return value_bytes(part.value).decode("utf-8")


class WireReader:
    """The bounded, total readers a provider's wire mapping is written with.

    Each raises `WireFormatError` at the JSON pointer of the offending part, so a mapping
    written with them reads any payload to a value or that one error. A path is a tuple of
    keys and indices (`("messages", 0, "content")`).
    """

    fail = staticmethod(fail)
    obj = staticmethod(obj)
    arr = staticmethod(arr)
    string = staticmethod(string)
    boolean = staticmethod(boolean)
    field = staticmethod(field)
    optional = staticmethod(optional)
    json_object = staticmethod(json_object)
    build = staticmethod(build)
    append = staticmethod(append)
    structured_text = staticmethod(structured_text)
