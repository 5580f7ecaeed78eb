"""Streaming verification: the first bad event of a trace, and what is wrong with it.

Verification reads the trace line by line, in memory independent of its length: the Merkle root
is kept as a `Frontier` of O(log n) hashes, and a line longer than the limit is reported, never
buffered. Lines are parsed one by one and their canonical form is compared in batches of up to 64
lines (64 KiB), one encoder call each (`_canonical_texts` says why that is exact); events are
yielded once their batch is confirmed. Each line must be framed as the writer frames it, its digest must be the sha256 of its
event bytes, those bytes must be exactly the RFC 8785 encoding of what they parse to, the event
must have the envelope's shape, its ``seq`` must be its position and its ``prev`` the digest of
the event before. The first line that breaks a rule is classified:

- ``edited``: the line's bytes do not match its digest, or its frame is damaged, or the chain
  breaks at a line whose sequence number is right;
- ``not_utf8``, ``too_long``, ``too_deep``, ``not_json``, ``duplicate_key``, ``non_finite``,
  ``number_form``, ``escape_form``, ``whitespace``, ``key_order``: the digest matches but the
  event's bytes are not strict canonical JSON, for the reason named (a forger recomputed the
  digest over bytes parsers may read differently);
- ``not_event``: the bytes are canonical JSON but not an event (wrong members, unknown kind, a
  ``seq`` that is not an integer, ...), or the caller's ``check`` refused it;
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
  checkpoint is checked where its note is read (`read_published_checkpoint`).

A hash chain alone catches accidental and partial edits. A full rewrite that recomputes every
digest and ``prev`` verifies: only a checkpoint published before the rewrite catches it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, Literal, NamedTuple

from twinflow._base._errors import UserError
from twinflow._base._open import open_regular
from twinflow.trace._canonical import (
    _MISS,
    _canonical_texts,
    _fast_canonical,
    _fast_parse,
    parse_json,
)
from twinflow.trace._checkpoint import Checkpoint, ConsistencyProof, InclusionProof
from twinflow.trace._errors import CanonicalError, TraceCorruptError
from twinflow.trace._format import (
    DIGEST_END,
    EVENT_INFIX,
    EVENT_KINDS,
    EVENT_START,
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
]
"""What is wrong with a trace (see the module docstring)."""

Source = str | os.PathLike[str] | bytes
"""A trace file path, or the trace's bytes."""

_HEX = frozenset(b"0123456789abcdef")
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
_BATCH_LINES = 64
"""Lines whose canonical form one encoder call checks (`_canonical_texts`)."""
_BATCH_BYTES = 64 * 1024
"""At most this many event bytes in a batch; a longer event is checked on its own."""


_Pending = tuple[int, str, bytes, bytes, dict[str, Any], str, bytes]
"""A line that passed every rule but the canonical comparison, waiting for its batch:
(seq, digest, event bytes, their sha256, value, their text, the line)."""


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
    """A complete line's parts (newline removed), or (kind, why) it is not a trace line."""
    if (
        not raw.startswith(LINE_PREFIX)
        or raw[DIGEST_END:EVENT_START] != EVENT_INFIX
        or raw[-1:] != b"}"
    ):
        return "edited", "not a trace line (its frame is damaged)"
    event = raw[EVENT_START:-1]
    hashed = hashlib.sha256(event).digest()
    digest = hashed.hex()
    # Equal to a computed lowercase hex digest, the frame's digest is well formed too.
    if digest.encode("ascii") != raw[len(LINE_PREFIX) : DIGEST_END]:
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
    if type(prev) is not str or len(prev) != 64 or not _HEX.issuperset(prev.encode()):
        return "not_event", "prev is not a 64-digit lowercase hex digest"
    if type(at) is not str:
        return "not_event", "at is not a string"
    # A kind that is not a string (a list is unhashable) is no known kind either.
    if (
        type(body) is not dict
        or type(body.get("kind")) is not str
        or body["kind"] not in EVENT_KINDS
    ):
        kind = body.get("kind") if type(body) is dict else None
        return "not_event", f"body is not an event body of a known kind (kind {kind!r:.40})"
    return _Line(digest, event, value, hashed)


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
        for accepted in self._batches():
            yield from accepted

    def _batches(self) -> Iterator[list[_Accepted]]:
        """The good events a batch at a time: a caller that only needs the walk's outcome
        (`verify_trace`) resumes one generator per batch, not per event."""
        lines = _lines(self.source, self.limits.max_line_bytes)
        try:
            yield from self._events(lines)
        finally:
            self.done = True
            lines.close()

    def _events(self, lines: Iterator[bytes]) -> Iterator[list[_Accepted]]:
        limit = self.limits.max_line_bytes
        max_depth = self.limits.max_depth
        sha256 = hashlib.sha256
        expected_prev = GENESIS
        if 0 in self.marks:
            self.roots[0] = self.frontier.root()
        # Lines that passed every rule but the canonical comparison, which `_confirm` makes for
        # the whole batch in one encoder call.
        batch: list[_Pending] = []  # plain tuples: a named tuple per line cost 2 us
        size = 0
        for index, raw in enumerate(lines):
            # The fast path takes exactly the lines `_parse` accepts that also chain (seq and
            # prev as expected): framed, hashed, canonical, an event. Anything else, however
            # slightly off, takes the slow path, which names the problem.
            event = raw[EVENT_START:-2]
            hashed = sha256(event).digest()
            digest = hashed.hex()
            value: Any = _MISS
            text = ""
            if (
                raw.endswith(b"}\n")
                and raw.startswith(LINE_PREFIX)
                and raw.startswith(digest.encode(), _DIGEST_START)
                and raw.startswith(EVENT_INFIX, DIGEST_END)
                and len(event) <= _BATCH_BYTES
                and event.count(b"[") + event.count(b"{") <= max_depth
            ):
                try:
                    text = event.decode()
                except UnicodeDecodeError:
                    pass
                else:
                    value = _fast_parse(text)
            fast = (
                type(value) is dict
                and value.keys() == _ENVELOPE
                and value["prev"] == expected_prev
                and value["seq"] == index
                and type(value["seq"]) is int
                and type(value["at"]) is str
                and type(body := value["body"]) is dict
                and type(kind := body.get("kind")) is str
                and kind in EVENT_KINDS
            )
            if fast:
                batch.append((index, digest, event, hashed, value, text, raw))
                size += len(event)
                expected_prev = digest
                if len(batch) < _BATCH_LINES and size < _BATCH_BYTES:
                    continue
            # A full batch, or a line for the slow path: the lines before it come first.
            accepted, good = self._confirm(batch)
            if accepted:
                yield accepted
            batch.clear()
            size = 0
            if not good:
                return
            if fast:
                continue
            if (
                len(raw) == REDACTED_LINE_BYTES
                and raw.endswith(REDACTED_SUFFIX)
                and raw.startswith(LINE_PREFIX)
                and _HEX.issuperset(raw[_DIGEST_START:DIGEST_END])
            ):
                redacted = raw[_DIGEST_START:DIGEST_END].decode("ascii")
                accepted, good = self._redacted(index, redacted)
                if accepted:
                    yield accepted
                if not good:
                    return
                expected_prev = redacted
                continue
            slow = self._slow(index, raw, limit, expected_prev, lines)
            if isinstance(slow, Problem):
                self.problem = slow
                return
            accepted, good = self._accept(
                [(index, slow.digest, slow.event, slow.hashed, slow.value, "", raw)]
            )
            if accepted:
                yield accepted
            if not good:
                return
            expected_prev = slow.digest
        accepted, _ = self._confirm(batch)
        if accepted:
            yield accepted

    def _confirm(self, batch: list[_Pending]) -> tuple[list[_Accepted], bool]:
        """A batch's events once they are known canonical, and whether all of them are; False
        if one is not (or is refused by ``check``), with ``problem`` set at the first such line
        and the events before it accepted."""
        if not batch:
            return [], True
        if _canonical_texts([p[4] for p in batch], [p[5] for p in batch], [p[2] for p in batch]):
            return self._accept(batch)
        # One of them is not canonical (or the C encoder prints it otherwise): line by line,
        # the slow path names the first problem.
        out: list[_Accepted] = []
        for seq, digest, event, hashed, value, text, raw in batch:
            if _fast_canonical(event, text) is _MISS:
                # Its chain held when it was read, so the slow path never classifies it.
                slow = self._slow(seq, raw, self.limits.max_line_bytes, value["prev"], iter(()))
                if isinstance(slow, Problem):
                    self.problem = slow
                    return out, False
                value = slow.value
            accepted, good = self._accept([(seq, digest, event, hashed, value, text, raw)])
            out += accepted
            if not good:
                return out, False
        return out, True

    def _accept(self, items: list[_Pending]) -> tuple[list[_Accepted], bool]:
        """Take verified, chained events into the tree; them, and False (with ``problem`` set)
        at the first one ``check`` refuses."""
        check = self.check
        append = self.frontier.append_hash
        sha256 = hashlib.sha256
        marks = self.marks
        collecting = bool(self.order)
        if (
            check is None
            and not collecting
            and not any(items[0][0] < mark <= items[-1][0] + 1 for mark in marks)
        ):
            # Nothing to check, collect or mark inside the batch: its leaves go into the tree
            # a complete subtree at a time (`Frontier.extend`), not a method call each.
            self.frontier.extend([sha256(b"\x00" + item[3]).digest() for item in items])
            last = items[-1]
            self.head = last[1]
            self.last_kind = last[4]["body"]["kind"]
            return [
                (index, digest, event, value) for index, digest, event, _, value, _, _ in items
            ], True
        out: list[_Accepted] = []
        for index, digest, event, hashed, value, _, _ in items:
            typed: object = value
            if check is not None:
                try:
                    typed = check(value)
                except ValueError as exc:
                    first = " ".join(str(exc).split())[:300]
                    self._fail(
                        "not_event",
                        index,
                        f"its digest and chain match but it is not a valid event (it was forged): {first}",
                    )
                    return out, False
            leaf = sha256(b"\x00" + hashed).digest()  # the RFC 9162 leaf hash
            append(leaf)
            if collecting:
                self._collect(index, leaf)
            self.head = digest
            self.last_kind = value["body"]["kind"]
            if index + 1 in marks:
                self.roots[index + 1] = self.frontier.root()
            out.append((index, digest, event, typed))
        return out, True

    def _redacted(self, index: int, digest: str) -> tuple[list[_Accepted], bool]:
        """Take a redacted event's digest into the chain and the tree (its own ``seq`` and
        ``prev`` went with its bytes): the event, or False (with ``problem`` set) if the reader
        refuses it."""
        if not self.allow_redacted:
            self._fail(
                "redacted",
                index,
                f"event {index} is redacted (its digest alone is in the file): `verify` checks "
                "such a trace; this reader needs every event itself",
            )
            return [], False
        leaf = hashlib.sha256(b"\x00" + bytes.fromhex(digest)).digest()
        self.frontier.append_hash(leaf)
        if self.order:
            self._collect(index, leaf)
        self.head = digest
        self.last_kind = "redacted"
        self.redacted.append(index)
        if index + 1 in self.marks:
            self.roots[index + 1] = self.frontier.root()
        return [(index, digest, b"", None)], True

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

    def _slow(
        self, index: int, raw: bytes, limit: int, expected_prev: str, lines: Iterator[bytes]
    ) -> Problem | _Line:
        """The problem with a line the fast path did not accept, or the line: it is good after all.

        The fast path leaves out only screens' false alarms (a long digit run or a 4-byte
        character inside a string, a float in a form the C encoder prints differently): those
        lines are good and verify here.
        """
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
        item = _parse(raw[:-1], self.limits)
        if not isinstance(item, _Line):
            return Problem(kind=item[0], seq=index, line=index + 1, message=item[1])
        value = item.value
        if value["seq"] != index or value["prev"] != expected_prev:
            return self._classify(index, value, item.digest, expected_prev, lines)
        return item

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
            found = _parse(raw[:-1], self.limits)
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
            for _ in self._batches():
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
