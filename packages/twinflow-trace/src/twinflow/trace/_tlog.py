"""Proof files a stranger checks offline: C2SP tlog-proof, and the consistency proof beside it.

An inclusion proof is a C2SP tlog-proof (https://c2sp.org/tlog-proof, file extension
``.tlog-proof``)::

    c2sp.org/tlog-proof@v1
    extra 3q2+7w...=          base64 of the event's 32-byte digest (unauthenticated: a hint)
    index 3                   the event's seq (its leaf index), decimal, no leading zeros
    gSKyXoYZ...=              the RFC 6962 audit path, one base64 SHA-256 hash a line,
    B95lDa8R...=              from the leaf's sibling up to the root's child
                              (blank line)
    example.org/lab           the checkpoint note, verbatim: signed (signature lines after
    6                         its own blank line), or the body alone (an unsigned checkpoint)
    sFodV/vS...=

A consistency proof is the body of a C2SP tlog-witness ``add-checkpoint`` request
(https://c2sp.org/tlog-witness; file extension ``.tlog-consistency``), so a witness reads it as
it is::

    old 4                     the earlier tree size, decimal, no leading zeros
    PlRNCrwH...=              RFC 6962 2.1.2 consistency proof, at most 63 base64 hashes
                              (blank line)
    example.org/lab           the later checkpoint note, verbatim
    6
    ...

The Merkle leaf of event ``i`` is its 32-byte digest, so its leaf hash is
``sha256(0x00 || digest)`` (Go's ``tlog.RecordHash(digest)``). Every line ends in ``\\n``; a
carriage return, a missing final newline, an empty or non-canonical base64 line, a hash that is
not 32 bytes, more than 63 hashes, an index with a leading zero and a file over
`MAX_PROOF_BYTES` are each refused with one `TraceFormatError`. A proof that does not lead to
the checkpoint's root (an index past the size, a proof for another tree of the same size) is
`InvalidProofError`; a checkpoint whose signatures do not verify is `SignatureError`
(docs/adr/0111-proofs-are-c2sp-text.md).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass

from twinflow._base._open import read_regular
from twinflow.trace._errors import InvalidProofError, TraceFormatError
from twinflow.trace._format import DEFAULT_MAX_LINE_BYTES, Limits
from twinflow.trace._merkle import leaf_hash, root_from_inclusion_proof, verify_consistency
from twinflow.trace._note import DEFAULT_MAX_NOTE_BYTES, _b64decode, _b64encode
from twinflow.trace._published import (
    PublishedCheckpoint,
    read_published_checkpoint,
    unverified_checkpoint_body,
)
from twinflow.trace._verify import Source, prove_consistency, prove_inclusion

__all__ = [
    "MAX_PROOF_BYTES",
    "MAX_PROOF_HASHES",
    "TLOG_PROOF_HEADER",
    "ProofCheck",
    "TlogConsistency",
    "TlogProof",
    "check_proof_file",
    "check_tlog_consistency",
    "check_tlog_proof",
    "event_file_digest",
    "parse_tlog_consistency",
    "parse_tlog_proof",
    "prove_tlog_consistency",
    "prove_tlog_inclusion",
]

TLOG_PROOF_HEADER = "c2sp.org/tlog-proof@v1"
"""The first line of every tlog-proof."""
MAX_PROOF_HASHES = 63
"""Most hash lines in either proof: a tree of at most 2**63 - 1 leaves needs no more."""
MAX_PROOF_BYTES = DEFAULT_MAX_NOTE_BYTES + 8 * 1024
"""Largest proof file read: a checkpoint note at its limit, 63 hash lines and an extra line."""
_MAX_EXTRA_BYTES = 2048
_MAX_SIZE = 2**63 - 1
_HASH_SIZE = 32


def _unb64(text: str, what: str) -> bytes:
    """Canonical standard base64 (`_note`'s one reading), not empty, else refused."""
    raw = _b64decode(text) if text else None
    if raw is None:
        raise TraceFormatError(f"{what} is not canonical standard base64")
    return raw


def _decimal(text: str, what: str) -> int:
    if (
        not text
        or len(text) > len(str(_MAX_SIZE))
        or not text.isascii()
        or not text.isdigit()
        or (text[0] == "0" and text != "0")
        or int(text) > _MAX_SIZE
    ):
        raise TraceFormatError(
            f"{what} {text[:30]!r} is not a decimal number without leading zeros"
        )
    return int(text)


def _text(data: bytes, where: str) -> str:
    if len(data) > MAX_PROOF_BYTES:
        raise TraceFormatError(
            f"{where}: {len(data)} bytes; a proof file is at most {MAX_PROOF_BYTES}"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise TraceFormatError(f"{where}: not UTF-8 text, so not a proof") from None
    if "\r" in text:
        raise TraceFormatError(f"{where}: holds a carriage return; every line ends in \\n alone")
    if not text.endswith("\n"):
        raise TraceFormatError(f"{where}: the last line has no newline (the file was cut short)")
    return text


def _split(text: str, where: str) -> tuple[list[str], bytes]:
    """The proof's own lines, and the checkpoint note after the first blank line."""
    head, blank, note = text.partition("\n\n")
    if not blank or not note:
        raise TraceFormatError(f"{where}: no blank line followed by the checkpoint note")
    return head.split("\n"), note.encode("utf-8")


def _hashes(lines: Sequence[str], where: str, first_line: int) -> tuple[bytes, ...]:
    if len(lines) > MAX_PROOF_HASHES:
        raise TraceFormatError(f"{where}: {len(lines)} hash lines, at most {MAX_PROOF_HASHES}")
    out = []
    for number, line in enumerate(lines, start=first_line):
        raw = _unb64(line, f"{where}: line {number}")
        if len(raw) != _HASH_SIZE:
            raise TraceFormatError(
                f"{where}: line {number} decodes to {len(raw)} bytes, a SHA-256 hash is 32"
            )
        out.append(raw)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class TlogProof:
    """A C2SP tlog-proof: an entry's index, its audit path and the checkpoint they lead to."""

    index: int
    """The entry's zero-based index in the log (an event's seq)."""
    hashes: tuple[bytes, ...]
    """The RFC 6962 audit path, from the leaf's sibling up to the root's child."""
    checkpoint: bytes
    """The checkpoint note, verbatim (signed, or the body alone)."""
    extra: bytes | None = None
    """Opaque, unauthenticated extra data (twinflow writes the event's 32-byte digest)."""

    def to_bytes(self) -> bytes:
        """The proof file's bytes."""
        lines = [TLOG_PROOF_HEADER]
        if self.extra is not None:
            lines.append(f"extra {_b64encode(self.extra)}")
        lines.append(f"index {self.index}")
        lines += [_b64encode(h) for h in self.hashes]
        return ("\n".join(lines) + "\n\n").encode("ascii") + self.checkpoint


@dataclass(frozen=True, slots=True)
class TlogConsistency:
    """A consistency proof from an earlier tree size to a checkpoint (tlog-witness's request)."""

    old_size: int
    """The earlier tree size."""
    hashes: tuple[bytes, ...]
    """The RFC 6962 consistency proof from ``old_size`` to the checkpoint's size."""
    checkpoint: bytes
    """The later checkpoint note, verbatim."""

    def to_bytes(self) -> bytes:
        """The proof file's bytes."""
        lines = [f"old {self.old_size}", *(_b64encode(h) for h in self.hashes)]
        return ("\n".join(lines) + "\n\n").encode("ascii") + self.checkpoint


def parse_tlog_proof(data: bytes, *, where: str = "tlog-proof") -> TlogProof:
    """Read a tlog-proof file (nothing is checked but its form).

    Raises:
        TraceFormatError: The bytes are not a tlog-proof; the message names the line.
    """
    lines, note = _split(_text(data, where), where)
    if lines[0] != TLOG_PROOF_HEADER:
        raise TraceFormatError(f"{where}: line 1 is not {TLOG_PROOF_HEADER!r}: not a tlog-proof")
    rest, number, extra = lines[1:], 2, None
    if rest and rest[0].startswith("extra "):
        extra = _unb64(rest[0][len("extra ") :], f"{where}: the extra line")
        if len(extra) > _MAX_EXTRA_BYTES:
            raise TraceFormatError(f"{where}: the extra line is over {_MAX_EXTRA_BYTES} bytes")
        rest, number = rest[1:], 3
    if not rest or not rest[0].startswith("index "):
        raise TraceFormatError(f"{where}: line {number} is not 'index N'")
    index = _decimal(rest[0][len("index ") :], f"{where}: the index")
    return TlogProof(index, _hashes(rest[1:], where, number + 1), note, extra)


def parse_tlog_consistency(data: bytes, *, where: str = "consistency proof") -> TlogConsistency:
    """Read a consistency proof file (nothing is checked but its form).

    Raises:
        TraceFormatError: The bytes are not a consistency proof; the message names the line.
    """
    lines, note = _split(_text(data, where), where)
    if not lines[0].startswith("old "):
        raise TraceFormatError(f"{where}: line 1 is not 'old N': not a consistency proof")
    old_size = _decimal(lines[0][len("old ") :], f"{where}: the old size")
    return TlogConsistency(old_size, _hashes(lines[1:], where, 2), note)


def _matches(body_root: bytes, root_hex: str, size: int, where: str) -> None:
    if body_root.hex() != root_hex:
        raise InvalidProofError(
            f"{where} is not a checkpoint of this trace: its root (hex) {body_root.hex()} at "
            f"size {size}, the trace's first {size} events have root (hex) {root_hex}"
        )


def prove_tlog_inclusion(
    source: Source,
    seq: int,
    checkpoint: bytes,
    *,
    where: str = "checkpoint",
    limits: Limits | None = None,
) -> TlogProof:
    """Prove event ``seq`` is in the trace at the size of ``checkpoint`` (a note, kept verbatim).

    Args:
        source: A trace file path, or the trace's bytes.
        seq: The event's sequence number.
        checkpoint: The checkpoint note the proof is for (signed or not; its signatures are
            the reader's to check, so they are not checked here).
        where: The checkpoint's file name, for messages.
        limits: Line-size and nesting limits.

    Returns:
        The tlog-proof, its ``extra`` the event's digest.

    Raises:
        UserError: ``checkpoint`` is not a checkpoint note, or ``seq`` is outside its size.
        TraceCorruptError: The trace does not verify.
        InvalidProofError: The checkpoint's root is not the trace's at that size.
    """
    body = unverified_checkpoint_body(checkpoint, where=where)
    proof, at = prove_inclusion(source, seq, body.size, limits=limits)
    _matches(body.root_hash, at.root, body.size, where)
    hashes = tuple(bytes.fromhex(h) for h in proof.path)
    digest = bytes.fromhex(proof.event_digest)
    # A proof this process cannot check is a bug to report, not a file to hand out.
    root = root_from_inclusion_proof(leaf_hash(digest), seq, body.size, hashes)
    _matches(body.root_hash, root.hex(), body.size, "the proof just made")
    return TlogProof(seq, hashes, checkpoint, digest)


def prove_tlog_consistency(
    source: Source,
    old_size: int,
    checkpoint: bytes,
    *,
    where: str = "checkpoint",
    limits: Limits | None = None,
) -> TlogConsistency:
    """Prove the trace at the size of ``checkpoint`` (a note, kept verbatim) extends its first
    ``old_size`` events.

    Raises:
        UserError: ``checkpoint`` is not a checkpoint note, or ``old_size`` is above its size.
        TraceCorruptError: The trace does not verify.
        InvalidProofError: The checkpoint's root is not the trace's at that size.
    """
    body = unverified_checkpoint_body(checkpoint, where=where)
    proof, old, new = prove_consistency(source, old_size, body.size, limits=limits)
    _matches(body.root_hash, new.root, body.size, where)
    hashes = tuple(bytes.fromhex(h) for h in proof.path)
    # A proof this process cannot check is a bug to report, not a file to hand out.
    verify_consistency(old_size, body.size, hashes, bytes.fromhex(old.root), body.root_hash)
    return TlogConsistency(old_size, hashes, checkpoint)


def check_tlog_proof(
    proof: TlogProof,
    digest: bytes,
    keys: Sequence[bytes],
    *,
    where: str,
    origin: str | None = None,
) -> PublishedCheckpoint:
    """Check that the event with ``digest`` is entry ``proof.index`` of the proof's checkpoint.

    Args:
        proof: The parsed proof.
        digest: The event's 32-byte digest (its Merkle leaf input).
        keys: The verifier keys that must have signed the checkpoint (none: it must be unsigned).
        where: The proof file's name, for messages.
        origin: The log the checkpoint must be for (default: the first key's name).

    Returns:
        The checkpoint, its signers checked.

    Raises:
        UserError: The checkpoint is not a checkpoint note, or keys do not fit it.
        SignatureError: A signature does not verify, or a key did not sign.
        InvalidProofError: The path does not lead from the digest to the checkpoint's root.
    """
    published = read_published_checkpoint(
        proof.checkpoint, keys, where=f"{where} (its checkpoint)", origin=origin
    )
    if len(digest) != _HASH_SIZE:
        raise InvalidProofError(f"an event digest is 32 bytes, not {len(digest)}")
    size = published.checkpoint.size
    root = root_from_inclusion_proof(leaf_hash(digest), proof.index, size, proof.hashes)
    if root.hex() != published.checkpoint.root:
        raise InvalidProofError(
            f"the path from event {proof.index} (digest (hex) {digest.hex()}) leads to root "
            f"(hex) {root.hex()}, not the checkpoint's {published.checkpoint.root}: another "
            "event, or another tree of the same size"
        )
    return published


def check_tlog_consistency(
    proof: TlogConsistency,
    old: PublishedCheckpoint,
    keys: Sequence[bytes],
    *,
    where: str,
    origin: str | None = None,
) -> PublishedCheckpoint:
    """Check that the proof's checkpoint extends ``old`` (the earlier checkpoint, already read).

    Args:
        proof: The parsed proof.
        old: The earlier checkpoint (`read_published_checkpoint` of its note).
        keys: The verifier keys that must have signed the proof's checkpoint.
        where: The proof file's name, for messages.
        origin: The log the checkpoint must be for (default: the first key's name).

    Returns:
        The later checkpoint, its signers checked.

    Raises:
        UserError, SignatureError: As `check_tlog_proof`.
        InvalidProofError: The sizes do not match, the logs differ, or the proof fails.
    """
    new = read_published_checkpoint(
        proof.checkpoint, keys, where=f"{where} (its checkpoint)", origin=origin
    )
    if old.origin != new.origin:
        raise InvalidProofError(
            f"the checkpoints are of two logs ({old.origin!r:.100} and {new.origin!r:.100})"
        )
    if proof.old_size != old.checkpoint.size:
        raise InvalidProofError(
            f"the proof starts at size {proof.old_size}, the old checkpoint is of size "
            f"{old.checkpoint.size}"
        )
    verify_consistency(
        proof.old_size,
        new.checkpoint.size,
        proof.hashes,
        bytes.fromhex(old.checkpoint.root),
        bytes.fromhex(new.checkpoint.root),
    )
    return new


def event_file_digest(path: str | os.PathLike[str]) -> bytes:
    """The digest of an event's file: the sha256 of its bytes as they are (the event's canonical
    JSON, as ``twinflow prove --event-out`` writes it).

    Raises:
        TraceFormatError: The file is larger than any event (a trace line's limit).
        OSError: The file cannot be read, or is not a regular file.
    """
    data = read_regular(path, DEFAULT_MAX_LINE_BYTES)
    if len(data) > DEFAULT_MAX_LINE_BYTES:
        raise TraceFormatError(
            f"{path}: larger than {DEFAULT_MAX_LINE_BYTES} bytes, so not an event's file"
        )
    return hashlib.sha256(data).digest()


@dataclass(frozen=True, slots=True)
class ProofCheck:
    """What a proof file showed, once checked (`check_proof_file`)."""

    kind: str
    """``inclusion`` (a tlog-proof) or ``consistency``."""
    checkpoint: PublishedCheckpoint
    """The checkpoint the proof leads to (the later one, for consistency)."""
    index: int | None = None
    """The event's seq (inclusion)."""
    digest: str | None = None
    """The event's hex digest that was checked (inclusion)."""
    digest_from: str | None = None
    """Where that digest came from: ``given``, or ``the proof's extra line``."""
    old: PublishedCheckpoint | None = None
    """The earlier checkpoint (consistency)."""

    def summary(self) -> str:
        """One line saying what was shown, with the roots labelled (hex) and who signed."""
        cp = self.checkpoint
        signed = f"signed by {', '.join(cp.signed_by)}" if cp.signed_by else "UNSIGNED"
        log = f"log {cp.origin!r}" if cp.origin else "the log"
        if self.kind == "inclusion":
            source = "" if self.digest_from == "given" else f", {self.digest_from}"
            return (
                f"ok: event {self.index} (digest (hex) {self.digest}{source}) is in {log} "
                f"at size {cp.checkpoint.size}, root (hex) {cp.checkpoint.root} ({signed})"
            )
        assert self.old is not None
        return (
            f"ok: {log} at size {cp.checkpoint.size}, root (hex) {cp.checkpoint.root} "
            f"({signed}), extends size {self.old.checkpoint.size}, root (hex) "
            f"{self.old.checkpoint.root}"
        )


def check_proof_file(
    data: bytes,
    keys: Sequence[bytes],
    *,
    where: str,
    origin: str | None = None,
    digest: bytes | None = None,
    old_checkpoint: bytes | None = None,
    old_where: str = "old checkpoint",
) -> ProofCheck:
    """Check a proof file of either kind: the one checker `twinflow prove --check` and the
    stdlib leaf's ``prove-check`` share.

    Args:
        data: The proof file's bytes (a tlog-proof, or a consistency proof).
        keys: The verifier keys that must have signed the checkpoint(s) (none: unsigned).
        where: The proof file's name, for messages.
        origin: The log the checkpoint must be for (default: the first key's name).
        digest: The event's 32-byte digest (inclusion; default: the proof's extra line, which
            the check itself authenticates).
        old_checkpoint: The earlier checkpoint note's bytes (consistency; required there).
        old_where: Its file's name, for messages.

    Returns:
        What the proof showed.

    Raises:
        TraceFormatError: Not a proof file, or what it needs is missing (exit 2).
        UserError: A checkpoint is not a checkpoint note, or keys do not fit it (exit 2).
        SignatureError: A signature does not verify, or a key did not sign (exit 1).
        InvalidProofError: The proof does not hold (exit 1).
    """
    if data.startswith(TLOG_PROOF_HEADER.encode() + b"\n"):
        if old_checkpoint is not None:
            raise TraceFormatError(f"{where}: an inclusion proof takes no old checkpoint")
        proof = parse_tlog_proof(data, where=where)
        given = digest is not None
        if digest is None:
            if proof.extra is None or len(proof.extra) != _HASH_SIZE:
                raise TraceFormatError(
                    f"{where}: the proof names no event digest; give the event's digest or file"
                )
            digest = proof.extra
        published = check_tlog_proof(proof, digest, keys, where=where, origin=origin)
        return ProofCheck(
            "inclusion",
            published,
            index=proof.index,
            digest=digest.hex(),
            digest_from="given" if given else "from the proof's extra line",
        )
    if data.startswith(b"old "):
        if digest is not None:
            raise TraceFormatError(f"{where}: a consistency proof takes no event digest")
        if old_checkpoint is None:
            raise TraceFormatError(
                f"{where}: a consistency proof is checked against the earlier checkpoint too"
            )
        consistency = parse_tlog_consistency(data, where=where)
        old = read_published_checkpoint(old_checkpoint, keys, where=old_where, origin=origin)
        new = check_tlog_consistency(consistency, old, keys, where=where, origin=origin)
        return ProofCheck("consistency", new, old=old)
    raise TraceFormatError(
        f"{where}: not a proof file (a tlog-proof starts {TLOG_PROOF_HEADER!r}, a consistency "
        "proof 'old N')"
    )
