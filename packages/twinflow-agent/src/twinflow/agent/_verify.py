"""Reading and verifying traces: the first bad event and what is wrong with it; repair.

Verification walks the lines once. Each line must have the exact shape the writer produces,
its digest must be the sha256 of its event bytes, its ``seq`` must be its position and its
``prev`` the digest of the event before. The first line that breaks a rule is classified:

- ``edited``: the line's bytes do not match its digest, or are not a trace line at all, or
  the chain breaks at a line whose sequence number is right;
- ``reordered``: the line holds a later event, and the expected one appears further down;
- ``removed``: the expected event appears nowhere (or the trace stops before its end);
- ``inserted``: the line is a copy of an earlier event, or a second claimant of a sequence
  number, or an event with a number already passed;
- ``truncated``: the last line has no newline (a writer cut off mid-line); every earlier
  event still verifies and `repair_trace` moves the partial line aside;
- ``checkpoint`` / ``signature``: the events do not match a given checkpoint, or its
  signature does not match the key.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from twinflow.agent._errors import SignatureError, TraceCorruptError
from twinflow.agent._events import GENESIS, TERMINAL_KINDS, TraceEvent
from twinflow.agent._merkle import MerkleTree, leaf_hash
from twinflow.agent._trace import (
    DIGEST_END,
    EVENT_INFIX,
    EVENT_START,
    LINE_PREFIX,
    Checkpoint,
    ConsistencyProof,
    InclusionProof,
    sign_checkpoint,
    verify_checkpoint_signature,
)

__all__ = [
    "Problem",
    "ProblemKind",
    "RepairResult",
    "Trace",
    "VerificationReport",
    "repair_trace",
    "verify_trace",
]

ProblemKind = Literal[
    "edited", "reordered", "removed", "inserted", "truncated", "checkpoint", "signature"
]
"""What is wrong with a trace (see the module docstring)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Problem(_Frozen):
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


class VerificationReport(_Frozen):
    """The outcome of verifying a trace."""

    ok: bool
    """True when nothing is wrong."""
    events: int
    """Events that verified (the good prefix)."""
    checkpoint: Checkpoint
    """Checkpoint of the good prefix."""
    problem: Problem | None
    """The first problem, if any."""


class RepairResult(_Frozen):
    """What `repair_trace` did."""

    moved_to: str | None
    """Where the partial last line was moved, or None if there was none."""
    moved_bytes: int
    """Bytes moved aside."""


@dataclass(frozen=True, slots=True)
class _Line:
    digest: str
    event: bytes
    seq: object
    prev: object
    kind: object


def _parse(line: bytes) -> _Line | str:
    """A trace line's parts, or why it is not a trace line."""
    if (
        not line.startswith(LINE_PREFIX)
        or line[DIGEST_END:EVENT_START] != EVENT_INFIX
        or line[-1:] != b"}"
    ):
        return "not a trace line (its frame is damaged)"
    digest = line[len(LINE_PREFIX) : DIGEST_END].decode("latin-1")
    event = line[EVENT_START:-1]
    if hashlib.sha256(event).hexdigest() != digest:
        return "its bytes do not match its digest (the event was edited)"
    try:
        obj = json.loads(event)
        body = obj["body"]
        return _Line(digest, event, obj["seq"], obj["prev"], body["kind"])
    except (ValueError, KeyError, TypeError):
        return "its digest matches but it is not an event (it was forged)"


@dataclass(slots=True)
class _Walk:
    lines: list[_Line]
    tree: MerkleTree
    problem: Problem | None
    last_kind: object


def _classify(
    index: int, item: _Line, expected_prev: str, rest: list[bytes], seen: dict[str, int]
) -> Problem:
    """Name what is wrong at a line whose sequence number or chain link is off."""
    seq, line_no = index, index + 1
    if type(item.seq) is not int:
        return Problem(kind="edited", seq=seq, line=line_no, message="seq is not an integer")
    if item.seq == index:
        following = _parse(rest[0]) if rest else None
        if (
            isinstance(following, _Line)
            and following.seq == index
            and following.prev == expected_prev
        ):
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
    if item.seq > index:
        for later in rest:
            parsed = _parse(later)
            if isinstance(parsed, _Line) and parsed.seq == index:
                return Problem(
                    kind="reordered",
                    seq=seq,
                    line=line_no,
                    message=f"found seq {item.seq} where seq {index} belongs; seq {index} comes later",
                )
        return Problem(
            kind="removed",
            seq=seq,
            line=line_no,
            message=f"found seq {item.seq} where seq {index} belongs; seq {index}..{item.seq - 1} are missing",
        )
    if item.digest in seen:
        return Problem(
            kind="inserted",
            seq=seq,
            line=line_no,
            message=f"a copy of seq {seen[item.digest]} was inserted",
        )
    if item.seq == index - 1:
        before = index - 2
        prior = next((d for d, at in seen.items() if at == before), GENESIS)
        if item.prev != prior:
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
        message=f"an event claiming seq {item.seq} was inserted where seq {index} belongs",
    )


def _walk(data: bytes) -> _Walk:
    parts = data.split(b"\n")
    raw_lines, partial = parts[:-1], parts[-1]
    tree = MerkleTree()
    good: list[_Line] = []
    seen: dict[str, int] = {}
    expected_prev = GENESIS
    last_kind: object = None
    for index, raw in enumerate(raw_lines):
        item = _parse(raw)
        if isinstance(item, str):
            problem = Problem(kind="edited", seq=index, line=index + 1, message=item)
            return _Walk(good, tree, problem, last_kind)
        if item.seq != index or item.prev != expected_prev:
            problem = _classify(index, item, expected_prev, raw_lines[index + 1 :], seen)
            return _Walk(good, tree, problem, last_kind)
        good.append(item)
        seen[item.digest] = index
        tree.append_hash(leaf_hash(bytes.fromhex(item.digest)))
        expected_prev = item.digest
        last_kind = item.kind
    if partial:
        problem = Problem(
            kind="truncated",
            seq=len(raw_lines),
            line=len(raw_lines) + 1,
            message=(
                f"the last line is incomplete ({len(partial)} bytes, no newline): the writer "
                "was cut off; every earlier event verifies; repair_trace moves it aside"
            ),
        )
        return _Walk(good, tree, problem, last_kind)
    return _Walk(good, tree, None, last_kind)


def _read(source: str | os.PathLike[str] | bytes) -> bytes:
    if isinstance(source, bytes):
        return source
    return Path(source).read_bytes()


def verify_trace(
    source: str | os.PathLike[str] | bytes,
    *,
    checkpoint: Checkpoint | None = None,
    key: bytes | None = None,
    require_complete: bool = True,
) -> VerificationReport:
    """Verify a trace and name the first problem.

    Args:
        source: A trace file path, or the trace's bytes.
        checkpoint: A checkpoint the trace must match (its first ``size`` events); the
            trace may extend past it.
        key: The HMAC key ``checkpoint`` must be signed with.
        require_complete: Require the trace to end with ``run_finished`` or ``run_failed``,
            which catches a file cut exactly at a line boundary.

    Returns:
        The report; ``ok`` is False when there is a problem.

    Raises:
        OSError: The file cannot be read.
    """
    return _verify(_read(source), checkpoint, key, require_complete)[0]


def _verify(
    data: bytes, checkpoint: Checkpoint | None, key: bytes | None, require_complete: bool
) -> tuple[VerificationReport, _Walk]:
    walk = _walk(data)
    problem = walk.problem
    size = walk.tree.size
    if problem is None and require_complete and walk.last_kind not in TERMINAL_KINDS:
        problem = Problem(
            kind="removed",
            seq=size,
            line=size + 1,
            message=(
                "the trace is empty"
                if size == 0
                else f"the trace stops after seq {size - 1} ({walk.last_kind}) without "
                "run_finished or run_failed: later events were removed, or the run crashed"
            ),
        )
    if problem is None and checkpoint is not None:
        problem = _check_checkpoint(walk, checkpoint, key)
    head = walk.lines[-1].digest if walk.lines else GENESIS
    good = Checkpoint(size=size, root=walk.tree.root().hex(), head=head)
    return VerificationReport(
        ok=problem is None, events=size, checkpoint=good, problem=problem
    ), walk


def _check_checkpoint(walk: _Walk, checkpoint: Checkpoint, key: bytes | None) -> Problem | None:
    size = walk.tree.size
    if key is not None:
        try:
            verify_checkpoint_signature(checkpoint, key)
        except SignatureError as exc:
            return Problem(
                kind="signature", seq=checkpoint.size, line=checkpoint.size + 1, message=str(exc)
            )
    if checkpoint.size > size:
        return Problem(
            kind="removed",
            seq=size,
            line=size + 1,
            message=f"the checkpoint covers {checkpoint.size} events, the trace holds {size}",
        )
    head = walk.lines[checkpoint.size - 1].digest if checkpoint.size else GENESIS
    if walk.tree.root(checkpoint.size).hex() != checkpoint.root or head != checkpoint.head:
        return Problem(
            kind="checkpoint",
            seq=0,
            line=1,
            message=(
                f"the first {checkpoint.size} events do not match the checkpoint's root: "
                "the trace was rewritten (chain and digests recomputed) or is another trace"
            ),
        )
    return None


class Trace:
    """A verified trace, read back: its events, digests, checkpoints and proofs."""

    def __init__(
        self,
        events: tuple[TraceEvent, ...],
        digests: tuple[str, ...],
        tree: MerkleTree,
        encoded: tuple[bytes, ...] = (),
    ) -> None:
        """Use `Trace.load`; this takes already verified parts."""
        self.events = events
        """The events, in order."""
        self.digests = digests
        """Each event's hex digest."""
        self.encoded = encoded
        """Each event's canonical bytes, as read (what its digest covers)."""
        self._tree = tree

    @classmethod
    def load(
        cls,
        source: str | os.PathLike[str] | bytes,
        *,
        require_complete: bool = False,
    ) -> Trace:
        """Read and verify a trace.

        Args:
            source: A trace file path, or the trace's bytes.
            require_complete: Refuse a trace without a terminal event.

        Returns:
            The trace.

        Raises:
            TraceCorruptError: The trace does not verify; ``.report`` holds the report.
        """
        report, walk = _verify(_read(source), None, None, require_complete)
        if report.problem is not None:
            raise TraceCorruptError(f"trace does not verify: {report.problem}", report)
        events = []
        for seq, line in enumerate(walk.lines):
            try:
                events.append(TraceEvent.model_validate_json(line.event))
            except ValidationError as exc:
                # Digest and chain hold but the event is not one the writer can produce: the
                # trace was rewritten with recomputed digests (only a checkpoint catches that).
                problem = Problem(
                    kind="edited",
                    seq=seq,
                    line=seq + 1,
                    message=f"its digest and chain match but it is not a valid event "
                    f"(it was forged): {exc.error_count()} validation errors",
                )
                head = walk.lines[seq - 1].digest if seq else GENESIS
                prefix = Checkpoint(size=seq, root=walk.tree.root(seq).hex(), head=head)
                bad = VerificationReport(ok=False, events=seq, checkpoint=prefix, problem=problem)
                raise TraceCorruptError(f"trace does not verify: {problem}", bad) from None
        return cls(
            tuple(events),
            tuple(line.digest for line in walk.lines),
            walk.tree,
            tuple(line.event for line in walk.lines),
        )

    @property
    def size(self) -> int:
        """Number of events."""
        return self._tree.size

    def checkpoint(self, size: int | None = None, *, key: bytes | None = None) -> Checkpoint:
        """The checkpoint of the first ``size`` events (default: all), signed if ``key``.

        Args:
            size: Events covered.
            key: Optional HMAC key.

        Returns:
            The checkpoint.
        """
        n = self.size if size is None else size
        head = self.digests[n - 1] if n else GENESIS
        checkpoint = Checkpoint(size=n, root=self._tree.root(n).hex(), head=head)
        return checkpoint if key is None else sign_checkpoint(checkpoint, key)

    def inclusion_proof(self, seq: int, size: int | None = None) -> InclusionProof:
        """Prove event ``seq`` is in the checkpoint of ``size`` events (default: all).

        Args:
            seq: The event's sequence number.
            size: Tree size.

        Returns:
            The proof.
        """
        n = self.size if size is None else size
        path = self._tree.inclusion_proof(seq, n)
        return InclusionProof(
            seq=seq, size=n, event_digest=self.digests[seq], path=tuple(p.hex() for p in path)
        )

    def consistency_proof(self, size1: int, size2: int | None = None) -> ConsistencyProof:
        """Prove the trace of ``size2`` events (default: all) extends that of ``size1``.

        Args:
            size1: Earlier size.
            size2: Later size.

        Returns:
            The proof.
        """
        n = self.size if size2 is None else size2
        path = self._tree.consistency_proof(size1, n)
        return ConsistencyProof(size1=size1, size2=n, path=tuple(p.hex() for p in path))


def repair_trace(path: str | os.PathLike[str]) -> RepairResult:
    """Move a partial last line aside so the trace ends at its last complete event.

    Nothing is deleted: the partial bytes are written (and synced) to a new side file
    ``<trace>.partial`` (or ``.partial.N``) before the trace is cut back to its last newline.

    Args:
        path: The trace file.

    Returns:
        Where the bytes went, if anywhere.

    Raises:
        OSError: The file cannot be read or written.
    """
    trace = Path(path)
    data = trace.read_bytes()
    cut = data.rfind(b"\n") + 1
    partial = data[cut:]
    if not partial:
        return RepairResult(moved_to=None, moved_bytes=0)
    side = trace.with_name(trace.name + ".partial")
    number = 0
    while side.exists():
        number += 1
        side = trace.with_name(f"{trace.name}.partial.{number}")
    with side.open("xb") as out:
        out.write(partial)
        out.flush()
        os.fsync(out.fileno())
    with trace.open("r+b") as f:
        f.truncate(cut)
        f.flush()
        os.fsync(f.fileno())
    return RepairResult(moved_to=str(side), moved_bytes=len(partial))
