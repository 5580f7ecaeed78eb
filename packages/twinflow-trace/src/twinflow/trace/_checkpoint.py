"""Checkpoints and proofs as values, their JSON files, HMAC signatures, proof checking.

A `Checkpoint` names a trace prefix by its size, its RFC 9162 Merkle root and the digest of its
last event. `Checkpoint.note_body` writes it as a C2SP tlog-checkpoint body (origin line, size,
base64 root hash, optional extension lines), the text a C2SP signed note signs. The HMAC
signature kept here is for one party checking its own runs (eval pipelines, CI) without key
infrastructure; a stranger cannot check it without being able to forge it (docs/adr).

Every reader here is strict: a file that is not exactly the documented shape raises
`TraceFormatError` naming what is wrong, never a bare `KeyError` or `ValueError`.
"""

from __future__ import annotations

import binascii
import dataclasses
import hashlib
import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from twinflow.trace._canonical import canonical_bytes, parse_json
from twinflow.trace._errors import (
    CanonicalError,
    InvalidProofError,
    SignatureError,
    TraceFormatError,
    UserError,
)
from twinflow.trace._merkle import leaf_hash, verify_consistency, verify_inclusion

__all__ = [
    "Checkpoint",
    "ConsistencyProof",
    "InclusionProof",
    "check_consistency",
    "check_inclusion",
    "load_proof",
    "sign_checkpoint",
    "verify_checkpoint_signature",
]

_SIGNING_DOMAIN = b"twinflow-checkpoint-v1\n"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_MAX_FILE = 1024 * 1024
_MAX_PATH = 64  # a proof over at most 2**64 leaves has at most 2*64 hashes; one list of them


def _hex64(value: object, what: str) -> str:
    if type(value) is not str or not _HEX64.fullmatch(value):
        raise TraceFormatError(f"{what} must be 64 lowercase hex digits, found {value!r:.80}")
    return value


def _count(value: object, what: str, minimum: int = 0) -> int:
    if type(value) is not int or value < minimum:
        raise TraceFormatError(f"{what} must be an integer >= {minimum}, found {value!r:.80}")
    return value


def _object(data: bytes | str, what: str, keys: set[str], optional: set[str]) -> dict[str, Any]:
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(raw) > _MAX_FILE:
        raise TraceFormatError(f"{what} is {len(raw)} bytes; the limit is {_MAX_FILE}")
    try:
        value = parse_json(raw, max_depth=4)
    except CanonicalError as exc:
        raise TraceFormatError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise TraceFormatError(f"{what} must be a JSON object")
    missing = keys - value.keys()
    extra = value.keys() - keys - optional
    if missing or extra:
        raise TraceFormatError(
            f"{what}: expected members {sorted(keys)}"
            + (f", missing {sorted(missing)}" if missing else "")
            + (f", unknown {sorted(extra)}" if extra else "")
        )
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
    signature: str | None = None
    """Hex HMAC-SHA256 over `signing_bytes`, if signed with a shared key."""

    def __post_init__(self) -> None:
        """Refuse a checkpoint that is not well formed."""
        _count(self.size, "checkpoint size")
        _hex64(self.root, "checkpoint root")
        _hex64(self.head, "checkpoint head")
        if self.signature is not None:
            _hex64(self.signature, "checkpoint signature")

    def signing_bytes(self) -> bytes:
        """The bytes an HMAC signature covers: a domain tag and the canonical unsigned fields."""
        return _SIGNING_DOMAIN + canonical_bytes(
            {"head": self.head, "root": self.root, "size": self.size}
        )

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
        """The checkpoint as a JSON object (the checkpoint file's form)."""
        out: dict[str, Any] = {"head": self.head, "root": self.root, "size": self.size}
        if self.signature is not None:
            out["signature"] = self.signature
        return out

    @classmethod
    def from_json(cls, data: bytes | str) -> Checkpoint:
        """Read a checkpoint file (as `to_json` writes it).

        Args:
            data: The file's bytes.

        Returns:
            The checkpoint.

        Raises:
            TraceFormatError: The bytes are not a checkpoint: what is wrong is named.
        """
        value = _object(data, "checkpoint", {"size", "root", "head"}, {"signature"})
        return cls(
            size=_count(value["size"], "checkpoint size"),
            root=_hex64(value["root"], "checkpoint root"),
            head=_hex64(value["head"], "checkpoint head"),
            signature=None
            if value.get("signature") is None
            else _hex64(value["signature"], "checkpoint signature"),
        )


def _key(key: bytes) -> bytes:
    if not isinstance(key, bytes) or not key:
        raise UserError(
            "the HMAC key is empty: an empty key signs nothing anyone could not forge; "
            "use at least 32 random bytes"
        )
    return key


def sign_checkpoint(checkpoint: Checkpoint, key: bytes) -> Checkpoint:
    """Return ``checkpoint`` signed with HMAC-SHA256 under ``key``.

    Args:
        checkpoint: The checkpoint (any existing signature is replaced).
        key: The secret key, used exactly as given (no stripping).

    Returns:
        The signed checkpoint.

    Raises:
        UserError: The key is empty.
    """
    mac = hmac.new(_key(key), checkpoint.signing_bytes(), hashlib.sha256).hexdigest()
    return dataclasses.replace(checkpoint, signature=mac)


def verify_checkpoint_signature(checkpoint: Checkpoint, key: bytes) -> None:
    """Check a checkpoint's HMAC-SHA256 signature.

    Args:
        checkpoint: The signed checkpoint.
        key: The secret key it was signed with, exactly as given.

    Raises:
        UserError: The key is empty.
        SignatureError: The checkpoint is unsigned or the signature does not match.
    """
    key = _key(key)
    if checkpoint.signature is None:
        raise SignatureError(f"checkpoint of size {checkpoint.size} is not signed")
    expected = hmac.new(key, checkpoint.signing_bytes(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, checkpoint.signature):
        raise SignatureError(
            f"checkpoint of size {checkpoint.size}: signature does not match the key "
            "(the checkpoint was altered or signed with another key)"
        )


def _path(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > 2 * _MAX_PATH:
        raise TraceFormatError(f"proof path must be a list of at most {2 * _MAX_PATH} hashes")
    return tuple(_hex64(p, f"path[{i}]") for i, p in enumerate(value))


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
        """The proof as a JSON object (the proof file's form)."""
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
        """The proof as a JSON object (the proof file's form)."""
        return {
            "kind": "consistency",
            "size1": self.size1,
            "size2": self.size2,
            "path": list(self.path),
        }


def load_proof(data: bytes | str) -> InclusionProof | ConsistencyProof:
    """Read a proof file (as ``to_json`` writes it).

    Args:
        data: The file's bytes.

    Returns:
        The proof.

    Raises:
        TraceFormatError: The bytes are not a proof: what is wrong is named.
    """
    value = _object(
        data, "proof", {"kind"}, {"seq", "size", "event_digest", "size1", "size2", "path"}
    )
    if value["kind"] == "inclusion":
        value = _object(
            data, "inclusion proof", {"kind", "seq", "size", "event_digest", "path"}, set()
        )
        return InclusionProof(
            seq=_count(value["seq"], "seq"),
            size=_count(value["size"], "size", 1),
            event_digest=_hex64(value["event_digest"], "event_digest"),
            path=_path(value["path"]),
        )
    if value["kind"] == "consistency":
        value = _object(data, "consistency proof", {"kind", "size1", "size2", "path"}, set())
        return ConsistencyProof(
            size1=_count(value["size1"], "size1"),
            size2=_count(value["size2"], "size2"),
            path=_path(value["path"]),
        )
    raise TraceFormatError(
        f"proof kind must be 'inclusion' or 'consistency', found {value['kind']!r:.80}"
    )


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
