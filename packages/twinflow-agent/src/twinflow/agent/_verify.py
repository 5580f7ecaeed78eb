"""Reading traces back as typed events: the trace leaf verifies, the agent's models type.

`twinflow.trace` verifies the bytes (format, digests, chain, envelope) streaming; each event that
passes is handed to `TraceEvent.model_validate` through the leaf's ``check`` hook, so this
module's `verify_agent_trace` and `Trace.load` run the very same walk and agree on every input: an
event whose digest and chain hold but that no writer could produce is a ``not_event`` problem at
its seq for both.
"""

from __future__ import annotations

import os
import re
import typing
from abc import abstractmethod
from array import array
from collections.abc import Collection, Iterator, Sequence
from typing import Any, TypeVar, overload

from twinflow.agent._events import EventBody, TraceEvent
from twinflow.trace import (
    Checkpoint,
    ConsistencyProof,
    InclusionProof,
    Limits,
    MerkleTree,
    VerificationReport,
    walk_trace,
)
from twinflow.trace import verify_trace as _verify_trace
from twinflow.trace._canonical import parse_json
from twinflow.trace._format import GENESIS as _GENESIS
from twinflow.trace._merkle import leaf_hash

__all__ = ["EVERY_KIND", "Trace", "typed_event", "verify_agent_trace"]

_T = TypeVar("_T")


class _OnRead(Sequence[_T]):
    """A sequence over a trace's shared buffers whose items are made when read."""

    __slots__ = ()

    @abstractmethod
    def _item(self, index: int) -> _T:
        """Item ``index``, with ``0 <= index < len(self)``."""

    @overload
    def __getitem__(self, index: int) -> _T: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[_T]: ...
    def __getitem__(self, index: int | slice) -> _T | Sequence[_T]:
        if isinstance(index, slice):
            return tuple(map(self._item, range(*index.indices(len(self)))))
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"index {index} is outside a trace of {n} events")
        return self._item(index % n)


class _Encoded(_OnRead[bytes]):
    """The events' canonical bytes in one buffer: a `bytes` object per event costs 41 bytes more."""

    __slots__ = ("_data", "_ends")

    def __init__(self) -> None:
        self._data = bytearray()
        self._ends = array("Q")

    def append(self, event: bytes) -> None:
        """Add the next event's bytes."""
        self._data += event
        self._ends.append(len(self._data))

    def __len__(self) -> int:
        return len(self._ends)

    def _item(self, index: int) -> bytes:
        return bytes(self._data[self._ends[index - 1] if index else 0 : self._ends[index]])

    def __iter__(self) -> Iterator[bytes]:
        data, start = self._data, 0
        for end in self._ends:
            yield bytes(data[start:end])
            start = end


class _Events(_OnRead[TraceEvent]):
    """The typed events, each built from its verified bytes when it is read (ADR 0075).

    `Trace.load` typed every event once to verify it; holding those values cost four times the
    file. An event is built again each time it is read, from the value the verifier reads
    (`parse_json` in canonical mode: an integer of 16 or more digits is the double it denotes,
    as at load, not a Python int with no canonical form) and the same `typed_event` call. A
    reader that goes over the events several times keeps ``tuple(trace.events)``. The events of
    the kinds load was asked to keep (``Trace.load(keep=...)``, ADR 0143) are held as they
    verified and returned as they are.
    """

    __slots__ = ("_encoded", "_kept", "_max_depth")

    def __init__(
        self, encoded: _Encoded, max_depth: int, kept: dict[int, TraceEvent] | None = None
    ) -> None:
        self._encoded = encoded
        self._max_depth = max_depth
        self._kept = kept or {}  # by index: the very values that verified

    def __len__(self) -> int:
        return len(self._encoded)

    def _item(self, index: int) -> TraceEvent:
        kept = self._kept.get(index)
        return kept if kept is not None else self._typed(self._encoded._item(index))

    def __iter__(self) -> Iterator[TraceEvent]:
        if not self._kept:
            return map(self._typed, self._encoded)
        return self._with_kept()

    def _with_kept(self) -> Iterator[TraceEvent]:
        kept = self._kept
        for index, event in enumerate(self._encoded):
            found = kept.get(index)
            yield found if found is not None else self._typed(event)

    def _typed(self, event: bytes) -> TraceEvent:
        # The bytes were verified canonical at load (ADR 0138): a plain parse reads the value
        # the canonical one would, except an integer of 16 or more digits (a double there).
        if _SIXTEEN_DIGITS.search(event) is None:
            value = parse_json(event, max_depth=self._max_depth, strict=False)
        else:
            value = parse_json(event, max_depth=self._max_depth, canonical=True)
        return typed_event(value)


# A run of 16 digits anywhere (in a string too: that only costs the canonical parse).
_SIXTEEN_DIGITS = re.compile(rb"[0-9]{16}")


# Every body kind, in a fixed order: `_Kinds` holds one byte per event, an index into it.
_KIND_NAMES: tuple[str, ...] = tuple(
    typing.get_args(body.model_fields["kind"].annotation)[0]
    for body in typing.get_args(typing.get_args(EventBody)[0])
)
_KIND_INDEX = {kind: index for index, kind in enumerate(_KIND_NAMES)}
EVERY_KIND = frozenset(_KIND_NAMES)
"""Every body kind: ``Trace.load(..., keep=EVERY_KIND)`` keeps every event as it verified."""


class _Kinds(_OnRead[str]):
    """Each event's body kind, one byte apiece, noted as the event was typed at load."""

    __slots__ = ("_raw",)

    def __init__(self) -> None:
        self._raw = bytearray()

    def append(self, kind: str) -> None:
        """Add the next event's kind."""
        self._raw.append(_KIND_INDEX[kind])

    def __len__(self) -> int:
        return len(self._raw)

    def _item(self, index: int) -> str:
        return _KIND_NAMES[self._raw[index]]

    def __iter__(self) -> Iterator[str]:
        # Not `Sequence.__iter__`: that indexes item by item, checking the bounds each time.
        return map(_KIND_NAMES.__getitem__, self._raw)


class _Digests(_OnRead[str]):
    """Each event's digest, 32 bytes apiece in one buffer; read as hex."""

    __slots__ = ("_raw",)

    def __init__(self) -> None:
        self._raw = bytearray()

    def append(self, digest: str) -> None:
        """Add the next event's hex digest."""
        self._raw += bytes.fromhex(digest)

    def __len__(self) -> int:
        return len(self._raw) // 32

    def _item(self, index: int) -> str:
        return self._raw[index * 32 : index * 32 + 32].hex()

    def __iter__(self) -> Iterator[str]:
        raw = self._raw
        return (raw[start : start + 32].hex() for start in range(0, len(raw), 32))


def typed_event(value: dict[str, Any]) -> TraceEvent:
    """The typed event of a verified event object (the leaf's ``check`` hook).

    Raises:
        ValueError: The object is not an event the agent can produce (a pydantic
            ``ValidationError``).
    """
    return TraceEvent.model_validate(value)


def verify_agent_trace(
    source: str | os.PathLike[str] | bytes,
    *,
    checkpoint: Checkpoint | None = None,
    require_complete: bool = True,
    limits: Limits | None = None,
    allow_tail: bool = False,
) -> VerificationReport:
    """Verify a trace as `twinflow.trace.verify_trace` does, and type every event.

    Args:
        source: A trace file path, or the trace's bytes.
        checkpoint: A checkpoint the trace must match (its first ``size`` events).
        require_complete: Require the trace to end with ``run_finished`` or ``run_failed``.
        limits: Line-size and nesting limits.
        allow_tail: Accept events past ``checkpoint.size`` (not vouched for by it).

    Returns:
        The report; ``ok`` is False when there is a problem.

    Raises:
        OSError: The file cannot be read.
    """
    return _verify_trace(
        source,
        checkpoint=checkpoint,
        require_complete=require_complete,
        limits=limits,
        check=typed_event,
        allow_tail=allow_tail,
    )


class Trace:
    """A verified trace, read back: its events, digests, checkpoints and proofs.

    Held compactly, since a trace can be long (ADR 0075): the canonical bytes of all events share
    one buffer and the digests another (32 bytes each); ``events`` builds each typed event from
    its bytes when it is read (but those of the kinds load was asked to keep); the Merkle tree
    (32 bytes per node) is built from the digests when a checkpoint or proof first needs it
    (replay, diff and reports never do).
    """

    def __init__(
        self,
        encoded: _Encoded,
        digests: _Digests,
        max_depth: int,
        kinds: _Kinds | None = None,
        kept: dict[int, TraceEvent] | None = None,
        checkpoint: Checkpoint | None = None,
    ) -> None:
        """Use `Trace.load`; this takes already verified parts (``checkpoint``: of all the
        events, when the walk that verified them computed it)."""
        self.events: Sequence[TraceEvent] = _Events(encoded, max_depth, kept)
        """The events, in order, each typed when it is read (keep ``tuple(trace.events)`` to
        read them several times)."""
        if kinds is None:
            kinds = _Kinds()
            for event in self.events:
                kinds.append(event.body.kind)
        self.kinds: Sequence[str] = kinds
        """Each event's body kind (``model_responded``, ...), read without typing the event:
        a reader that needs a few kinds types only those (``trace.events[i]``)."""
        self.digests: Sequence[str] = digests
        """Each event's hex digest."""
        self.encoded: Sequence[bytes] = encoded
        """Each event's canonical bytes, as read (what its digest covers)."""
        self._merkle: MerkleTree | None = None
        self._checkpoint = checkpoint

    @property
    def _tree(self) -> MerkleTree:
        """The Merkle tree of the events, built on first use."""
        if self._merkle is None:
            tree = MerkleTree()
            for digest in self.digests:
                tree.append_hash(leaf_hash(bytes.fromhex(digest)))
            self._merkle = tree
        return self._merkle

    @classmethod
    def load(
        cls,
        source: str | os.PathLike[str] | bytes,
        *,
        require_complete: bool = False,
        limits: Limits | None = None,
        keep: Collection[str] = (),
    ) -> Trace:
        """Read and verify a trace; every event is typed once to check it.

        Args:
            source: A trace file path, or the trace's bytes.
            require_complete: Refuse a trace without a terminal event.
            limits: Line-size and nesting limits.
            keep: Body kinds whose typed events are kept as verification typed them, so
                reading them from ``events`` costs nothing; each costs about four times its
                bytes in memory (the others are typed again when read). A trace to replay:
                `REPLAY_KINDS`. A kept event is the same object at every read: its values
                are frozen, but a dict inside one (a call's arguments) is not, and a change to
                it is seen by every later reader of this trace (a second replay included). Copy
                what you change.

        Returns:
            The trace.

        Raises:
            TraceCorruptError: The trace does not verify; ``.report`` holds the report.
            OSError: The file cannot be read.
        """
        limits = limits or Limits()
        encoded = _Encoded()
        digests = _Digests()
        kinds = _Kinds()
        kept: dict[int, TraceEvent] = {}
        keep = frozenset(keep)
        walk = walk_trace(
            source, limits=limits, check=typed_event, require_complete=require_complete
        )
        while True:
            try:
                item = next(walk)
            except StopIteration as end:
                # Every event verified: the walk returns the checkpoint of the tree it grew, so
                # a checkpoint of them all (a replay's) needs no second tree.
                checkpoint: Checkpoint = end.value
                break
            event: TraceEvent = item.value
            if event.body.kind in keep:
                kept[len(kinds)] = event
            encoded.append(item.event)
            digests.append(item.digest)
            kinds.append(event.body.kind)
        return cls(encoded, digests, limits.max_depth, kinds, kept, checkpoint)

    @property
    def size(self) -> int:
        """Number of events."""
        return len(self.encoded)

    def checkpoint(self, size: int | None = None) -> Checkpoint:
        """The checkpoint of the first ``size`` events (default: all).

        Args:
            size: Events covered.

        Returns:
            The checkpoint.
        """
        n = self.size if size is None else size
        if n == self.size and self._checkpoint is not None:
            return self._checkpoint
        head = self.digests[n - 1] if n else _GENESIS
        return Checkpoint(size=n, root=self._tree.root(n).hex(), head=head)

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
