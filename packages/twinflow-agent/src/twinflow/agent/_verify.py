"""Reading traces back as typed events: the trace leaf verifies, the agent's models type.

`twinflow.trace` verifies the bytes (format, digests, chain, envelope) streaming; each event that
passes is handed to `TraceEvent.model_validate` through the leaf's ``check`` hook, so this
module's `verify_trace` and `Trace.load` run the very same walk and agree on every input: an
event whose digest and chain hold but that no writer could produce is a ``not_event`` problem at
its seq for both.
"""

from __future__ import annotations

import contextlib
import gc
import os
from array import array
from collections.abc import Iterator, Sequence
from typing import Any, overload

from twinflow.agent._events import TraceEvent
from twinflow.trace import GENESIS as _GENESIS
from twinflow.trace import (
    Checkpoint,
    ConsistencyProof,
    InclusionProof,
    Limits,
    MerkleTree,
    Source,
    VerificationReport,
    leaf_hash,
    sign_checkpoint,
    walk_trace,
)
from twinflow.trace import verify_trace as _verify_trace

__all__ = ["Trace", "typed_event", "verify_trace"]


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a trace is read into memory.

    Every typed event is a few container objects that live as long as the trace, so reading a
    long one sets off generation after generation of collections that find nothing to free (it
    took about 40% of `Trace.load`). Reference counting still frees everything at once; the
    collector is switched back on (if it was on) when reading ends, however it ends.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class _Encoded(Sequence[bytes]):
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

    @overload
    def __getitem__(self, index: int) -> bytes: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[bytes]: ...
    def __getitem__(self, index: int | slice) -> bytes | Sequence[bytes]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        ends = self._ends
        end = ends[index]  # IndexError as a tuple raises it
        index %= len(ends)
        return bytes(self._data[ends[index - 1] if index else 0 : end])


class _Digests(Sequence[str]):
    """Each event's hex digest, read off the verified chain: no copy of them is kept."""

    __slots__ = ("_events", "_head")

    def __init__(self, events: tuple[TraceEvent, ...], head: str) -> None:
        self._events = events
        self._head = head

    def __len__(self) -> int:
        return len(self._events)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        events = self._events
        n = len(events)
        if not -n <= index < n:
            raise IndexError(f"digest index {index} is outside a trace of {n} events")
        index %= n
        return self._head if index == n - 1 else events[index + 1].prev


def typed_event(value: dict[str, Any]) -> TraceEvent:
    """The typed event of a verified event object (the leaf's ``check`` hook).

    Raises:
        ValueError: The object is not an event the agent can produce (a pydantic
            ``ValidationError``).
    """
    return TraceEvent.model_validate(value)


def verify_trace(
    source: Source,
    *,
    checkpoint: Checkpoint | None = None,
    key: bytes | None = None,
    require_complete: bool = True,
    limits: Limits | None = None,
) -> VerificationReport:
    """Verify a trace as `twinflow.trace.verify_trace` does, and type every event.

    Args:
        source: A trace file path, or the trace's bytes.
        checkpoint: A checkpoint the trace must match (its first ``size`` events).
        key: The HMAC key ``checkpoint`` must be signed with.
        require_complete: Require the trace to end with ``run_finished`` or ``run_failed``.
        limits: Line-size and nesting limits.

    Returns:
        The report; ``ok`` is False when there is a problem.

    Raises:
        OSError: The file cannot be read.
    """
    return _verify_trace(
        source,
        checkpoint=checkpoint,
        key=key,
        require_complete=require_complete,
        limits=limits,
        check=typed_event,
    )


class Trace:
    """A verified trace, read back: its events, digests, checkpoints and proofs.

    Held compactly, since a trace can be long: the events are the typed values; the canonical
    bytes of all events share one buffer; the digests are read off the chain (event ``i + 1``'s
    ``prev`` is event ``i``'s digest, verified); the Merkle tree (32 bytes per node) is built
    from the digests when a checkpoint or proof first needs it (replay, diff and reports never do).
    """

    def __init__(self, events: tuple[TraceEvent, ...], head: str, encoded: _Encoded) -> None:
        """Use `Trace.load`; this takes already verified parts."""
        self.events = events
        """The events, in order."""
        self.digests: Sequence[str] = _Digests(events, head)
        """Each event's hex digest."""
        self.encoded: Sequence[bytes] = encoded
        """Each event's canonical bytes, as read (what its digest covers)."""
        self._merkle: MerkleTree | None = None

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
    ) -> Trace:
        """Read and verify a trace, each event parsed once.

        Args:
            source: A trace file path, or the trace's bytes.
            require_complete: Refuse a trace without a terminal event.
            limits: Line-size and nesting limits.

        Returns:
            The trace.

        Raises:
            TraceCorruptError: The trace does not verify; ``.report`` holds the report.
            OSError: The file cannot be read.
        """
        events: list[TraceEvent] = []
        encoded = _Encoded()
        head = _GENESIS
        with _collector_paused():
            for item in walk_trace(
                source, limits=limits, check=typed_event, require_complete=require_complete
            ):
                events.append(item.value)
                encoded.append(item.event)
                head = item.digest
        return cls(tuple(events), head, encoded)

    @property
    def size(self) -> int:
        """Number of events."""
        return len(self.events)

    def checkpoint(self, size: int | None = None, *, key: bytes | None = None) -> Checkpoint:
        """The checkpoint of the first ``size`` events (default: all), signed if ``key``.

        Args:
            size: Events covered.
            key: Optional HMAC key (used exactly as given; an empty key is refused).

        Returns:
            The checkpoint.
        """
        n = self.size if size is None else size
        head = self.digests[n - 1] if n else _GENESIS
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
