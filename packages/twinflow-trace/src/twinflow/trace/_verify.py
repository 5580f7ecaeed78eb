"""Streaming verification: the first bad event of a trace, and what is wrong with it.

Verification reads the trace line by line, in memory independent of its length: the Merkle root
is kept as a `Frontier` of O(log n) hashes, and a line longer than the limit is reported, never
buffered. Each line is checked on its own, in the order a reader would check it by hand: it
must be framed as the writer frames it, its digest must be the sha256 of its event bytes, those bytes must be exactly the RFC 8785 encoding of what they parse to, the event
must have the envelope's shape, its ``seq`` must be its position and its ``prev`` the digest of
the event before. The first line that breaks a rule is classified:

- ``edited``: the line's bytes do not match its digest, or its frame is damaged, or the chain
  breaks at a line whose sequence number is right;
- ``not_utf8``, ``too_long``, ``too_deep``, ``not_json``, ``duplicate_key``, ``non_finite``,
  ``number_form``, ``escape_form``, ``whitespace``, ``key_order``: the digest matches but the
  event's bytes are not strict canonical JSON, for the reason named (a forger recomputed the
  digest over bytes parsers may read differently);
- ``not_event``: the bytes are canonical JSON but not an event (wrong members, a body without a
  string ``kind``, a ``seq`` that is not an integer, ...), or the caller's ``check`` refused it.
  An event of a kind this package does not know is an event: it verifies like any other;
- ``reordered``: the line holds a later event, and the expected one appears further down;
- ``removed``: the expected event appears nowhere (or the trace stops before its end);
- ``inserted``: the line is a copy of an earlier event, or a second claimant of a sequence
  number, or an event with a number already passed;
- ``truncated``: the last line has no newline (a writer cut off mid-line); every earlier
  event still verifies and `repair_trace` moves the partial line aside;
- ``redacted``: the line stands for a redacted event (its digest alone,
  `twinflow.trace.encode_redacted`) and the reader needs the event itself (`walk_trace` without
  ``allow_redacted``); `verify_trace` accepts such lines, chains and hashes their digests, and
  lists their seqs in the report's ``redacted``;
- ``checkpoint``: the events do not match a given checkpoint, or the trace holds events past
  the checkpoint and the caller did not accept an uncovered tail (a checkpoint of events 0-4
  says nothing about events 5-9: anyone can append or re-chain them). Who signed the
  checkpoint is checked where its note is read (`read_published_checkpoint`);
- ``format``: ``run_started`` names a trace format newer than this verifier knows
  (`FORMAT_VERSION`); nothing past it is checked.

A hash chain alone catches accidental and partial edits. A full rewrite that recomputes every
digest and ``prev`` verifies: only a checkpoint published before the rewrite catches it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import re
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, Literal, NamedTuple

from twinflow._base._errors import UserError
from twinflow._base._open import open_regular
from twinflow.trace._canonical import parse_json
from twinflow.trace._checkpoint import Checkpoint, ConsistencyProof, InclusionProof
from twinflow.trace._errors import CanonicalError, TraceCorruptError
from twinflow.trace._format import (
    DIGEST_END,
    EVENT_INFIX,
    EVENT_START,
    FORMAT_VERSION,
    GENESIS,
    LINE_PREFIX,
    REDACTED_LINE_BYTES,
    REDACTED_SUFFIX,
    TERMINAL_KINDS,
    Limits,
)
from twinflow.trace._merkle import Frontier, consistency_ranges, inclusion_ranges

__all__ = [
    "Problem",
    "ProblemKind",
    "Source",
    "VerificationReport",
    "VerifiedEvent",
    "prove_consistency",
    "prove_inclusion",
    "read_checkpoint",
    "verify_trace",
    "walk_trace",
]

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

_HEX = frozenset(b"0123456789abcdef")
_DIGEST_TEXT = re.compile("[0-9a-f]{64}")
_ENVELOPE = frozenset({"at", "body", "prev", "seq"})


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


_DIGEST_START = len(LINE_PREFIX)

_Accepted = tuple[int, str, bytes, object]
"""An event taken into the tree: (seq, digest, event bytes, what ``check`` made of it)."""


class _Line(NamedTuple):
    """A line that passed every per-line rule (the chain is checked by the walk)."""

    digest: str
    event: bytes
    value: dict[str, Any]
    hashed: bytes


def _lines(source: Source, limit: int) -> Generator[bytes, None, None]:
    """The raw lines of a trace, each at most ``limit + 1`` bytes (a longer one is cut there)."""
    stream: BinaryIO = io.BytesIO(source) if isinstance(source, bytes) else open_regular(source)
    try:
        while line := stream.readline(limit + 1):
            yield line
    finally:
        stream.close()


def _parse(raw: bytes, limits: Limits) -> _Line | tuple[ProblemKind, str]:
    """A complete line's parts (the line ends in a newline), or (kind, why) it is not a trace line.

    Any event kind is an event: the chain, the digests, the canonical form and the tree hold for
    every kind, so a reader older than the writer still verifies what it does not know.
    """
    if (
        not raw.startswith(LINE_PREFIX)
        or raw[DIGEST_END:EVENT_START] != EVENT_INFIX
        or raw[-2:] != b"}\n"
    ):
        return "edited", "not a trace line (its frame is damaged)"
    event = raw[EVENT_START:-2]
    hashed = hashlib.sha256(event).digest()
    digest = hashed.hex()
    # Equal to a computed lowercase hex digest, the frame's digest is well formed too.
    if digest.encode("ascii") != raw[_DIGEST_START:DIGEST_END]:
        return "edited", "its bytes do not match its digest (the event was edited)"
    try:
        value = parse_json(event, max_depth=limits.max_depth, canonical=True)
    except CanonicalError as exc:
        return _REASONS.get(exc.reason, "not_json"), f"its digest matches but {exc}"
    if type(value) is not dict or value.keys() != _ENVELOPE:
        return "not_event", "its digest matches but it is not an event object {at, body, prev, seq}"
    seq, prev, at, body = value["seq"], value["prev"], value["at"], value["body"]
    if type(seq) is not int or seq < 0:
        return "not_event", f"seq is not a non-negative integer: {seq!r:.40}"
    if type(prev) is not str or _DIGEST_TEXT.fullmatch(prev) is None:
        return "not_event", "prev is not a 64-digit lowercase hex digest"
    if type(at) is not str:
        return "not_event", "at is not a string"
    if type(body) is not dict or type(body.get("kind")) is not str:
        kind = body.get("kind") if type(body) is dict else None
        return "not_event", f"body is not an event body with a string kind (kind {kind!r:.40})"
    return _Line(digest, event, value, hashed)


def _format_problem(value: dict[str, Any]) -> str | None:
    """Why this verifier cannot vouch for a trace whose first event is ``value``, or None.

    ``run_started`` may name the trace format (an integer; absent means 1). A newer format may
    mean rules this verifier does not know, so it is refused rather than half-checked.
    """
    body = value["body"]
    if body["kind"] != "run_started" or "format" not in body:
        return None
    version = body["format"]
    if type(version) is not int or version < 1:
        return f"run_started names format {version!r:.40}; a format is a positive integer"
    if version > FORMAT_VERSION:
        return (
            f"the trace is written in format {version}; this verifier knows formats up to "
            f"{FORMAT_VERSION}: upgrade twinflow-trace (pip install -U twinflow-trace) and verify "
            "again"
        )
    return None


def _redacted_digest(raw: bytes) -> str | None:
    """The digest a redacted line stands for (`encode_redacted`), or None for any other line."""
    if (
        len(raw) == REDACTED_LINE_BYTES
        and raw.endswith(REDACTED_SUFFIX)
        and raw.startswith(LINE_PREFIX)
        and _HEX.issuperset(raw[_DIGEST_START:DIGEST_END])
    ):
        return raw[_DIGEST_START:DIGEST_END].decode("ascii")
    return None


_REASONS: dict[str, ProblemKind] = {
    reason: reason
    for reason in (
        "not_utf8",
        "too_deep",
        "not_json",
        "duplicate_key",
        "non_finite",
        "number_form",
        "escape_form",
        "whitespace",
        "key_order",
    )
}
_REASONS["no_json_form"] = "number_form"


class _Walk:
    """One pass over a trace: yields the good events; afterwards ``problem`` says what stopped it."""

    def __init__(
        self,
        source: Source,
        limits: Limits,
        check: Callable[[dict[str, Any]], object] | None,
        marks: set[int] | None = None,
        ranges: tuple[tuple[int, int], ...] = (),
        allow_redacted: bool = True,
    ) -> None:
        self.source = source
        self.allow_redacted = allow_redacted
        self.redacted: list[int] = []
        """Seqs of the redacted events passed so far."""
        self.limits = limits
        self.check = check
        self.frontier = Frontier()
        self.head = GENESIS
        self.last_kind: object = None
        self.problem: Problem | None = None
        self.roots: dict[int, bytes] = {}
        """Root of the prefix of each size in ``marks`` (filled as the walk passes it)."""
        self.marks = marks or set()
        self.done = False
        self.ranges = ranges
        self.range_hashes: list[bytes | None] = [None] * len(ranges)
        # Proof ranges are disjoint: collect them in leaf order, store them in proof order.
        self.order = sorted(range(len(ranges)), key=lambda i: ranges[i][0])
        self.current = 0
        """The position in ``order`` of the range being collected."""
        self.partial: Frontier | None = None
        """The tree of the range being collected, so far."""

    def _fail(self, kind: ProblemKind, index: int, message: str) -> None:
        self.problem = Problem(kind=kind, seq=index, line=index + 1, message=message)

    def __iter__(self) -> Iterator[_Accepted]:
        """The good events as ``(seq, digest, event bytes, checked value)``, streaming."""
        lines = _lines(self.source, self.limits.max_line_bytes)
        try:
            yield from self._events(lines)
        finally:
            self.done = True
            lines.close()

    def _events(self, lines: Iterator[bytes]) -> Iterator[_Accepted]:
        """Each line in turn: read it (frame, digest, canonical form, envelope, chain), then
        take it into the tree; stop at the first line that breaks a rule."""
        expected_prev = GENESIS
        self._mark(0)
        for index, raw in enumerate(lines):
            redacted = _redacted_digest(raw) if len(raw) == REDACTED_LINE_BYTES else None
            if redacted is not None:
                accepted = self._redacted(index, redacted)
            else:
                line = self._read(index, raw, expected_prev, lines)
                if isinstance(line, Problem):
                    self.problem = line
                    return
                accepted = self._accept(index, line)
            if accepted is None:
                return
            yield accepted
            expected_prev = accepted[1]

    def _read(
        self, index: int, raw: bytes, expected_prev: str, lines: Iterator[bytes]
    ) -> Problem | _Line:
        """Line ``index`` checked on its own and against the chain: the line, or its problem."""
        limit = self.limits.max_line_bytes
        if raw[-1:] != b"\n":
            if len(raw) > limit:
                return Problem(
                    kind="too_long",
                    seq=index,
                    line=index + 1,
                    message=f"the line is longer than {limit} bytes (the limit)",
                )
            return Problem(
                kind="truncated",
                seq=index,
                line=index + 1,
                message=f"the last line is incomplete ({len(raw)} bytes, no newline): the writer "
                "was cut off; every earlier event verifies; repair moves it aside",
            )
        item = _parse(raw, self.limits)
        if not isinstance(item, _Line):
            return Problem(kind=item[0], seq=index, line=index + 1, message=item[1])
        value = item.value
        if value["seq"] != index or value["prev"] != expected_prev:
            return self._classify(index, value, item.digest, expected_prev, lines)
        if index == 0 and (why := _format_problem(value)) is not None:
            return Problem(kind="format", seq=0, line=1, message=why)
        return item

    def _accept(self, index: int, line: _Line) -> _Accepted | None:
        """Take a verified, chained event into the tree; None (``problem`` set) if ``check``
        refuses it."""
        typed: object = line.value
        if self.check is not None:
            try:
                typed = self.check(line.value)
            except ValueError as exc:
                first = " ".join(str(exc).split())[:300]
                self._fail(
                    "not_event",
                    index,
                    f"its digest and chain match but it is not a valid event (it was forged): {first}",
                )
                return None
        self._add_leaf(index, line.hashed)
        self.head = line.digest
        self.last_kind = line.value["body"]["kind"]
        return (index, line.digest, line.event, typed)

    def _redacted(self, index: int, digest: str) -> _Accepted | None:
        """Take a redacted event's digest into the chain and the tree (its own ``seq`` and
        ``prev`` went with its bytes); None (``problem`` set) if the reader refuses it."""
        if not self.allow_redacted:
            self._fail(
                "redacted",
                index,
                f"event {index} is redacted (its digest alone is in the file): `verify` checks "
                "such a trace; this reader needs every event itself",
            )
            return None
        self._add_leaf(index, bytes.fromhex(digest))
        self.head = digest
        self.last_kind = "redacted"
        self.redacted.append(index)
        return (index, digest, b"", None)

    def _add_leaf(self, index: int, hashed: bytes) -> None:
        """Append event ``index`` (its sha256) to the tree as its RFC 9162 leaf."""
        leaf = hashlib.sha256(b"\x00" + hashed).digest()
        self.frontier.append_hash(leaf)
        if self.order:
            self._collect(index, leaf)
        if self.marks:
            self._mark(index + 1)

    def _mark(self, size: int) -> None:
        """Keep the root of the prefix of ``size`` events if a caller asked for it."""
        if size in self.marks:
            self.roots[size] = self.frontier.root()

    def _collect(self, index: int, leaf: bytes) -> None:
        """Add a leaf to the proof range being collected, if it falls in one."""
        order = self.order
        if self.current < len(order):
            start, end = self.ranges[order[self.current]]
            if start <= index < end:
                if self.partial is None:
                    self.partial = Frontier()
                self.partial.append_hash(leaf)
                if index == end - 1:
                    self.range_hashes[order[self.current]] = self.partial.root()
                    self.partial = None
                    self.current += 1

    def _digest_at(self, seq: int) -> str | None:
        """The digest on line ``seq`` (a second pass: only a failing trace pays for it)."""
        for number, raw in enumerate(_lines(self.source, self.limits.max_line_bytes)):
            if number == seq:
                return raw[len(LINE_PREFIX) : DIGEST_END].decode("latin-1")
        return None

    def _classify(
        self,
        index: int,
        value: dict[str, Any],
        digest: str,
        expected_prev: str,
        rest: Iterator[bytes],
    ) -> Problem:
        """Name what is wrong at a line whose sequence number or chain link is off."""
        seq, line_no = index, index + 1
        claimed: int = value["seq"]

        def parsed(raw: bytes) -> dict[str, Any] | None:
            if raw[-1:] != b"\n":
                return None
            found = _parse(raw, self.limits)
            return found.value if isinstance(found, _Line) else None

        if claimed == index:
            following = next(rest, None)
            after = None if following is None else parsed(following)
            if after is not None and after["seq"] == index and after["prev"] == expected_prev:
                return Problem(
                    kind="inserted",
                    seq=seq,
                    line=line_no,
                    message=f"a foreign event claims seq {index}; the real one follows it",
                )
            return Problem(
                kind="edited",
                seq=seq,
                line=line_no,
                message=(
                    f"prev does not match the digest of seq {index - 1}: that event or this one "
                    "was edited and its digest recomputed"
                    if index
                    else "the first event's prev is not the genesis digest"
                ),
            )
        if claimed > index:
            for later in rest:
                after = parsed(later)
                if after is not None and after["seq"] == index:
                    return Problem(
                        kind="reordered",
                        seq=seq,
                        line=line_no,
                        message=f"found seq {claimed} where seq {index} belongs; seq {index} comes later",
                    )
            return Problem(
                kind="removed",
                seq=seq,
                line=line_no,
                message=f"found seq {claimed} where seq {index} belongs; seq {index}..{claimed - 1} are missing",
            )
        if self._digest_at(claimed) == digest:
            return Problem(
                kind="inserted",
                seq=seq,
                line=line_no,
                message=f"a copy of seq {claimed} was inserted",
            )
        if claimed == index - 1:
            prior = GENESIS if index < 2 else self._digest_at(index - 2)
            if value["prev"] != prior:
                # The earlier claimant chains and this one does not: this one is the insertion.
                return Problem(
                    kind="inserted",
                    seq=seq,
                    line=line_no,
                    message=f"a second event claims seq {index - 1} and does not chain to the "
                    "event before it: it was inserted",
                )
            return Problem(
                kind="inserted",
                seq=index - 1,
                line=index,
                message=f"lines {index} and {index + 1} both claim seq {index - 1}: one was inserted",
            )
        return Problem(
            kind="inserted",
            seq=seq,
            line=line_no,
            message=f"an event claiming seq {claimed} was inserted where seq {index} belongs",
        )

    def finish(self, require_complete: bool) -> None:
        """Drain the walk (unless done) and add the completeness problem, if asked."""
        if not self.done:
            for _ in self:
                pass
        size = self.frontier.size
        if self.problem is None and require_complete and self.last_kind not in TERMINAL_KINDS:
            self._fail(
                "removed",
                size,
                "the trace is empty"
                if size == 0
                else f"the trace stops after seq {size - 1} ({self.last_kind}) without "
                "run_finished or run_failed: later events were removed, or the run crashed",
            )

    def checkpoint(self) -> Checkpoint:
        """The checkpoint of the good prefix."""
        return Checkpoint(size=self.frontier.size, root=self.frontier.root().hex(), head=self.head)

    def report(self) -> VerificationReport:
        """The report of the walk so far."""
        return VerificationReport(
            ok=self.problem is None,
            events=self.frontier.size,
            checkpoint=self.checkpoint(),
            problem=self.problem,
            redacted=tuple(self.redacted),
        )


def verify_trace(
    source: Source,
    *,
    checkpoint: Checkpoint | None = None,
    require_complete: bool = True,
    limits: Limits | None = None,
    check: Callable[[dict[str, Any]], object] | None = None,
    allow_tail: bool = False,
) -> VerificationReport:
    """Verify a trace, streaming, and name the first problem.

    Args:
        source: A trace file path, or the trace's bytes.
        checkpoint: A checkpoint the trace must match (its first ``size`` events). A trace that
            holds more events than it covers is a ``checkpoint`` problem unless ``allow_tail``.
        require_complete: Require the trace to end with ``run_finished`` or ``run_failed``,
            which catches a file cut exactly at a line boundary.
        limits: Line-size and nesting limits (default `Limits()`).
        check: Called with each event (a JSON object) that passed every other rule; raising
            `ValueError` makes it a ``not_event`` problem (the agent checks its typed models here).
        allow_tail: Accept events past ``checkpoint.size`` (a run that went on after a
            checkpoint was published); the report's ``covered`` says how many are vouched for.

    Returns:
        The report; ``ok`` is False when there is a problem.

    Raises:
        OSError: The file cannot be read.
    """
    marks = {checkpoint.size} if checkpoint is not None else None
    walk = _Walk(source, limits or Limits(), check, marks)
    walk.finish(require_complete)
    if walk.problem is None and checkpoint is not None:
        walk.problem = _check_checkpoint(walk, checkpoint, allow_tail)
    report = walk.report()
    if checkpoint is None or walk.problem is not None:
        return report
    return dataclasses.replace(report, covered=checkpoint.size)


def _check_checkpoint(walk: _Walk, checkpoint: Checkpoint, allow_tail: bool) -> Problem | None:
    size = walk.frontier.size
    n = checkpoint.size
    if n > size:
        return Problem(
            kind="removed",
            seq=size,
            line=size + 1,
            message=f"the checkpoint covers {n} events, the trace holds {size}",
        )
    if walk.roots[n].hex() != checkpoint.root:
        return Problem(
            kind="checkpoint",
            seq=max(n - 1, 0),
            line=max(n, 1),
            message=(
                f"the events up to seq {n - 1} do not match the checkpoint's root: one of them "
                "was rewritten (chain and digests recomputed) or this is another trace; the "
                "checkpoint commits to them as a whole, so `twinflow diff` against the "
                "published trace names the first that differs"
            ),
        )
    if n < size and not allow_tail:
        covered = f"events 0-{n - 1}" if n else "no events"
        return Problem(
            kind="checkpoint",
            seq=n,
            line=n + 1,
            message=(
                f"the checkpoint covers {covered} of {size}: events {n}-{size - 1} are not "
                "vouched for by it (anyone can append or re-chain them); check a checkpoint of "
                "the whole trace, or accept the uncovered tail explicitly"
            ),
        )
    return None


def _verified(walk: _Walk, require_complete: bool) -> _Walk:
    walk.finish(require_complete)
    if walk.problem is not None:
        raise TraceCorruptError(f"trace does not verify: {walk.problem}", walk.report())
    return walk


def walk_trace(
    source: Source,
    *,
    limits: Limits | None = None,
    check: Callable[[dict[str, Any]], object] | None = None,
    require_complete: bool = False,
    allow_redacted: bool = False,
) -> Generator[VerifiedEvent, None, Checkpoint]:
    """Yield a trace's events as they verify, streaming; raise at the first problem.

    Args:
        source: A trace file path, or the trace's bytes.
        limits: Line-size and nesting limits (default `Limits()`).
        check: As in `verify_trace`; its return value is each event's ``value``.
        require_complete: Refuse a trace without a terminal event (raised after the last event).
        allow_redacted: Yield a redacted event (its ``event`` empty, its ``value`` None, never
            passed to ``check``) instead of stopping there with a ``redacted`` problem.

    Yields:
        The events that verified, in order.

    Returns:
        The trace's checkpoint (the generator's value, for ``yield from``): a reader that
        needs it does not hash the events into a tree of its own.

    Raises:
        TraceCorruptError: The trace does not verify; ``.report`` holds the report.
        OSError: The file cannot be read.
    """
    walk = _Walk(source, limits or Limits(), check, allow_redacted=allow_redacted)
    for seq, digest, event, value in walk:
        yield VerifiedEvent(seq, digest, event, value)
    return _verified(walk, require_complete).checkpoint()


def read_checkpoint(
    source: Source, size: int | None = None, *, limits: Limits | None = None
) -> Checkpoint:
    """The checkpoint of a trace's first ``size`` events (default: all), streaming.

    Args:
        source: A trace file path, or the trace's bytes.
        size: Events to cover.
        limits: Line-size and nesting limits.

    Returns:
        The checkpoint.

    Raises:
        TraceCorruptError: The trace does not verify.
        UserError: ``size`` is beyond the trace.
    """
    walk = _verified(_Walk(source, limits or Limits(), None, _marks(size)), False)
    n = walk.frontier.size if size is None else size
    if not 0 <= n <= walk.frontier.size:
        raise UserError(f"size {n}: the trace holds {walk.frontier.size} events")
    if n == walk.frontier.size:
        return walk.checkpoint()
    return Checkpoint(size=n, root=walk.roots[n].hex(), head=_head(source, n, walk))


def _marks(*sizes: int | None) -> set[int]:
    return {s for s in sizes if s is not None}


def _head(source: Source, n: int, walk: _Walk) -> str:
    return GENESIS if n == 0 else (walk._digest_at(n - 1) or GENESIS)


def prove_inclusion(
    source: Source, seq: int, size: int | None = None, *, limits: Limits | None = None
) -> tuple[InclusionProof, Checkpoint]:
    """Prove event ``seq`` is in the first ``size`` events (default: all), streaming.

    Args:
        source: A trace file path, or the trace's bytes.
        seq: The event's sequence number.
        size: Tree size.
        limits: Line-size and nesting limits.

    Returns:
        The proof and the checkpoint of ``size`` events it leads to.

    Raises:
        TraceCorruptError: The trace does not verify.
        UserError: ``seq`` or ``size`` is outside the trace.
    """
    total = _size(source, limits) if size is None else size
    if not 0 <= seq < total:
        raise UserError(f"seq {seq}: a proof is for an event of the first {total} (0..{total - 1})")
    ranges = inclusion_ranges(seq, total)
    walk = _Walk(source, limits or Limits(), None, _marks(total), ranges)
    digest = ""
    for index, event_digest, _, _ in walk:
        if index == seq:
            digest = event_digest
    _verified(walk, False)
    if total > walk.frontier.size:
        raise UserError(f"size {total}: the trace holds {walk.frontier.size} events")
    path = tuple(h.hex() for h in walk.range_hashes if h is not None)
    checkpoint = Checkpoint(
        size=total, root=walk.roots[total].hex(), head=_head(source, total, walk)
    )
    return InclusionProof(seq=seq, size=total, event_digest=digest, path=path), checkpoint


def prove_consistency(
    source: Source, size1: int, size2: int | None = None, *, limits: Limits | None = None
) -> tuple[ConsistencyProof, Checkpoint, Checkpoint]:
    """Prove the first ``size2`` events (default: all) extend the first ``size1``, streaming.

    Args:
        source: A trace file path, or the trace's bytes.
        size1: The earlier size.
        size2: The later size.
        limits: Line-size and nesting limits.

    Returns:
        The proof, and the checkpoints of ``size1`` and ``size2`` events.

    Raises:
        TraceCorruptError: The trace does not verify.
        UserError: The sizes are not ``0 <= size1 <= size2 <= `` the trace's size.
    """
    total = _size(source, limits) if size2 is None else size2
    if not 0 <= size1 <= total:
        raise UserError(f"sizes {size1}->{total}: the earlier size must be between 0 and {total}")
    ranges = consistency_ranges(size1, total)
    walk = _verified(_Walk(source, limits or Limits(), None, _marks(size1, total), ranges), False)
    if total > walk.frontier.size:
        raise UserError(f"size {total}: the trace holds {walk.frontier.size} events")
    path = tuple(h.hex() for h in walk.range_hashes if h is not None)
    old = Checkpoint(size=size1, root=walk.roots[size1].hex(), head=_head(source, size1, walk))
    new = Checkpoint(size=total, root=walk.roots[total].hex(), head=_head(source, total, walk))
    return ConsistencyProof(size1=size1, size2=total, path=path), old, new


def _size(source: Source, limits: Limits | None) -> int:
    walk = _verified(_Walk(source, limits or Limits(), None), False)
    return walk.frontier.size
