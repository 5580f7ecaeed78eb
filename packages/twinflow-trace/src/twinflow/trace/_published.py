"""Reading a published checkpoint file: the one reader `twinflow verify` and the stdlib leaf share.

The checkpoint file is a C2SP tlog-checkpoint note: signed (signature lines after a blank line,
checked against the verifier keys the reader gives, every one of which must have signed, for
the origin the reader expects) or unsigned (the same note body with no signature lines). It is
the one checkpoint file: the JSON a checkpoint was once written as (with an HMAC signature or
without) is refused with a line saying how to make the note (docs/adr/0110-one-checkpoint-file.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from twinflow._base._errors import UserError
from twinflow.trace import _note
from twinflow.trace._checkpoint import Checkpoint
from twinflow.trace._errors import SignatureError
from twinflow.trace._format import GENESIS

__all__ = [
    "REMAKE_CHECKPOINT",
    "PublishedCheckpoint",
    "read_published_checkpoint",
    "unverified_checkpoint_body",
]

REMAKE_CHECKPOINT = (
    "make the note with `twinflow checkpoint TRACE --size N --sign KEY --out cp.note` "
    "(or --origin ORIGIN for an unsigned one)"
)
"""How to make a checkpoint note, for messages refusing another form."""


@dataclass(frozen=True, slots=True)
class PublishedCheckpoint:
    """A checkpoint file, read and (if it is a signed note) its signatures checked."""

    checkpoint: Checkpoint
    """Size and hex root (a note carries no head digest: ``head`` is `GENESIS`, not compared)."""
    form: str
    """``signed note``, or ``note`` (unsigned)."""
    origin: str
    """The note's origin line."""
    signed_by: tuple[str, ...]
    """The verifier keys (``name+hash``) that signed it, in the order their lines appear."""


def read_published_checkpoint(
    data: bytes,
    keys: Sequence[bytes],
    *,
    where: str,
    origin: str | None = None,
) -> PublishedCheckpoint:
    """Read a checkpoint file and check its signatures.

    Args:
        data: The file's bytes (at most `_note.DEFAULT_MAX_NOTE_BYTES` for a note).
        keys: The text of each verifier key that must have signed (none: the file must be
            unsigned).
        where: The file's name, for messages.
        origin: The log the checkpoint must be for. With keys and no ``origin``, the first
            key's name is expected (what ``twinflow checkpoint --sign`` writes by default): a
            note the same key signed for another log is refused.

    Returns:
        The checkpoint, its form, origin and signers.

    Raises:
        UserError: The file is not a checkpoint note (a JSON checkpoint is refused, saying how
            to make the note), or none were given for a signed note (exit 2).
        SignatureError: A signature does not verify, a key did not sign, or the note is for
            another origin (exit 1).
    """
    if data.lstrip()[:1] == b"{":
        raise UserError(
            f"{where} is a JSON checkpoint, a form twinflow no longer reads (a checkpoint is a "
            f"C2SP note): {REMAKE_CHECKPOINT}"
        )
    if b"\r" in data:
        # Before telling signed from unsigned: a CRLF copy of a signed note has no "\n\n".
        raise UserError(f"{where}: not a checkpoint note (a carriage return; lines end in \\n)")
    signed = b"\n\n" in data
    if signed and not keys:
        raise UserError(
            f"{where} is a signed checkpoint: give the signer's verifier key with --key VKEY "
            "(a signature is never passed over unchecked)"
        )
    try:
        if not signed:
            if keys:
                raise SignatureError(
                    f"{where}: the checkpoint is not signed, and --key asks for a signature"
                )
            body = _note.parse_checkpoint_body(_text(data, where))
            if origin is not None and body.origin != origin:
                raise _note.OriginMismatchError(
                    f"the checkpoint is for log {body.origin!r}, expected {origin!r}"
                )
            signers: tuple[str, ...] = ()
        else:
            verifiers = [_note.parse_verifier_key(k) for k in keys]
            expected = origin if origin is not None else verifiers[0].name
            opened = _note.open_checkpoint(
                data, verifiers, origin=expected, required=len(verifiers)
            )
            body = opened.body
            signers = tuple(f"{k.name}+{k.key_hash:08x}" for k in opened.verified_by)
    except (_note.MalformedNoteError, _note.MalformedCheckpointError) as exc:
        raise UserError(f"{where}: not a checkpoint note ({_squash(exc)})") from None
    except _note.MalformedKeyError as exc:
        raise UserError(f"not a verifier key ({_squash(exc)})") from None
    except _note.NoteError as exc:
        raise SignatureError(f"{where}: the checkpoint does not verify: {_squash(exc)}") from None
    checkpoint = Checkpoint(size=body.size, root=body.root_hash.hex(), head=GENESIS)
    return PublishedCheckpoint(
        checkpoint, "signed note" if signed else "note", body.origin, signers
    )


def unverified_checkpoint_body(data: bytes, *, where: str) -> _note.CheckpointBody:
    """The body of a checkpoint note, its signatures NOT checked.

    For a publisher putting its own note into a proof it makes (the reader of the proof checks
    the signatures); never for deciding whether to trust a note.

    Raises:
        UserError: The bytes are not a checkpoint note (signed or not).
    """
    if data.lstrip()[:1] == b"{":
        raise UserError(f"{where} is a JSON checkpoint, not a C2SP note: {REMAKE_CHECKPOINT}")
    text = _text(data, where)
    try:
        if "\n\n" in text:
            text = _note.parse_note(data).text
        return _note.parse_checkpoint_body(text)
    except (_note.MalformedNoteError, _note.MalformedCheckpointError) as exc:
        raise UserError(f"{where}: not a checkpoint note ({_squash(exc)})") from None


def _text(data: bytes, where: str) -> str:
    if len(data) > _note.DEFAULT_MAX_NOTE_BYTES:
        raise UserError(f"{where}: {len(data)} bytes; a checkpoint note is far smaller")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{where}: not a checkpoint (not UTF-8)") from None
    if "\r" in text:
        raise UserError(f"{where}: not a checkpoint note (a carriage return; lines end in \\n)")
    return text


def _squash(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]
