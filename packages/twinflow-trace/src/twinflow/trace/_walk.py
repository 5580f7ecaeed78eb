"""One pass over a trace: each line read, checked on its own and against the chain, in turn.

The rules and the problem kinds are listed in `twinflow.trace._verify`; this module applies them.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Callable, Generator, Iterator
from typing import Any, BinaryIO, NamedTuple

from twinflow._base._open import open_regular
from twinflow.trace._canonical import parse_json
from twinflow.trace._checkpoint import Checkpoint
from twinflow.trace._errors import CanonicalError
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
from twinflow.trace._merkle import Frontier
from twinflow.trace._report import Problem, ProblemKind, Source, VerificationReport

_HEX = frozenset(b"0123456789abcdef")
_DIGEST_TEXT = re.compile("[0-9a-f]{64}")
_ENVELOPE = frozenset({"at", "body", "prev", "seq"})

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
        claimed: int = value["seq"]
        if claimed == index:
            return self._chain_broken(index, expected_prev, rest)
        if claimed > index:
            return self._ahead(index, claimed, rest)
        return self._behind(index, claimed, value, digest)

    def _parsed(self, raw: bytes) -> dict[str, Any] | None:
        """A later line's event, or None if it is not a good line on its own."""
        if raw[-1:] != b"\n":
            return None
        found = _parse(raw, self.limits)
        return found.value if isinstance(found, _Line) else None

    def _chain_broken(self, index: int, expected_prev: str, rest: Iterator[bytes]) -> Problem:
        """The line claims the right seq but does not chain: foreign, or edited."""
        following = next(rest, None)
        after = None if following is None else self._parsed(following)
        if after is not None and after["seq"] == index and after["prev"] == expected_prev:
            return Problem(
                kind="inserted",
                seq=index,
                line=index + 1,
                message=f"a foreign event claims seq {index}; the real one follows it",
            )
        return Problem(
            kind="edited",
            seq=index,
            line=index + 1,
            message=(
                f"prev does not match the digest of seq {index - 1}: that event or this one "
                "was edited and its digest recomputed"
                if index
                else "the first event's prev is not the genesis digest"
            ),
        )

    def _ahead(self, index: int, claimed: int, rest: Iterator[bytes]) -> Problem:
        """The line claims a later seq: the expected event comes later, or nowhere."""
        for later in rest:
            after = self._parsed(later)
            if after is not None and after["seq"] == index:
                return Problem(
                    kind="reordered",
                    seq=index,
                    line=index + 1,
                    message=f"found seq {claimed} where seq {index} belongs; seq {index} comes later",
                )
        return Problem(
            kind="removed",
            seq=index,
            line=index + 1,
            message=f"found seq {claimed} where seq {index} belongs; seq {index}..{claimed - 1} are missing",
        )

    def _behind(self, index: int, claimed: int, value: dict[str, Any], digest: str) -> Problem:
        """The line claims a seq already passed: a copy, or a second claimant."""
        if self._digest_at(claimed) == digest:
            return Problem(
                kind="inserted",
                seq=index,
                line=index + 1,
                message=f"a copy of seq {claimed} was inserted",
            )
        if claimed == index - 1:
            prior = GENESIS if index < 2 else self._digest_at(index - 2)
            if value["prev"] != prior:
                # The earlier claimant chains and this one does not: this one is the insertion.
                return Problem(
                    kind="inserted",
                    seq=index,
                    line=index + 1,
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
            seq=index,
            line=index + 1,
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
