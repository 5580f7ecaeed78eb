"""Writing the trace: hash-chained JSONL lines over an RFC 9162 Merkle tree, and checkpoints.

A trace line is the canonical JSON (RFC 8785) of ``{"digest": d, "event": e}`` where ``e``
is the `TraceEvent` and ``d = sha256(canonical_bytes(e))``: the event's bytes are a slice of
the line, so verification hashes them without re-encoding. The Merkle leaf of an event is
its 32-byte digest. Appending an event costs the encoding of that event, two hashes, one
amortised node hash and a buffered write, whatever the length of the trace.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from twinflow.agent._encoding import event_bytes
from twinflow.agent._errors import InvalidProofError, SignatureError
from twinflow.agent._events import GENESIS, EventBody, TraceEvent
from twinflow.agent._merkle import MerkleTree, leaf_hash, verify_consistency, verify_inclusion
from twinflow.agent._sink import FsyncPolicy, TraceSink
from twinflow.vocab import canonical_bytes

__all__ = [
    "Checkpoint",
    "ConsistencyProof",
    "InclusionProof",
    "TraceWriter",
    "check_consistency",
    "check_inclusion",
    "encode_line",
    "sign_checkpoint",
    "verify_checkpoint_signature",
]

LINE_PREFIX = b'{"digest":"'
DIGEST_END = len(LINE_PREFIX) + 64
EVENT_INFIX = b'","event":'
EVENT_START = DIGEST_END + len(EVENT_INFIX)
_SIGNING_DOMAIN = b"twinflow-checkpoint-v1\n"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Checkpoint(_Frozen):
    """The head of a trace: how many events, their Merkle root, the last event's digest."""

    size: int = Field(ge=0)
    """Number of events covered."""
    root: str
    """Hex RFC 9162 Merkle root over the events' digests."""
    head: str
    """Hex digest of the last covered event (`GENESIS` for an empty trace)."""
    signature: str | None = None
    """Hex HMAC-SHA256 over the unsigned checkpoint, if signed."""

    def signing_bytes(self) -> bytes:
        """The bytes a signature covers: a domain tag and the canonical unsigned fields."""
        return _SIGNING_DOMAIN + canonical_bytes(
            {"head": self.head, "root": self.root, "size": self.size}
        )


def sign_checkpoint(checkpoint: Checkpoint, key: bytes) -> Checkpoint:
    """Return ``checkpoint`` signed with HMAC-SHA256 under ``key``.

    Args:
        checkpoint: The checkpoint (any existing signature is replaced).
        key: The secret key.

    Returns:
        The signed checkpoint.
    """
    mac = hmac.new(key, checkpoint.signing_bytes(), hashlib.sha256).hexdigest()
    return checkpoint.model_copy(update={"signature": mac})


def verify_checkpoint_signature(checkpoint: Checkpoint, key: bytes) -> None:
    """Check a checkpoint's HMAC-SHA256 signature.

    Args:
        checkpoint: The signed checkpoint.
        key: The secret key it was signed with.

    Raises:
        SignatureError: The checkpoint is unsigned or the signature does not match.
    """
    if checkpoint.signature is None:
        raise SignatureError(f"checkpoint of size {checkpoint.size} is not signed")
    expected = hmac.new(key, checkpoint.signing_bytes(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, checkpoint.signature):
        raise SignatureError(
            f"checkpoint of size {checkpoint.size}: signature does not match the key "
            "(the checkpoint was altered or signed with another key)"
        )


class InclusionProof(_Frozen):
    """Proof that one event is in the trace a checkpoint of ``size`` describes."""

    seq: int = Field(ge=0)
    """The event's sequence number (its leaf index)."""
    size: int = Field(ge=1)
    """Tree size the proof is for."""
    event_digest: str
    """Hex digest of the event."""
    path: tuple[str, ...]
    """Hex node hashes of the audit path."""


class ConsistencyProof(_Frozen):
    """Proof that the trace of ``size2`` events extends the one of ``size1``."""

    size1: int = Field(ge=0)
    """Earlier size."""
    size2: int = Field(ge=0)
    """Later size."""
    path: tuple[str, ...]
    """Hex node hashes."""


def _unhex(value: str, what: str) -> bytes:
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise InvalidProofError(f"{what} is not hex: {value[:80]!r}") from None


def check_inclusion(proof: InclusionProof, checkpoint: Checkpoint) -> None:
    """Check an inclusion proof against a checkpoint of the same size.

    Args:
        proof: The proof.
        checkpoint: A checkpoint whose ``size`` equals ``proof.size``.

    Raises:
        InvalidProofError: The proof does not lead to the checkpoint's root.
    """
    if proof.size != checkpoint.size:
        raise InvalidProofError(
            f"proof is for size {proof.size}, checkpoint is for size {checkpoint.size}"
        )
    verify_inclusion(
        leaf_hash(_unhex(proof.event_digest, "event digest")),
        proof.seq,
        proof.size,
        [_unhex(p, f"path[{i}]") for i, p in enumerate(proof.path)],
        _unhex(checkpoint.root, "root"),
    )


def check_consistency(proof: ConsistencyProof, old: Checkpoint, new: Checkpoint) -> None:
    """Check that checkpoint ``new`` extends checkpoint ``old``.

    Args:
        proof: The consistency proof between their sizes.
        old: The earlier checkpoint.
        new: The later checkpoint.

    Raises:
        InvalidProofError: The sizes do not match the proof, or the proof fails.
    """
    if (proof.size1, proof.size2) != (old.size, new.size):
        raise InvalidProofError(
            f"proof is for sizes {proof.size1}->{proof.size2}, "
            f"checkpoints are {old.size}->{new.size}"
        )
    verify_consistency(
        proof.size1,
        proof.size2,
        [_unhex(p, f"path[{i}]") for i, p in enumerate(proof.path)],
        _unhex(old.root, "root1"),
        _unhex(new.root, "root2"),
    )


def encode_line(event: TraceEvent) -> tuple[bytes, str]:
    """Encode an event as a trace line.

    Args:
        event: The event.

    Returns:
        The line (with its newline) and the event's hex digest.
    """
    data = event_bytes(event)
    hexdigest = hashlib.sha256(data).hexdigest()
    return LINE_PREFIX + hexdigest.encode() + EVENT_INFIX + data + b"}\n", hexdigest


class TraceWriter:
    """Appends events to a sink: numbers them, chains them, grows the Merkle tree, syncs."""

    def __init__(self, sink: TraceSink, *, fsync: FsyncPolicy = "step") -> None:
        """Start an empty trace.

        Args:
            sink: Where lines go.
            fsync: When lines are made durable (see `FsyncPolicy`).
        """
        self.sink = sink
        self.fsync: FsyncPolicy = fsync
        self._tree = MerkleTree()
        self._head = GENESIS

    @property
    def size(self) -> int:
        """Events written."""
        return self._tree.size

    @property
    def head(self) -> str:
        """Hex digest of the last event (`GENESIS` when empty)."""
        return self._head

    def append(self, at: datetime, body: EventBody) -> TraceEvent:
        """Write one event.

        Args:
            at: The clock reading for the event (from the `Clock` port).
            body: What happened.

        Returns:
            The event as written.
        """
        event = TraceEvent(seq=self._tree.size, prev=self._head, at=at, body=body)
        line, hexdigest = encode_line(event)
        self.sink.write(line)
        self._tree.append_hash(leaf_hash(bytes.fromhex(hexdigest)))
        self._head = hexdigest
        if self.fsync == "event":
            self.sink.flush(durable=True)
        return event

    def end_step(self) -> None:
        """Mark a step boundary: flush, and sync under the ``step`` policy."""
        if self.fsync == "step":
            self.sink.flush(durable=True)
        elif self.fsync == "none":
            self.sink.flush(durable=False)

    def checkpoint(self, key: bytes | None = None) -> Checkpoint:
        """The current head, signed with HMAC-SHA256 when ``key`` is given.

        Args:
            key: Optional signing key.

        Returns:
            The checkpoint.
        """
        checkpoint = Checkpoint(size=self._tree.size, root=self._tree.root().hex(), head=self._head)
        return checkpoint if key is None else sign_checkpoint(checkpoint, key)

    def close(self) -> None:
        """Close the sink."""
        self.sink.close()
