"""C2SP signed notes with Ed25519 keys, and tlog-checkpoint bodies: the public-key checkpoint.

A signed checkpoint is a C2SP signed note (https://c2sp.org/signed-note) whose text is a C2SP
tlog-checkpoint body (https://c2sp.org/tlog-checkpoint)::

    example.com/run/42                       origin
    1024                                     tree size (decimal, no leading zeros)
    CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=    base64 RFC 9162 Merkle root
                                             (optional non-empty extension lines)
    <blank line>
    — example.com/run/42 Az3grlgt...          one line per signature: key name, base64(hint || sig)

Keys use the text forms of ``golang.org/x/mod/sumdb/note``: a verifier key is
``<name>+<hash>+base64(0x01 || 32-byte public key)`` and a signer key is
``PRIVATE+KEY+<name>+<hash>+base64(0x01 || 32-byte seed)``, where ``<hash>`` is eight lowercase
hex digits of ``SHA-256(name || "\\n" || 0x01 || public key)[:4]`` (the key hint every signature
line starts with). Go's reference reads every key and note this module writes and the other way
round (``packages/twinflow-cli/tests/test_go_interop.py``).

Verification runs on the standard library alone (``twinflow.trace._ed25519``); signing, signer-key
parsing and key derivation need the ``cryptography`` library (``twinflow-trace[signatures]``) and
raise `SignatureError` (``signing_unavailable``) naming that extra without it (docs/adr/0006).

Every reader is strict and bounded: a note larger than ``max_bytes`` or with more than
``max_signatures`` signature lines is refused before any signature is checked, base64 must be
the canonical standard encoding, and every malformed input raises exactly one error with a
``problem`` code naming what was wrong. Every refusal is one `SignatureError` whose ``reason``
says what was refused: ``malformed_note``, ``malformed_key``, ``malformed_checkpoint`` (with the
``problem`` code), ``ambiguous_key``, ``invalid_signature``, ``unverified``,
``origin_mismatch`` or ``signing_unavailable`` (the signatures extra is not installed).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

from twinflow.trace._errors import SignatureError
from twinflow.trace._keys import (
    SignerKey,
    VerifierKey,
    _b64decode,
    _b64encode,
    _valid_name,
    _Value,
)

if TYPE_CHECKING:
    pass


DEFAULT_MAX_NOTE_BYTES = 64 * 1024
"""Largest note read by default: a checkpoint with 100 signatures is under 12 KiB."""
DEFAULT_MAX_SIGNATURES = 100
"""Most signature lines read by default (Go's limit; C2SP requires accepting at least 16)."""
_SIG_PREFIX = "— "
_MAX_TREE_SIZE = 2**63 - 1
_HASH_SIZE = 32
_HEX = frozenset("0123456789abcdef")
_DIGITS = frozenset("0123456789")


NoteProblem = Literal[
    "too-large",
    "not-utf8",
    "control-character",
    "no-signature-block",
    "no-final-newline",
    "bad-signature-line",
    "bad-key-name",
    "bad-base64",
    "short-signature",
    "too-many-signatures",
    "bad-text",
]
CheckpointProblem = Literal[
    "no-final-newline",
    "too-few-lines",
    "bad-line",
    "empty-origin",
    "bad-size",
    "bad-root-hash",
    "empty-extension",
]


def malformed_note(problem: NoteProblem, detail: str) -> SignatureError:
    """The bytes are not a well-formed signed note (nothing was verified)."""
    return SignatureError(
        f"malformed signed note ({problem}): {detail}", reason="malformed_note", problem=problem
    )


def malformed_checkpoint(problem: CheckpointProblem, detail: str) -> SignatureError:
    """A note text is not a C2SP tlog-checkpoint body."""
    return SignatureError(
        f"malformed checkpoint ({problem}): {detail}",
        reason="malformed_checkpoint",
        problem=problem,
    )


def _invalid_signature(key: VerifierKey) -> SignatureError:
    return SignatureError(
        f"the signature by key {key.name}+{key.key_hash:08x} does not verify: the note "
        "text was altered after signing, or the signature line was forged",
        reason="invalid_signature",
    )


def _unverified(note: Note, verified_by: int, required: int) -> SignatureError:
    # The names come from the note, so they are quoted (no terminal escapes) and capped.
    found = sorted({repr(f"{s.name}+{s.key_hash:08x}") for s in note.signatures})
    names = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    return SignatureError(
        f"the note is signed by {verified_by} known key(s), {required} required "
        f"(signature lines found: {names}); pass the verifier key of its signer",
        reason="unverified",
    )


class NoteSignature(_Value):
    """One signature line of a note, verified or not."""

    __slots__ = ("key_hash", "name", "signature")

    def __init__(self, name: str, key_hash: int, signature: bytes) -> None:
        """Hold the fields as given."""
        self._set(name=name, key_hash=key_hash, signature=signature)

    name: str
    """The key name on the line."""
    key_hash: int
    """The 32-bit key hint (the first four signature bytes)."""
    signature: bytes
    """The signature bytes after the hint."""

    @property
    def line(self) -> str:
        """The signature line, without its newline."""
        data = _b64encode(self.key_hash.to_bytes(4, "big") + self.signature)
        return f"{_SIG_PREFIX}{self.name} {data}"


class Note(_Value):
    """A parsed signed note. Its text must not be trusted before `open_note` verifies it."""

    __slots__ = ("signatures", "text")

    def __init__(self, text: str, signatures: tuple[NoteSignature, ...]) -> None:
        """Hold the fields as given."""
        self._set(text=text, signatures=signatures)

    text: str
    """The note text, ending in a newline (the blank separator line excluded)."""
    signatures: tuple[NoteSignature, ...]
    """The signature lines, in order, exact duplicates dropped."""


class VerifiedNote(_Value):
    """A note whose signatures by every known key verified."""

    __slots__ = ("text", "unverified", "verified_by")

    def __init__(
        self,
        text: str,
        verified_by: tuple[VerifierKey, ...],
        unverified: tuple[NoteSignature, ...],
    ) -> None:
        """Hold the fields as given."""
        self._set(text=text, verified_by=verified_by, unverified=unverified)

    text: str
    """The note text, now trusted as far as its signers are."""
    verified_by: tuple[VerifierKey, ...]
    """The known keys that signed, in the order their lines appear."""
    unverified: tuple[NoteSignature, ...]
    """Signatures by keys the caller does not know (ignored, as the spec requires)."""


def _check_text(text: str, *, max_bytes: int) -> bytes:
    """Encode a note text to sign, refusing what no reader could open."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise malformed_note("not-utf8", f"character {error.start} is a lone surrogate") from None
    if len(data) > max_bytes:
        raise malformed_note("too-large", f"the text is {len(data)} bytes, over {max_bytes}")
    if not text.endswith("\n"):
        raise malformed_note("no-final-newline", "a note text ends with a newline")
    _check_controls(text)
    return data


def _check_controls(text: str) -> None:
    for index, char in enumerate(text):
        if char < " " and char != "\n":
            raise malformed_note(
                "control-character",
                f"character {index} is control character {ord(char):#04x}; only newline is allowed",
            )


def parse_note(
    data: bytes,
    *,
    max_bytes: int = DEFAULT_MAX_NOTE_BYTES,
    max_signatures: int = DEFAULT_MAX_SIGNATURES,
) -> Note:
    """Split a signed note into its text and signature lines, checking nothing cryptographic.

    Args:
        data: The note bytes.
        max_bytes: Largest note accepted.
        max_signatures: Most signature lines accepted.

    Returns:
        The parsed note.

    Raises:
        SignatureError (``malformed_note``): The bytes are not a signed note; ``problem`` says why.
    """
    if len(data) > max_bytes:
        raise malformed_note(
            "too-large", f"the note is {len(data)} bytes, over the limit of {max_bytes}"
        )
    try:
        message = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise malformed_note("not-utf8", f"byte {error.start} is not UTF-8") from None
    _check_controls(message)
    split = message.rfind("\n\n")
    if split < 0:
        raise malformed_note(
            "no-signature-block", "no blank line separates the text from signature lines"
        )
    text, block = message[: split + 1], message[split + 2 :]
    if not block:
        raise malformed_note("no-signature-block", "the note has no signature lines")
    if not block.endswith("\n"):
        raise malformed_note("no-final-newline", "the last signature line has no newline")
    lines = block[:-1].split("\n")
    if len(lines) > max_signatures:
        raise malformed_note(
            "too-many-signatures",
            f"{len(lines)} signature lines, over the limit of {max_signatures}",
        )
    signatures: dict[str, NoteSignature] = {}
    for number, line in enumerate(lines, start=1):
        signatures.setdefault(line, _signature_line(number, line))
    return Note(text, tuple(signatures.values()))


def _signature_line(number: int, line: str) -> NoteSignature:
    """Signature line ``number``: ``— <name> base64(key hash || signature)``."""
    if not line.startswith(_SIG_PREFIX):
        raise malformed_note(
            "bad-signature-line", f"signature line {number} does not start with '— '"
        )
    name, space, encoded = line[len(_SIG_PREFIX) :].partition(" ")
    if not space or not _valid_name(name):
        raise malformed_note("bad-key-name", f"signature line {number}: {name!r} is not a key name")
    raw = _b64decode(encoded)
    if raw is None:
        raise malformed_note(
            "bad-base64", f"signature line {number}: not canonical standard base64"
        )
    if len(raw) < 5:
        raise malformed_note(
            "short-signature", f"signature line {number}: {len(raw)} bytes, under 5"
        )
    return NoteSignature(name, int.from_bytes(raw[:4], "big"), raw[4:])


def _keyring(keys: Iterable[VerifierKey]) -> dict[tuple[str, int], VerifierKey]:
    ring: dict[tuple[str, int], VerifierKey] = {}
    by_key: dict[bytes, VerifierKey] = {}
    for key in keys:
        known = ring.setdefault((key.name, key.key_hash), key)
        if known != key:
            raise SignatureError(
                f"two different known keys are named {key.name}+{key.key_hash:08x}: "
                "a signature could match either; keep one",
                reason="ambiguous_key",
            )
        # ``required`` counts signers: one key under two names must not count twice.
        same = by_key.setdefault(key.public_key, key)
        if same != key:
            raise SignatureError(
                f"known keys {same.name}+{same.key_hash:08x} and {key.name}+{key.key_hash:08x} "
                "are one public key under two names: signatures are counted by key; keep one",
                reason="ambiguous_key",
            )
    return ring


def open_note(
    data: bytes,
    keys: Iterable[VerifierKey],
    *,
    required: int = 1,
    max_bytes: int = DEFAULT_MAX_NOTE_BYTES,
    max_signatures: int = DEFAULT_MAX_SIGNATURES,
) -> VerifiedNote:
    """Parse a signed note and verify it against the known verifier keys.

    A signature whose name and hash match no known key is ignored (C2SP: unknown keys may be
    other cosigners or a rotated key). A signature that matches a known key must verify, or
    the whole note is refused. At least ``required`` distinct known keys must have signed.

    Args:
        data: The note bytes.
        keys: The verifier keys the caller trusts (a log key and cosigners, say).
        required: How many distinct known keys must have signed (at least 1).
        max_bytes: Largest note accepted.
        max_signatures: Most signature lines accepted.

    Returns:
        The verified note, naming the known keys that signed.

    Raises:
        SignatureError (``malformed_note``): The bytes are not a signed note.
        SignatureError (``ambiguous_key``): Two different known keys share a name and hash, or
            two names share one public key.
        SignatureError (``invalid_signature``): A known key's signature does not verify.
        SignatureError (``unverified``): Fewer than ``required`` known keys signed.
        ValueError: ``required`` is below 1.
    """
    if required < 1:
        raise ValueError(f"required must be at least 1, not {required}")
    ring = _keyring(keys)
    note = parse_note(data, max_bytes=max_bytes, max_signatures=max_signatures)
    message = note.text.encode("utf-8")
    verified: dict[tuple[str, int], VerifierKey] = {}
    unverified: list[NoteSignature] = []
    for signature in note.signatures:
        key = ring.get((signature.name, signature.key_hash))
        if key is None:
            unverified.append(signature)
        elif key.verify(message, signature.signature):
            verified[(key.name, key.key_hash)] = key
        else:
            raise _invalid_signature(key)
    if len(verified) < required:
        raise _unverified(note, len(verified), required)
    return VerifiedNote(note.text, tuple(verified.values()), tuple(unverified))


def sign_note(
    note: str | Note, signers: Sequence[SignerKey], *, max_bytes: int = DEFAULT_MAX_NOTE_BYTES
) -> bytes:
    """Sign a note text, or add signatures to an existing note (cosigning), as Go's ``Sign``.

    Existing signatures come first, except those by a key among ``signers`` (that signature
    is replaced); the new signatures follow in the order given.

    Args:
        note: A note text ending in a newline, or a parsed `Note` to cosign.
        signers: The signer keys (at least one).
        max_bytes: Largest note produced (the readers' default limit).

    Returns:
        The signed note bytes.

    Raises:
        SignatureError (``malformed_note``): The text cannot be a note text, or the result exceeds ``max_bytes``.
        SignatureError (``signing_unavailable``): The ``cryptography`` library is not installed.
        ValueError: No signer was given.
    """
    if not signers:
        raise ValueError("sign_note needs at least one signer key")
    existing = note.signatures if isinstance(note, Note) else ()
    text = note.text if isinstance(note, Note) else note
    message = _check_text(text, max_bytes=max_bytes)
    for name in [s.name for s in existing] + [s.name for s in signers]:
        if not _valid_name(name):
            raise malformed_note("bad-key-name", f"{name!r} cannot name a signature")
    replaced = {(s.name, s.key_hash) for s in signers}
    lines = [s.line for s in existing if (s.name, s.key_hash) not in replaced]
    lines += [NoteSignature(s.name, s.key_hash, s.sign(message)).line for s in signers]
    signed = (text + "\n" + "".join(line + "\n" for line in lines)).encode("utf-8")
    if len(signed) > max_bytes:
        raise malformed_note(
            "too-large", f"the signed note would be {len(signed)} bytes, over {max_bytes}"
        )
    return signed


class CheckpointBody(_Value):
    """A C2SP tlog-checkpoint note text: the log's origin, tree size and Merkle root hash."""

    __slots__ = ("extensions", "origin", "root_hash", "size")

    origin: str
    """The log's identity (C2SP recommends a schema-less URL; the signing key's name)."""
    size: int
    """Number of leaves (trace events) in the tree."""
    root_hash: bytes
    """The 32-byte RFC 9162 Merkle tree root at ``size``."""
    extensions: tuple[str, ...]
    """Optional opaque non-empty lines after the root hash."""

    def __init__(
        self, origin: str, size: int, root_hash: bytes, extensions: tuple[str, ...] = ()
    ) -> None:
        """Build a checkpoint body, refusing one that would not read back as itself.

        Raises:
            SignatureError (``malformed_checkpoint``): A field is invalid; ``problem`` says which.
        """
        self._set(origin=origin, size=size, root_hash=root_hash, extensions=tuple(extensions))
        if not self.origin:
            raise malformed_checkpoint("empty-origin", "the origin line is empty")
        if any(c < " " for c in self.origin):
            raise malformed_checkpoint(
                "bad-line", "the origin holds a control character or newline"
            )
        for number, line in enumerate(self.extensions, start=4):
            if not line:
                raise malformed_checkpoint("empty-extension", f"line {number} is empty")
            if any(c < " " for c in line):
                raise malformed_checkpoint(
                    "bad-line", f"line {number} holds a control character or newline"
                )
        if not 0 <= self.size <= _MAX_TREE_SIZE:
            raise malformed_checkpoint("bad-size", f"tree size {self.size} is out of range")
        if len(self.root_hash) != _HASH_SIZE:
            raise malformed_checkpoint(
                "bad-root-hash", f"the root hash is {len(self.root_hash)} bytes, not 32"
            )

    @property
    def text(self) -> str:
        """The note text: one line each for origin, size, base64 root hash and extensions."""
        root = _b64encode(self.root_hash)
        return "".join(
            f"{line}\n" for line in (self.origin, str(self.size), root, *self.extensions)
        )


def parse_checkpoint_body(text: str) -> CheckpointBody:
    """Read a tlog-checkpoint note text (call it on verified text only).

    Args:
        text: The note text.

    Returns:
        The checkpoint body.

    Raises:
        SignatureError (``malformed_checkpoint``): The text is not a checkpoint body; ``problem`` says why.
    """
    if not text.endswith("\n"):
        raise malformed_checkpoint("no-final-newline", "a checkpoint text ends with a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise malformed_checkpoint(
            "too-few-lines", f"{len(lines)} line(s); origin, size and root hash are required"
        )
    origin, size_text, root_text, *extensions = lines
    if (
        not size_text
        or len(size_text) > len(str(_MAX_TREE_SIZE))
        or not set(size_text) <= _DIGITS
        or (size_text.startswith("0") and size_text != "0")
    ):
        raise malformed_checkpoint(
            "bad-size",
            f"line 2 {size_text[:40]!r} is not a decimal tree size without leading zeros",
        )
    root = _b64decode(root_text)
    if root is None:
        raise malformed_checkpoint("bad-root-hash", "line 3 is not canonical standard base64")
    return CheckpointBody(origin, int(size_text), root, tuple(extensions))


class VerifiedCheckpoint(_Value):
    """A checkpoint whose note verified against the known keys."""

    __slots__ = ("body", "unverified", "verified_by")

    def __init__(
        self,
        body: CheckpointBody,
        verified_by: tuple[VerifierKey, ...],
        unverified: tuple[NoteSignature, ...],
    ) -> None:
        """Hold the fields as given."""
        self._set(body=body, verified_by=verified_by, unverified=unverified)

    body: CheckpointBody
    """The checkpoint."""
    verified_by: tuple[VerifierKey, ...]
    """The known keys that signed it."""
    unverified: tuple[NoteSignature, ...]
    """Signatures by unknown keys (ignored)."""


def sign_checkpoint_note(body: CheckpointBody, signers: Sequence[SignerKey]) -> bytes:
    """Return ``body`` as a signed note, signed by every key in ``signers``.

    Raises:
        SignatureError (``signing_unavailable``): The ``cryptography`` library is not installed.
    """
    return sign_note(body.text, signers)


def open_checkpoint(
    data: bytes,
    keys: Iterable[VerifierKey],
    *,
    origin: str | None = None,
    required: int = 1,
    max_bytes: int = DEFAULT_MAX_NOTE_BYTES,
    max_signatures: int = DEFAULT_MAX_SIGNATURES,
) -> VerifiedCheckpoint:
    """Verify a signed checkpoint note, then read its body.

    Args:
        data: The signed note bytes.
        keys: The trusted verifier keys.
        origin: The log the checkpoint must be for, if the caller knows it.
        required: How many distinct known keys must have signed.
        max_bytes: Largest note accepted.
        max_signatures: Most signature lines accepted.

    Returns:
        The checkpoint and the known keys that signed it.

    Raises:
        SignatureError: Any refusal `open_note` raises, `SignatureError` (``malformed_checkpoint``) for a body that
            is not a checkpoint, `SignatureError` (``origin_mismatch``) for another log's checkpoint.
    """
    note = open_note(
        data, keys, required=required, max_bytes=max_bytes, max_signatures=max_signatures
    )
    body = parse_checkpoint_body(note.text)
    if origin is not None and body.origin != origin:
        raise SignatureError(
            f"the checkpoint is for log {body.origin!r}, expected {origin!r}",
            reason="origin_mismatch",
        )
    return VerifiedCheckpoint(body, note.verified_by, note.unverified)
