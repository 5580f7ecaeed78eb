"""What verifying a trace reports: the first problem, the good prefix, the events read."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from twinflow.trace._checkpoint import Checkpoint

ProblemKind = Literal[
    "edited",
    "not_utf8",
    "too_long",
    "too_deep",
    "not_json",
    "duplicate_key",
    "non_finite",
    "number_form",
    "escape_form",
    "whitespace",
    "key_order",
    "not_event",
    "reordered",
    "removed",
    "inserted",
    "truncated",
    "checkpoint",
    "redacted",
    "format",
]
"""What is wrong with a trace (see the module docstring)."""

Source = str | os.PathLike[str] | bytes
"""A trace file path, or the trace's bytes."""


@dataclass(frozen=True, slots=True)
class Problem:
    """The first thing wrong with a trace."""

    kind: ProblemKind
    """What is wrong."""
    seq: int
    """The sequence number expected where the trace goes wrong (the first bad event)."""
    line: int
    """The 1-based line number where it goes wrong."""
    message: str
    """What was found, in words."""

    def __str__(self) -> str:
        """One line: kind, place and message."""
        return f"{self.kind} at seq {self.seq} (line {self.line}): {self.message}"

    def to_json(self) -> dict[str, Any]:
        """The problem as a JSON object."""
        return {"kind": self.kind, "seq": self.seq, "line": self.line, "message": self.message}


@dataclass(frozen=True, slots=True)
class VerificationReport:
    """The outcome of verifying a trace."""

    ok: bool
    """True when nothing is wrong."""
    events: int
    """Events that verified (the good prefix)."""
    checkpoint: Checkpoint
    """Checkpoint of the good prefix."""
    problem: Problem | None
    """The first problem, if any."""
    covered: int | None = None
    """How many events (seqs ``0..covered-1``) the given checkpoint vouches for; None without one.

    Less than ``events`` only when the caller accepted an uncovered tail."""
    redacted: tuple[int, ...] = ()
    """The seqs of the verified events that are redacted (their digest alone is in the file)."""

    def redaction(self) -> str | None:
        """``seqs 1, 4 are redacted (digest only)``, or None when none is."""
        if not self.redacted:
            return None
        seqs = ", ".join(str(s) for s in self.redacted[:20])
        more = f" and {len(self.redacted) - 20} more" if len(self.redacted) > 20 else ""
        verb = "is" if len(self.redacted) == 1 else "are"
        return (
            f"seq{'s' if len(self.redacted) > 1 else ''} {seqs}{more} {verb} redacted (digest only)"
        )

    def coverage(self) -> str | None:
        """``events 0-4 of 10`` (what the checkpoint covers), or None without a checkpoint."""
        if self.covered is None:
            return None
        if self.covered == 0:
            return f"no events of {self.events}"
        return f"events 0-{self.covered - 1} of {self.events}"


class VerifiedEvent(NamedTuple):
    """One event that verified, as `walk_trace` yields it.

    A named tuple, not a frozen dataclass: one is made per event, and a frozen dataclass's
    ``__init__`` (an ``object.__setattr__`` per field) cost a reader of a long trace more than
    hashing the event did.
    """

    seq: int
    """Its sequence number."""
    digest: str
    """Its hex digest."""
    event: bytes
    """Its canonical bytes, as read."""
    value: Any
    """What ``check`` returned for it (the parsed JSON object when there is no ``check``)."""
