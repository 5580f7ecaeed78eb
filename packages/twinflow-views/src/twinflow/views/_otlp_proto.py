"""The OTLP/JSON document `otlp_json` makes, as the protobuf bytes OTLP/HTTP sends.

A collector's OTLP/HTTP endpoint (``/v1/traces``) takes an ``ExportTraceServiceRequest`` in
protobuf (``Content-Type: application/x-protobuf``). The messages the export uses are few and
their field numbers fixed by opentelemetry-proto (``opentelemetry/proto/trace/v1/trace.proto``,
``common/v1/common.proto``, ``resource/v1/resource.proto``), so they are encoded here with the
standard library: fields in field-number order, proto3 defaults left out but for the members of
``AnyValue``'s oneof, which protobuf always writes. The tests hold the bytes equal to what the
official ``opentelemetry-proto`` classes serialise from the same document.
"""

from __future__ import annotations

import struct
from typing import Any

__all__ = ["otlp_protobuf"]

_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # a negative int64 is its two's complement, ten bytes
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (a string, bytes or a message)."""
    return _tag(number, _BYTES) + _varint(len(payload)) + payload


def _string(number: int, text: str) -> bytes:
    return _field(number, text.encode("utf-8")) if text else b""


def _fixed64(number: int, value: int) -> bytes:
    return _tag(number, _FIXED64) + struct.pack("<Q", value) if value else b""


def _any_value(value: dict[str, Any]) -> bytes:
    ((kind, item),) = value.items()
    if kind == "stringValue":
        return _field(1, str(item).encode("utf-8"))
    if kind == "boolValue":
        return _tag(2, _VARINT) + _varint(int(bool(item)))
    if kind == "intValue":
        return _tag(3, _VARINT) + _varint(int(item))
    if kind == "doubleValue":
        return _tag(4, _FIXED64) + struct.pack("<d", float(item))
    if kind == "arrayValue":
        return _field(5, b"".join(_field(1, _any_value(v)) for v in item.get("values", ())))
    raise ValueError(f"no protobuf form here for an OTLP {kind}")


def _attributes(number: int, attributes: list[dict[str, Any]]) -> bytes:
    return b"".join(
        _field(number, _string(1, a["key"]) + _field(2, _any_value(a["value"]))) for a in attributes
    )


def _event(event: dict[str, Any]) -> bytes:
    return (
        _fixed64(1, int(event["timeUnixNano"]))
        + _string(2, event["name"])
        + _attributes(3, event.get("attributes", []))
    )


def _span(span: dict[str, Any]) -> bytes:
    status = span.get("status")
    status_bytes = (
        b""
        if status is None
        else _field(
            15,
            _string(2, status.get("message", ""))
            + (_tag(3, _VARINT) + _varint(status["code"]) if status.get("code") else b""),
        )
    )
    return (
        _field(1, bytes.fromhex(span["traceId"]))
        + _field(2, bytes.fromhex(span["spanId"]))
        + (_field(4, bytes.fromhex(span["parentSpanId"])) if span.get("parentSpanId") else b"")
        + _string(5, span["name"])
        + (_tag(6, _VARINT) + _varint(span["kind"]) if span.get("kind") else b"")
        + _fixed64(7, int(span["startTimeUnixNano"]))
        + _fixed64(8, int(span["endTimeUnixNano"]))
        + _attributes(9, span.get("attributes", []))
        + b"".join(_field(11, _event(e)) for e in span.get("events", ()))
        + status_bytes
    )


def otlp_protobuf(document: dict[str, Any]) -> bytes:
    """An OTLP/JSON ``ExportTraceServiceRequest`` (as `otlp_json` makes it) in protobuf.

    Raises:
        ValueError: The document holds a value kind the export never makes (a key-value
            list, bytes).
    """
    out = bytearray()
    for resource_spans in document.get("resourceSpans", ()):
        resource = _attributes(1, resource_spans.get("resource", {}).get("attributes", []))
        body = _field(1, resource)
        for scope_spans in resource_spans.get("scopeSpans", ()):
            scope = scope_spans.get("scope", {})
            scope_bytes = _string(1, scope.get("name", "")) + _string(2, scope.get("version", ""))
            spans = b"".join(_field(2, _span(s)) for s in scope_spans.get("spans", ()))
            body += _field(2, _field(1, scope_bytes) + spans)
        out += _field(1, body)
    return bytes(out)
