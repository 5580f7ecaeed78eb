"""twinflow.trace.note: C2SP signed notes with Ed25519 keys, and signed tlog checkpoints.

The public home of the signed-note API (`twinflow.trace._note` holds the code; its docstring
draws the format and the error tree). A module of its own, not names at the package's top
level: the names here sign and open C2SP notes (``sign_checkpoint_note``, ``open_checkpoint``);
the package's ``read_published_checkpoint`` reads a checkpoint file with them.

Verification runs on the standard library alone; signing and key derivation need the
``signatures`` extra (``twinflow-trace[signatures]``).
"""

from twinflow.trace._note import (
    DEFAULT_MAX_NOTE_BYTES,
    DEFAULT_MAX_SIGNATURES,
    SIGNATURES_EXTRA,
    AmbiguousKeyError,
    CheckpointBody,
    InvalidSignatureError,
    MalformedCheckpointError,
    MalformedKeyError,
    MalformedNoteError,
    Note,
    NoteError,
    NoteSignature,
    OriginMismatchError,
    SignerKey,
    SigningUnavailableError,
    UnverifiedNoteError,
    VerifiedCheckpoint,
    VerifiedNote,
    VerifierKey,
    generate_key,
    open_checkpoint,
    open_note,
    parse_checkpoint_body,
    parse_note,
    parse_signer_key,
    parse_verifier_key,
    sign_checkpoint_note,
    sign_note,
)

__all__ = [
    "DEFAULT_MAX_NOTE_BYTES",
    "DEFAULT_MAX_SIGNATURES",
    "SIGNATURES_EXTRA",
    "AmbiguousKeyError",
    "CheckpointBody",
    "InvalidSignatureError",
    "MalformedCheckpointError",
    "MalformedKeyError",
    "MalformedNoteError",
    "Note",
    "NoteError",
    "NoteSignature",
    "OriginMismatchError",
    "SignerKey",
    "SigningUnavailableError",
    "UnverifiedNoteError",
    "VerifiedCheckpoint",
    "VerifiedNote",
    "VerifierKey",
    "generate_key",
    "open_checkpoint",
    "open_note",
    "parse_checkpoint_body",
    "parse_note",
    "parse_signer_key",
    "parse_verifier_key",
    "sign_checkpoint_note",
    "sign_note",
]
