"""Fast canonical bytes of trace events: the C JSON encoder over the models' fields.

`twinflow.vocab.canonical_bytes` of a model dumps it with pydantic first. The trace's models
are plain (no aliases, serializers, computed or excluded fields), so a model's ``__dict__`` is
its JSON-mode dump but for nested models, which the encoder's ``default`` hook opens in turn:
no intermediate dump is built. The output is canonical RFC 8785 unless it holds a float, an
integer of 16 or more digits, or a character outside the BMP (the same test as vocab's model
path); then, or on any error, the value is encoded by `canonical_bytes`, which decides exactly.
Tests hold the two byte-equal over every event kind and generated JSON content.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import AwareDatetime, BaseModel, TypeAdapter

from twinflow.vocab import (
    MediaPart,
    Message,
    ModelResponse,
    ModelSettings,
    OutputSchema,
    ReasoningPart,
    StructuredPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
    canonical_bytes,
)

if TYPE_CHECKING:
    from twinflow.agent._events import TraceEvent

__all__ = ["PLAIN_MODELS", "event_bytes", "value_bytes"]

_MAX_SAFE = 2**53 - 1

PLAIN_MODELS: set[type[BaseModel]] = {
    Message,
    TextPart,
    ReasoningPart,
    ToolCallPart,
    ToolResultPart,
    StructuredPart,
    MediaPart,
    ModelResponse,
    Usage,
    ToolSpec,
    OutputSchema,
}
"""Models whose ``__dict__`` is their JSON-mode dump once nested models are opened (the event
models add themselves in `twinflow.agent._events`)."""

# As in twinflow.vocab's model path: every number token follows ":", "," or "[", and a float's
# repr has a digit right before "." or "e"; matches inside strings only cost the exact path.
_NUMBER = re.compile(r"[:,\[]-?\d(?:\d*[.eE]|\d{15})")
_ASTRAL = re.compile(r"[\U00010000-\U0010ffff]")

_DATETIME: TypeAdapter[datetime] = TypeAdapter(AwareDatetime)


def _fields(value: object) -> Any:
    """The encoder's ``default``: a plain model's fields; anything else is not handled here."""
    t = type(value)
    if t in PLAIN_MODELS:
        return value.__dict__
    if t is ModelSettings:
        fields = dict(value.__dict__)
        temperature = fields["temperature"]
        # An integral float within ±(2**53-1) prints as the integer (0.0 -> 0), as JCS prints it.
        if type(temperature) is float and temperature.is_integer() and abs(temperature) < _MAX_SAFE:
            fields["temperature"] = int(temperature)
        return fields
    raise TypeError(t.__name__)


_encoder = json.JSONEncoder(
    ensure_ascii=False,
    separators=(",", ":"),
    sort_keys=True,
    allow_nan=False,
    check_circular=False,
    default=_fields,
)
_dumps: Callable[[object], str] = _encoder.encode
_make_c_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
if _make_c_encoder is not None:  # CPython: build the C encoder once, not at every call
    _c_encode = _make_c_encoder(
        None, _fields, json.encoder.encode_basestring, None, ":", ",", True, False, False
    )

    def _dumps(value: object) -> str:
        return "".join(_c_encode(value, 0))


def _fast(value: BaseModel) -> bytes | None:
    """The canonical bytes of a plain model, or None when only the exact path can tell."""
    try:
        text = _dumps(value)
        if _NUMBER.search(text) is None and (text.isascii() or _ASTRAL.search(text) is None):
            return text.encode("utf-8")
    except (ValueError, TypeError, RecursionError):
        pass
    return None


def value_bytes(value: BaseModel) -> bytes:
    """`canonical_bytes` of a trace model (an event body, a message), faster.

    Args:
        value: The model.

    Returns:
        Exactly ``canonical_bytes(value)``.

    Raises:
        CanonicalError: As `canonical_bytes`.
    """
    data = _fast(value)
    return canonical_bytes(value) if data is None else data


def event_bytes(event: TraceEvent) -> bytes:
    """`canonical_bytes` of a trace event, faster (the envelope is written directly).

    Args:
        event: The event.

    Returns:
        Exactly ``canonical_bytes(event)``.

    Raises:
        CanonicalError: As `canonical_bytes`.
    """
    at = _DATETIME.dump_python(event.at, mode="json")
    prev, seq = event.prev, event.seq
    body = _fast(event.body)
    if (
        body is None
        or type(at) is not str
        or not (at.isascii() and at.isprintable() and '"' not in at and "\\" not in at)
        or not (prev.isascii() and prev.isalnum())
        or not 0 <= seq <= _MAX_SAFE
    ):
        return canonical_bytes(event)
    return b"".join(
        (
            b'{"at":"',
            at.encode(),
            b'","body":',
            body,
            b',"prev":"',
            prev.encode(),
            b'","seq":',
            str(seq).encode(),
            b"}",
        )
    )
