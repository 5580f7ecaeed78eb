"""The canonical bytes of the values a step writes, composed from their members' bytes.

RFC 8785 writes an object as its members sorted by key, each member being the key and the
member's own canonical form: a member's bytes do not depend on what surrounds them (ADR 0135).
So the bytes of the events a tool step writes (``model_responded``, ``policy_decided``,
``tool_called``, ``tool_returned``), of ``output_accepted``, and of the messages they carry
can be put together from their members' bytes without a pydantic dump of the whole value:
every string, float and arguments object still goes through the one encoder
(`twinflow.trace.canonical_bytes`), integers are written with ``%d`` after the safe-range
check (`integer_bytes`: an int's decimal digits are its ECMAScript form) and booleans as their
literals; only the object around them is laid out here, in key order derived from the value
type's fields (`layout`, which refuses a type whose encoding is not its fields as they are). A
value already encoded (a message, the settings) is spliced in where it recurs, as the field
that holds it serializes it (`declared_bytes`: a subclass's own fields are dropped there).

Only exact types of the common shapes are composed: a subclass, a part of another kind, a
result carrying content parts, anything the layout does not cover, goes through
`twinflow.vocab.canonical_bytes` whole, which is the definition the composition is held equal
to (``test_composed_messages_are_the_whole_message_encodings``,
``test_composed_events_are_the_whole_event_encodings``). A member with no canonical form
raises `twinflow.trace.CanonicalError` here, and callers fall back to the whole encoding, whose
error names the member's full path (ADR 0140).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, PlainSerializer, WrapSerializer

from twinflow.agent._events import (
    ModelResponded,
    OutputAccepted,
    PolicyDecided,
    ToolCalled,
    ToolReturned,
)
from twinflow.trace import MAX_SAFE_INTEGER, CanonicalError
from twinflow.trace import canonical_bytes as _plain
from twinflow.vocab import Message, ModelResponse, TextPart, ToolCallPart, ToolResultPart, Usage
from twinflow.vocab import value_bytes as canonical_bytes

__all__ = [
    "body_bytes",
    "declared_bytes",
    "integer_bytes",
    "layout",
    "message_bytes",
    "responded_bytes",
    "result_bytes",
    "text_bytes",
]


def layout(cls: type[BaseModel], *, without: frozenset[str] = frozenset()) -> bytes:
    """The template of ``cls``'s canonical encoding: ``b'{"a":%(a)s,...}'``, filled by ``%``
    with each member's canonical bytes by name (as bytes). ``kind`` is written in.

    Args:
        cls: A value type whose JSON-mode dump is its fields as they are: ASCII field names
            (their code-point order is the UTF-16 order RFC 8785 sorts by), no aliases, no
            serializers of its own or of a field, no computed fields, and no field left out of
            the dump (``exclude``, ``exclude_if``) but those in ``without``.
        without: Fields the template leaves out (a caller composes only values where they are
            absent from the encoding).

    Raises:
        TypeError: ``cls`` is not such a type (at import: a field added later that the
            template could not write fails at once, not as different bytes).
    """
    decorators = cls.__pydantic_decorators__
    if decorators.model_serializers or decorators.field_serializers or cls.model_computed_fields:
        raise TypeError(f"{cls.__name__}: serializers or computed fields of its own")
    members = []
    for name in sorted(cls.model_fields):
        field = cls.model_fields[name]
        if name in without:
            continue
        if not name.isascii() or field.serialization_alias is not None:
            raise TypeError(f"{cls.__name__}.{name}: not a plain ASCII field name")
        if field.exclude or field.exclude_if is not None:
            raise TypeError(f"{cls.__name__}.{name}: left out of the dump, and not in without")
        if any(isinstance(meta, _SERIALIZERS) for meta in field.metadata):
            raise TypeError(f"{cls.__name__}.{name}: a serializer of its own")
        key = name.encode("ascii")
        value = (
            _plain(field.default).replace(b"%", b"%%") if name == "kind" else b"%(" + key + b")s"
        )
        members.append(b'"' + key + b'":' + value)
    return b"{" + b",".join(members) + b"}"


def text_bytes(value: str) -> bytes:
    """The canonical bytes of a string, through the one encoder.

    Raises:
        CanonicalError: A lone surrogate.
    """
    return _plain(value)


def integer_bytes(value: int) -> bytes:
    """The canonical bytes of an integer (``%d``: an int's digits are its ECMAScript form).

    Raises:
        CanonicalError: Beyond ±(2**53-1) (the whole encoding then names where).
    """
    if type(value) is not int or not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        raise CanonicalError("not a plain integer within ±(2**53-1)")
    return b"%d" % value


def declared_bytes(cls: type[BaseModel], value: BaseModel) -> bytes:
    """``value``'s canonical bytes as a field declared ``cls`` writes it: pydantic serializes an
    instance of a subclass there as ``cls`` (the subclass's own fields dropped), so these are
    the bytes the whole encoding of a value holding it has at that member.

    Raises:
        twinflow.vocab.CanonicalError: The value has no canonical form.
    """
    if type(value) is cls:
        return canonical_bytes(value)
    return canonical_bytes(cls.__pydantic_serializer__.to_python(value, mode="json"))


_SERIALIZERS = (PlainSerializer, WrapSerializer)
_NULL = b"null"
_BOOLEANS = (b"false", b"true")
_TEXT = layout(TextPart)
_CALL = layout(ToolCallPart)
# A result's ``parts`` is left out of its encoding when empty; only such results are composed.
_RESULT = layout(ToolResultPart, without=frozenset({"parts"}))
_MESSAGE = layout(Message)
_USAGE = layout(Usage)
_RESPONSE = layout(ModelResponse)
_RESPONDED = layout(ModelResponded)
_DECIDED = layout(PolicyDecided)
_CALLED = layout(ToolCalled)
_RETURNED = layout(ToolReturned)
_ACCEPTED = layout(OutputAccepted)
_ROLES = {role: _plain(role) for role in ("system", "user", "assistant", "tool")}


def _part_bytes(part: object) -> bytes | None:
    """A text part's, a tool call's or a text result's bytes; None for any other part."""
    if type(part) is TextPart:
        return _TEXT % {b"text": text_bytes(part.text)}
    if type(part) is ToolCallPart:
        return _CALL % {
            b"arguments": _plain(part.arguments),
            b"id": text_bytes(part.id),
            b"name": text_bytes(part.name),
        }
    if type(part) is ToolResultPart:
        return result_bytes(part)
    return None


def result_bytes(result: ToolResultPart) -> bytes | None:
    """A tool result's canonical bytes, or None where it carries content parts.

    Raises:
        CanonicalError: A member has no canonical form.
    """
    if result.parts or type(result) is not ToolResultPart:
        return None
    is_error = result.is_error
    if type(is_error) is not bool:  # a value built without validation: pydantic decides
        raise CanonicalError("is_error is not a bool")
    return _RESULT % {
        b"call_id": text_bytes(result.call_id),
        b"content": text_bytes(result.content),
        b"is_error": _BOOLEANS[is_error],
        b"name": text_bytes(result.name),
    }


def _composed_message(message: Message) -> bytes | None:
    parts = []
    for part in message.parts:
        encoded = _part_bytes(part)
        if encoded is None:
            return None
        parts.append(encoded)
    role = message.role
    return _MESSAGE % {
        b"parts": b"[" + b",".join(parts) + b"]",
        b"role": _ROLES.get(role) or text_bytes(role),
    }


def message_bytes(message: Message) -> bytes:
    """The message's bytes in any value that holds it (``declared_bytes(Message, message)``):
    composed for a `Message` of text, tool calls and text results, the whole encoding for any
    other (and for one with no canonical form, so the error is the whole encoding's, naming
    the member); a subclass's message as a `Message` field writes it, its own fields dropped.

    Raises:
        twinflow.vocab.CanonicalError: The message has no canonical form.
    """
    if type(message) is Message:
        try:
            encoded = _composed_message(message)
        except CanonicalError:
            encoded = None
        if encoded is not None:
            return encoded
    return declared_bytes(Message, message)


def responded_bytes(body: ModelResponded, message: bytes) -> bytes | None:
    """``canonical_bytes(body)`` with its message's bytes given (`message_bytes`, which writes
    a message of a subclass as the response's `Message` field does); None where the whole
    encoding decides: a response of another type (a subclass encodes as pydantic decides), or
    a member with no canonical form (the whole encoding's error names it).
    """
    response = body.response
    usage = response.usage
    if type(body) is not ModelResponded or type(response) is not ModelResponse:
        return None
    if type(usage) is not Usage:
        return None
    try:
        return _RESPONDED % {
            b"response": _RESPONSE
            % {
                b"finish_reason": text_bytes(response.finish_reason),
                b"message": message,
                b"model_name": text_bytes(response.model_name),
                b"usage": _USAGE
                % {
                    b"input_tokens": integer_bytes(usage.input_tokens),
                    b"output_tokens": integer_bytes(usage.output_tokens),
                },
            },
            b"step": integer_bytes(body.step),
        }
    except CanonicalError:
        return None


def _decided(body: PolicyDecided) -> bytes:
    arguments = body.arguments
    return _DECIDED % {
        b"arguments": _NULL if arguments is None else _plain(arguments),
        b"by": text_bytes(body.by),
        b"call_id": text_bytes(body.call_id),
        b"decision": text_bytes(body.decision),
        b"reason": text_bytes(body.reason),
        b"tool": text_bytes(body.tool),
    }


def _called(body: ToolCalled) -> bytes:
    return _CALLED % {
        b"arguments": _plain(body.arguments),
        b"call_id": text_bytes(body.call_id),
        b"tool": text_bytes(body.tool),
    }


def _returned(body: ToolReturned) -> bytes | None:
    result = result_bytes(body.result)
    if result is None:
        return None
    error_type = body.error_type
    return _RETURNED % {
        b"error_type": _NULL if error_type is None else text_bytes(error_type),
        b"result": result,
        b"truncated_chars": integer_bytes(body.truncated_chars),
    }


def _accepted(body: OutputAccepted) -> bytes:
    schema = body.schema_name
    return _ACCEPTED % {
        b"attempts": integer_bytes(body.attempts),
        b"schema_name": _NULL if schema is None else text_bytes(schema),
        b"value": _plain(body.value),
    }


_COMPOSED: dict[type, Callable[[Any], bytes | None]] = {
    PolicyDecided: _decided,
    ToolCalled: _called,
    ToolReturned: _returned,
    OutputAccepted: _accepted,
}


def body_bytes(body: BaseModel) -> bytes:
    """``canonical_bytes(body)``: composed for the events a tool call writes and the accepted
    output, the whole encoding for the rest (and for a body with no canonical form, so the
    error is the whole encoding's, naming the member).

    Raises:
        twinflow.vocab.CanonicalError: The body has no canonical form.
    """
    compose = _COMPOSED.get(type(body))
    if compose is not None:
        try:
            encoded = compose(body)
        except CanonicalError:
            encoded = None
        if encoded is not None:
            return encoded
    return canonical_bytes(body)
