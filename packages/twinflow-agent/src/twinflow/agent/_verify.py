"""Reading traces back as typed events: the trace leaf verifies, the agent's models type.

`twinflow.trace` verifies the bytes (format, digests, chain, envelope) streaming; each event that
passes is handed to `TraceEvent.model_validate` through the leaf's ``check`` hook, so this
module's `verify_trace` and `Trace.load` run the very same walk and agree on every input: an
event whose digest and chain hold but that no writer could produce is a ``not_event`` problem at
its seq for both.
"""

from __future__ import annotations

import os
from typing import Any

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
        digests: list[str] = []
        encoded: list[bytes] = []
        tree = MerkleTree()
        for item in walk_trace(
            source, limits=limits, check=typed_event, require_complete=require_complete
        ):
            events.append(item.value)
            digests.append(item.digest)
            encoded.append(item.event)
            tree.append_hash(leaf_hash(bytes.fromhex(item.digest)))
        return cls(tuple(events), tuple(digests), tree, tuple(encoded))

    @property
    def size(self) -> int:
        """Number of events."""
        return self._tree.size

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
