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
  `encode_redacted` in `_format`) and the reader needs the event itself (`walk_trace` without
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
from collections.abc import Callable, Generator
from typing import Any

from twinflow._base._errors import UserError
from twinflow.trace._checkpoint import Checkpoint, ConsistencyProof, InclusionProof
from twinflow.trace._errors import TraceCorruptError
from twinflow.trace._format import GENESIS, Limits
from twinflow.trace._merkle import consistency_ranges, inclusion_ranges
from twinflow.trace._report import (
    Problem,
    ProblemKind,
    Source,
    VerificationReport,
    VerifiedEvent,
)
from twinflow.trace._walk import _Walk

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
