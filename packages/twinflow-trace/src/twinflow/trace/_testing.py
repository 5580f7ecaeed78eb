"""Small real traces and re-chained (forged) ones, for the workspace's tests (private: tests import it).

A test of a verifier, a replay or a command needs traces: a valid one of a few events, and
ones an attacker would write, whose events were edited and whose chain was then recomputed so
that only what the test is about is wrong. These helpers build both from plain JSON event
objects with the standard library, the way `twinflow.trace` writes lines (`encode_line`), so
every package's tests (and anyone testing their own pipeline on twinflow traces) share one
kit. It ships in the leaf because the leaf is what every package (and an auditor) installs;
nothing in twinflow imports it outside tests (docs/adr/0076).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping

from twinflow.trace._canonical import canonical_bytes
from twinflow.trace._format import EVENT_INFIX, GENESIS, LINE_PREFIX, encode_line

__all__ = ["events_of", "framed", "rechain", "small_events", "small_trace"]

_KINDS = ("run_started", "tool_called", "tool_returned", "model_responded", "run_finished")


def small_events(n: int = 5) -> list[dict[str, object]]:
    """``n`` chained plain event objects (``seq``, ``prev``, ``at``, ``body``), the last a ``run_finished``."""
    out: list[dict[str, object]] = []
    prev = GENESIS
    for seq in range(n):
        kind = "run_finished" if seq == n - 1 else _KINDS[seq % (len(_KINDS) - 1)]
        event: dict[str, object] = {
            "at": f"2026-01-01T00:00:{seq % 60:02d}Z",
            "body": {"kind": kind, "n": seq, "text": f"event {seq}", "args": {"a": [1, 2.5]}},
            "prev": prev,
            "seq": seq,
        }
        out.append(event)
        prev = hashlib.sha256(canonical_bytes(event)).hexdigest()
    return out


def small_trace(n: int = 5) -> bytes:
    """A valid, complete trace of ``n`` events (`small_events`)."""
    return b"".join(encode_line(canonical_bytes(event))[0] for event in small_events(n))


def rechain(events: Iterable[Mapping[str, object]]) -> bytes:
    """Trace lines for ``events`` with ``seq``, ``prev`` and every digest recomputed.

    What a forger who rewrites a trace produces: each line is well formed and chained, so a
    verifier can only refuse it for what the events say (or a checkpoint it no longer matches).
    """
    prev, lines = GENESIS, []
    for seq, event in enumerate(events):
        line, prev = encode_line(canonical_bytes({**event, "seq": seq, "prev": prev}))
        lines.append(line)
    return b"".join(lines)


def framed(event: bytes) -> bytes:
    """A trace line around arbitrary event bytes, its digest computed over them as they are.

    For an event that is not canonical JSON (or not JSON): the line's framing and digest are
    right, so a verifier can only refuse what is inside.
    """
    digest = hashlib.sha256(event).hexdigest().encode()
    return LINE_PREFIX + digest + EVENT_INFIX + event + b"}\n"


def events_of(data: bytes) -> list[dict[str, object]]:
    """The event objects of a trace's lines (not verified), to edit and `rechain`."""
    return [json.loads(line)["event"] for line in data.splitlines() if line.strip()]
