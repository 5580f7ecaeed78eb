"""The trace line format, and the limits every reader applies.

A trace is JSONL. Line ``i`` (from 0) is the RFC 8785 canonical JSON of
``{"digest": d, "event": e}`` followed by ``\\n``, where ``e`` is the event, an object with
exactly the members ``at`` (an RFC 3339 time), ``body`` (an object with a string ``kind``),
``prev`` (the digest of event ``i - 1``, `GENESIS` for the first) and ``seq``
(``i``), and ``d = sha256(canonical_bytes(e))`` in lowercase hex. Because the encoding is
canonical the event's bytes are a slice of the line: a verifier hashes them as they are, then
checks they are exactly the canonical encoding of what they parse to. The Merkle leaf of an event
is its 32-byte digest (RFC 9162 leaf hashing applies on top).

A redacted event is the line ``{"digest":d,"redacted":true}`` (the canonical JSON of that object):
its digest, and so the chain to the next event and the Merkle tree, stay; its bytes are gone
(`encode_redacted`; docs/adr/0112-redaction-keeps-the-digest.md).

The format grows (docs/adr/0158-the-trace-format-grows.md): a verifier checks the frame, the
digest, the canonical form, the chain and the tree of an event of ANY kind; the kinds it knows
(`EVENT_KINDS`) matter only for what it says about completeness (a run ends with one of
`TERMINAL_KINDS`). ``run_started`` may name the format it was written in, ``"format": N``
(absent means 1); a verifier refuses only a format newer than `FORMAT_VERSION`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from twinflow._base._errors import UserError
from twinflow.trace._canonical import DEFAULT_MAX_DEPTH

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "EVENT_KINDS",
    "FORMAT_VERSION",
    "GENESIS",
    "LINE_PREFIX",
    "TERMINAL_KINDS",
    "Limits",
    "encode_line",
    "encode_redacted",
]

GENESIS = "0" * 64
"""The ``prev`` of the first event of a trace."""

FORMAT_VERSION = 1
"""The newest trace format this package reads; ``run_started``'s ``format`` (absent: 1)."""

EVENT_KINDS = frozenset(
    {
        "run_started",
        "model_requested",
        "model_responded",
        "model_fell_back",
        "steering_received",
        "user_turn",
        "policy_decided",
        "tool_called",
        "tool_returned",
        "output_rejected",
        "output_accepted",
        "run_finished",
        "run_failed",
        "run_resumed",
        "approval_requested",
        "approval_decided",
        "tools_listed",
        "model_waited",
        "budget_exceeded",
        "input_requested",
        "input_answered",
    }
)
"""The ``body.kind`` tags this package knows (the agent's event models carry the same tags).

A trace may hold others (a newer writer's): they verify like any event."""

TERMINAL_KINDS = frozenset({"run_finished", "run_failed"})
"""Kinds that end a run; a complete trace ends with one."""

DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024
"""Default longest trace line a reader accepts (16 MiB, newline included)."""

LINE_PREFIX = b'{"digest":"'
"""The bytes every trace line starts with (a reader can tell a trace from another file by them)."""
DIGEST_END = len(LINE_PREFIX) + 64
EVENT_INFIX = b'","event":'
EVENT_START = DIGEST_END + len(EVENT_INFIX)
REDACTED_SUFFIX = b'","redacted":true}\n'
"""What follows the digest on a redacted event's line."""
REDACTED_LINE_BYTES = DIGEST_END + len(REDACTED_SUFFIX)


@dataclass(frozen=True, slots=True)
class Limits:
    """How much a reader of a trace accepts. Defaults: 16 MiB lines, 64 levels of nesting."""

    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    """Longest line, newline included; a longer one is reported (``too_long``), never buffered."""
    max_depth: int = DEFAULT_MAX_DEPTH
    """Deepest nesting of objects and arrays in an event (``too_deep``)."""

    def __post_init__(self) -> None:
        """Refuse limits that cannot hold a trace line."""
        if self.max_line_bytes < EVENT_START + 2:
            raise UserError(
                f"max_line_bytes {self.max_line_bytes} is below the shortest trace line "
                f"({EVENT_START + 2} bytes)"
            )
        if self.max_depth < 2:
            raise UserError(f"max_depth {self.max_depth}: an event nests at least 2 levels")


def encode_line(event: bytes, digest: str | None = None) -> tuple[bytes, str]:
    """Frame an event's canonical bytes as a trace line.

    Args:
        event: ``canonical_bytes`` of the event object.
        digest: The event's hex digest when it is known already (an event read back from a
            trace that verified: its digest was checked against these bytes); None: hashed here.

    Returns:
        The line (with its newline) and the event's hex digest.
    """
    hexdigest = hashlib.sha256(event).hexdigest() if digest is None else digest
    return LINE_PREFIX + hexdigest.encode() + EVENT_INFIX + event + b"}\n", hexdigest


def encode_redacted(digest: str) -> bytes:
    """The line that stands for a redacted event: its hex digest, nothing of its bytes.

    Args:
        digest: The event's 64-digit lowercase hex digest.

    Raises:
        UserError: ``digest`` is not 64 lowercase hex digits.
    """
    if len(digest) != 64 or not set(digest) <= set("0123456789abcdef"):
        raise UserError(f"{digest[:80]!r} is not a 64-digit lowercase hex digest")
    return LINE_PREFIX + digest.encode("ascii") + REDACTED_SUFFIX
