"""The block path of verification (a block of lines checked in C-level passes) decides exactly as
the line-by-line path: the same report for every trace, good or forged, at any position."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twinflow.trace import (
    GENESIS,
    Limits,
    TraceCorruptError,
    _verify,
    canonical_bytes,
    encode_redacted,
    verify_trace,
    walk_trace,
)
from twinflow.trace.testing import framed

KINDS = ("run_started", "tool_called", "tool_returned", "model_responded")


def body(seq: int) -> dict[str, Any]:
    """A varied event body: nested objects and arrays, strings with escapes, numbers."""
    return {
        "kind": KINDS[seq % len(KINDS)],
        "args": {"a": [seq, 2.5, -7], "b": {"c": None, "d": True}},
        "text": f'line {seq}: "quoted", tab\there, é ü, \\ slash, x' * (1 + seq % 3),
        "n": seq * 1000,
    }


def event_bytes(seq: int, prev: str, body_: dict[str, Any]) -> bytes:
    """The canonical bytes of an event."""
    return canonical_bytes(
        {"at": f"2026-01-01T00:00:{seq % 60:02d}Z", "body": body_, "prev": prev, "seq": seq}
    )


def trace_of(raw_events: list[bytes]) -> bytes:
    """Framed lines over the given event bytes (their digests computed as they are)."""
    return b"".join(framed(e) for e in raw_events)


def chain(n: int, forged_at: int | None = None, variant: bytes = b"") -> list[bytes]:
    """``n`` chained event bytes, the last ``run_finished``; with ``forged_at``, that event's
    bytes are ``variant`` templated with its seq and prev, and the events after it chain to it."""
    out, prev = [], GENESIS
    for seq in range(n):
        b = {"kind": "run_finished"} if seq == n - 1 else body(seq)
        data = event_bytes(seq, prev, b)
        if seq == forged_at:
            data = variant.replace(b"PREV", prev.encode()).replace(b"SEQ", str(seq).encode())
        out.append(data)
        prev = hashlib.sha256(data).hexdigest()
    return out


AT = b'"at":"2026-01-01T00:00:00Z"'
TAIL = b'"prev":"PREV","seq":SEQ}'
VARIANTS = [
    b"{" + AT + b',"body":{"kind":"tool_called"},' + TAIL,  # canonical: a control
    b"{" + AT + b', "body":{"kind":"tool_called"},' + TAIL,
    b'{"body":{"kind":"tool_called"},' + AT + b"," + TAIL,
    b"{" + AT + b',"body":{"kind":"tool_called","kind":"tool_called"},' + TAIL,
    b"{" + AT + b',"body":{"kind":"tool_called","x":"\\u0041"},' + TAIL,
    b"{" + AT + b',"body":{"kind":"tool_called","x":"\\/"},' + TAIL,
    b"{" + AT + b',"body":{"kind":"tool_called","x":"\\u001F"},' + TAIL,
    b"{" + AT + b',"body":{"kind":"tool_called","x":"\\u001f"},' + TAIL,
    b"{" + AT + b',"body":{"kind":"tool_called","x":-0},' + TAIL,
    b"{" + AT + b',"body":{"kind":"tool_called","x":1.0},' + TAIL,
    b"{" + AT + b',"body":{"kind":"tool_called","x":1E2},' + TAIL,
    b"{" + AT + b',"body":{"kind":"tool_called","x":1e21},' + TAIL,
    b"{" + AT + b',"body":{"kind":"tool_called","x":12345678901234567},' + TAIL,
    b"{" + AT + b',"body":{"kind":"tool_called","x":1234567890123456},' + TAIL,
    b"{" + AT + b',"body":{"kind":"tool_called","x":[' + b"[" * 70 + b"]" * 70 + b"]}," + TAIL,
    b"{" + AT + b',"body":{"kind":"tool_called","\xef\xbf\xbd":1,"\xf0\x9f\x98\x80":2},' + TAIL,
    b"{" + AT + b',"body":{"kind":"tool_called","x":"\xf0\x9f\x98\x80"},' + TAIL,
    b"{" + AT + b',"body":{"kind":"tool_called","x":"\xff"},' + TAIL,
    b"{" + AT + b',"body":{"kind":"no_such_kind"},' + TAIL,
    b"{" + AT + b',"body":{"kind":["tool_called"]},' + TAIL,
    b"{" + AT + b',"body":[],' + TAIL,
    b'{"at":1,"body":{"kind":"tool_called"},' + TAIL,
    b"{" + AT + b',"body":{"kind":"tool_called"},"prev":"PREV","seq":SEQ.0}',
    b"{" + AT + b',"body":{"kind":"tool_called"},"prev":"PREV","seq":true}',
    b"{" + AT + b',"body":{"kind":"tool_called"},"prev":"PREV","seq":SEQ,"x":1}',
    b"{" + AT + b',"body":{"kind":"tool_called"},' + TAIL + b" ",
    b"{" + AT + b',"body":{"kind":"tool_called"},' + TAIL + b"{}",
    b"{" + AT + b',"body":{"kind":"tool_called"},"prev":"PREV"}',
    b"[1]",
    b"",
    b"{" + AT + b',"body":{"kind":"tool_called","x":"a\rb"},' + TAIL,
    b"{" + AT + b',"body":{"kind":"tool_called","x":"\\ud800"},' + TAIL,
]


@contextmanager
def line_by_line() -> Iterator[None]:
    """Every block goes the line-by-line way (the reference the block path must equal)."""
    saved = _verify._Walk._block
    _verify._Walk._block = lambda *args: None  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        _verify._Walk._block = saved  # type: ignore[method-assign]


def both(data: bytes, limits: Limits | None = None) -> tuple[object, object]:
    """The report of the block path and of the line-by-line path on the same bytes."""
    fast = verify_trace(data, limits=limits)
    with line_by_line():
        slow = verify_trace(data, limits=limits)
    return fast, slow


def walked(data: bytes) -> tuple[list[tuple[int, str, bytes, Any]], str | None]:
    """The events `walk_trace` yields, and the problem it raises at, if any."""
    out: list[tuple[int, str, bytes, Any]] = []
    try:
        for item in walk_trace(data, allow_redacted=True):
            out.append(tuple(item))  # type: ignore[arg-type]
    except TraceCorruptError as exc:
        return out, str(exc.report.problem)
    return out, None


N = 250  # about 100 KB: several blocks


def test_a_long_good_trace_verifies_by_blocks_as_line_by_line() -> None:
    """A trace several blocks long verifies, with the same checkpoint both ways."""
    data = trace_of(chain(N))
    assert len(data) > 2 * _verify._BLOCK_BYTES
    fast, slow = both(data)
    assert slow == fast
    assert fast.ok  # type: ignore[attr-defined]


@pytest.mark.parametrize("variant", VARIANTS, ids=range(len(VARIANTS)))
@pytest.mark.parametrize("at", [0, 1, 150, N - 2])
def test_a_forged_event_is_named_alike_by_blocks_and_line_by_line(variant: bytes, at: int) -> None:
    """A re-chained non-canonical (or non-event) line anywhere gets the same report both ways."""
    data = trace_of(chain(N, forged_at=at, variant=variant))
    fast, slow = both(data)
    assert slow == fast
    with line_by_line():
        reference = walked(data)
    assert reference == walked(data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, N - 1),
    st.sampled_from(["flip", "swap", "drop", "copy", "cut", "blank", "cr", "long", "redact"]),
    st.integers(0, 10_000),
)
def test_damage_anywhere_is_reported_alike_by_blocks_and_line_by_line(
    at: int, how: str, salt: int
) -> None:
    """Edited, reordered, removed, copied, cut, blank, carriage-returned, over-long and redacted
    lines at any position: the same report (kind, seq, message, checkpoint) both ways."""
    lines = trace_of(chain(N)).splitlines(keepends=True)
    line = lines[at]
    if how == "flip":
        i = salt % len(line)
        lines[at] = line[:i] + bytes([line[i] ^ 1]) + line[i + 1 :]
    elif how == "swap" and at + 1 < N:
        lines[at], lines[at + 1] = lines[at + 1], line
    elif how == "drop":
        del lines[at]
    elif how == "copy":
        lines.insert(at, lines[salt % N])
    elif how == "cut":
        lines = [*lines[:at], line[: salt % len(line)]]
    elif how == "blank":
        lines.insert(at, b"\n")
    elif how == "cr":
        lines[at] = line[:-1] + b"\r\n"
    elif how == "long":
        lines[at] = line[:-1] + b" " * 70_000 + b"\n"
    elif how == "redact":
        lines[at] = encode_redacted(line[11:75].decode())
    data = b"".join(lines)
    fast, slow = both(data, Limits(max_line_bytes=65_536))
    assert slow == fast
    with line_by_line():
        reference = walked(data)
    assert reference == walked(data)
