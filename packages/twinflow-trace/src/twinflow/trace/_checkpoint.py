"""Checkpoints and proofs as values, and proof checking.

A `Checkpoint` names a trace prefix by its size, its RFC 9162 Merkle root and the digest of its
last event. `Checkpoint.note_body` writes it as a C2SP tlog-checkpoint body (origin line, size,
base64 root hash, optional extension lines), the text a C2SP signed note signs: the note is the
one checkpoint file (`twinflow.trace.read_published_checkpoint` reads it). The values'
``to_json`` forms are output views (``--json``), never files read back
(docs/adr/0110-one-checkpoint-file.md); proofs are written as C2SP text (`twinflow.trace._tlog`).
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from twinflow._base._errors import UserError
from twinflow.trace._errors import InvalidProofError, TraceFormatError
from twinflow.trace._merkle import leaf_hash, verify_consistency, verify_inclusion

__all__ = [
    "Checkpoint",
    "ConsistencyProof",
    "InclusionProof",
    "check_consistency",
    "check_inclusion",
]

_HEX64 = re.compile(r"[0-9a-f]{64}")


def _hex64(value: object, what: str) -> str:
    if type(value) is not str or not _HEX64.fullmatch(value):
        raise TraceFormatError(f"{what} must be 64 lowercase hex digits, found {value!r:.80}")
    return value


def _count(value: object, what: str, minimum: int = 0) -> int:
    if type(value) is not int or value < minimum:
        raise TraceFormatError(f"{what} must be an integer >= {minimum}, found {value!r:.80}")
    return value


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The head of a trace: how many events, their Merkle root, the last event's digest."""

    size: int
    """Number of events covered."""
    root: str
    """Hex RFC 9162 Merkle root over the events' digests."""
    head: str
    """Hex digest of the last covered event (`GENESIS` for an empty trace)."""

    def __post_init__(self) -> None:
        """Refuse a checkpoint that is not well formed."""
        _count(self.size, "checkpoint size")
        _hex64(self.root, "checkpoint root")
        _hex64(self.head, "checkpoint head")

    def note_body(self, origin: str, extensions: Sequence[str] = ()) -> str:
        """The C2SP tlog-checkpoint body of this checkpoint (the text a signed note signs).

        Args:
            origin: The log's origin line (a schema-less URL-like name, e.g.
                ``example.org/lab/run-42``); it must be non-empty, printable and one line.
            extensions: Optional extension lines, each non-empty and one line.

        Returns:
            ``origin\\nsize\\nbase64(root)\\n`` followed by each extension and ``\\n``.

        Raises:
            UserError: The origin or an extension line is empty, holds a newline or is not
                printable.
        """
        for what, line in (("origin", origin), *(("extension line", e) for e in extensions)):
            if not line or not line.isprintable() or "\n" in line:
                raise UserError(f"{what} {line!r} must be one non-empty printable line")
        root = binascii.b2a_base64(bytes.fromhex(self.root), newline=False).decode("ascii")
        return "".join(f"{line}\n" for line in (origin, str(self.size), root, *extensions))

    def to_json(self) -> dict[str, Any]:
        """The checkpoint as a JSON object (an output view; roots and digests in hex)."""
        return {"head": self.head, "root": self.root, "size": self.size}


@dataclass(frozen=True, slots=True)
class InclusionProof:
    """Proof that one event is in the trace a checkpoint of ``size`` describes."""

    seq: int
    """The event's sequence number (its leaf index)."""
    size: int
    """Tree size the proof is for."""
    event_digest: str
    """Hex digest of the event."""
    path: tuple[str, ...]
    """Hex node hashes of the audit path."""

    def to_json(self) -> dict[str, Any]:
        """The proof as a JSON object (an output view; hashes in hex)."""
        return {
            "kind": "inclusion",
            "seq": self.seq,
            "size": self.size,
            "event_digest": self.event_digest,
            "path": list(self.path),
        }


@dataclass(frozen=True, slots=True)
class ConsistencyProof:
    """Proof that the trace of ``size2`` events extends the one of ``size1``."""

    size1: int
    """Earlier size."""
    size2: int
    """Later size."""
    path: tuple[str, ...]
    """Hex node hashes."""

    def to_json(self) -> dict[str, Any]:
        """The proof as a JSON object (an output view; hashes in hex)."""
        return {
            "kind": "consistency",
            "size1": self.size1,
            "size2": self.size2,
            "path": list(self.path),
        }


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
    _hex64(proof.event_digest, "event_digest")
    verify_inclusion(
        leaf_hash(bytes.fromhex(proof.event_digest)),
        proof.seq,
        proof.size,
        [bytes.fromhex(_hex64(p, f"path[{i}]")) for i, p in enumerate(proof.path)],
        bytes.fromhex(checkpoint.root),
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
        [bytes.fromhex(_hex64(p, f"path[{i}]")) for i, p in enumerate(proof.path)],
        bytes.fromhex(old.root),
        bytes.fromhex(new.root),
    )
