"""Witnesses: C2SP tlog-cosignature/v1 cosignatures, a witness's state, and a cosigning policy.

A witness keeps, per log origin, the last checkpoint it cosigned, and cosigns a new checkpoint
only if a consistency proof shows it extends that one (https://c2sp.org/tlog-witness,
``add-checkpoint``). The request is the consistency proof file ``twinflow prove --from-size``
writes (``old N``, the proof hashes, a blank line, the log's signed checkpoint note:
`twinflow.trace._tlog.TlogConsistency`), so a proof made for a reader is what a witness reads.

A cosignature (https://c2sp.org/tlog-cosignature, Ed25519 ``cosignature/v1``) is one more
signature line on the checkpoint note::

    — witness.example/w1 base64(key ID || u64 big-endian timestamp || Ed25519 signature)

signing ``"cosignature/v1\\ntime <timestamp>\\n" || the checkpoint text``, where the key ID is
``SHA-256(name || "\\n" || 0x04 || public key)[:4]``. A cosigner's verifier key is written
``<name>+<key ID>+base64(0x04 || public key)`` (`CosignerKey`); its signer key is an ordinary
signed-note signer key (`twinflow keygen`), as transparency-dev's witnesses use it.

The state file is canonical JSON and a newline, read strictly (a carriage return, a missing
newline, an unknown member, a non-canonical byte: `TraceFormatError` (``witness_state``), nothing
cosigned), and signed by the witness's own key over the rest of it, so a state edited by hand (a
size rolled back so a fork of what was cosigned would pass) or another witness's state is refused.
Restoring an older copy the witness itself wrote is not caught by the file alone: keep the state
where only the witness writes (docs/adr/0163-signed-decisions-and-witness-state.md).

Checking the old size and writing the new state happen while the process holds the
state's writer lock (`hold_state`, `lock_now` on ``STATE.lock``), so of two witnesses sharing a state file one
wins and the other is refused at once; the state is replaced whole (`write_replace`) before the
cosignature is returned. How timestamps are checked: docs/adr/0115-witness-cosignatures.md.

Every refusal is a `SignatureError`: ``witness_refused`` (the witness will not cosign; ``problem``
says why, a fork is ``not-consistent``) or ``cosignature`` (cosignatures do not meet a policy,
or one is forged); a damaged state file is a `TraceFormatError` (``witness_state``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Literal

from twinflow._base._errors import FileWriteError
from twinflow._base._files import lock_now, write_replace
from twinflow._base._open import read_regular
from twinflow.trace import _ed25519, _note
from twinflow.trace._canonical import canonical_bytes, parse_json
from twinflow.trace._errors import (
    CanonicalError,
    InvalidProofError,
    SignatureError,
    TraceFormatError,
)
from twinflow.trace._keys import (
    SignerKey,
    VerifierKey,
    _b64decode,
    _b64encode,
    _key_fields,
    _key_hash,
    _key_text,
    _Value,
    malformed_key,
)
from twinflow.trace._merkle import EMPTY_ROOT, verify_consistency
from twinflow.trace._note import CheckpointBody, NoteSignature

COSIGNATURE_V1 = 0x04
"""The key type byte of an Ed25519 ``cosignature/v1`` cosigner key (C2SP tlog-cosignature)."""
DEFAULT_CLOCK_SKEW = 600
"""Seconds a cosignature may be dated after the verifier's clock and still count."""
MAX_STATE_BYTES = 1024 * 1024
"""Largest witness state file read."""
_MAX_LOGS = 4096
_MAX_TIMESTAMP = 2**63 - 1
_STATE_FORMAT = "twinflow-witness-state/v2"
_UNSIGNED_FORMAT = "twinflow-witness-state/v1"
_HEX64 = frozenset("0123456789abcdef")

RefusalReason = Literal[
    "unknown-log", "not-signed", "bad-request", "old-size-mismatch", "not-consistent", "clock"
]


def _refused(problem: RefusalReason, message: str, *, size: int | None = None) -> SignatureError:
    """The witness does not cosign: ``problem`` is the stable code (C2SP tlog-witness's status
    for it in the message); ``size``, for ``old-size-mismatch``, the size it last cosigned."""
    return SignatureError(message, reason="witness_refused", problem=problem, size=size)


class CosignerKey(_Value):
    """An Ed25519 ``cosignature/v1`` cosigner's public key, its name and key ID."""

    __slots__ = ("key_hash", "name", "public_key")

    def __init__(self, name: str, key_hash: int, public_key: bytes) -> None:
        """Hold the fields as given; `parse_cosigner_key` and `of_signer` check them."""
        self._set(name=name, key_hash=key_hash, public_key=public_key)

    name: str
    """The witness's name (C2SP: a schema-less URL)."""
    key_hash: int
    """The key ID: the first four bytes of SHA-256(name, newline, 0x04, public key)."""
    public_key: bytes
    """The 32-byte Ed25519 public key."""

    @classmethod
    def of_signer(cls, signer: SignerKey) -> CosignerKey:
        """The cosigner key of a signed-note signer key (the same Ed25519 key, type 0x04)."""
        public = signer.verifier.public_key
        return cls(signer.name, _key_hash(signer.name, bytes([COSIGNATURE_V1]) + public), public)

    @property
    def text(self) -> str:
        """``<name>+<key ID>+base64(0x04 || public key)``."""
        data = _b64encode(bytes([COSIGNATURE_V1]) + self.public_key)
        return f"{self.name}+{self.key_hash:08x}+{data}"

    @property
    def label(self) -> str:
        """``<name>+<key ID>``, as messages name the key."""
        return f"{self.name}+{self.key_hash:08x}"


def parse_cosigner_key(text: str | bytes) -> CosignerKey:
    """Read a cosigner verifier key ``<name>+<key ID>+base64(0x04 || key)``.

    Raises:
        SignatureError (``malformed_key``): Not such a key (a signed-note key of type 0x01 included: a log key
            given as a witness's is refused, naming the type).
    """
    text = _key_text(text)
    fields = text.split("+", 2)
    if text.startswith("PRIVATE+KEY+"):
        raise malformed_key(
            "bad-fields", "this is a signer (private) key; give the witness's verifier key"
        )
    if len(fields) != 3:
        raise malformed_key(
            "bad-fields", f"expected <name>+<hash>+<key>, found {len(fields)} '+'-separated fields"
        )
    try:
        name, key_hash, raw = _key_fields(fields, COSIGNATURE_V1)
    except SignatureError as exc:
        if exc.problem == "unknown-algorithm" and "0x01" in str(exc):
            raise malformed_key(
                "unknown-algorithm",
                "a signed-note key (type 0x01: a log's key), not a witness's cosigner key "
                "(type 0x04, from `twinflow keygen NAME --cosigner`)",
            ) from None
        raise
    if key_hash != _key_hash(name, raw):
        raise malformed_key(
            "hash-mismatch", f"key hash {key_hash:08x} does not belong to name {name!r} and key"
        )
    if not _ed25519.is_public_key(raw[1:]):
        raise malformed_key("not-a-point", "the public key is not an Ed25519 curve point")
    return CosignerKey(name, key_hash, raw[1:])


def cosignature_message(text: str, timestamp: int) -> bytes:
    """The bytes a ``cosignature/v1`` signs: header, time line, then the checkpoint text."""
    return f"cosignature/v1\ntime {timestamp}\n{text}".encode()


def cosign(text: str, signer: SignerKey, timestamp: int) -> NoteSignature:
    """A ``cosignature/v1`` signature line by ``signer`` on checkpoint text ``text``.

    Raises:
        SignatureError (``signing_unavailable``): The ``cryptography`` library is not installed.
        ValueError: The timestamp is not between 1 and 2**63 - 1.
    """
    if not 0 < timestamp <= _MAX_TIMESTAMP:
        raise ValueError(f"a cosignature timestamp is 1 to 2**63 - 1, not {timestamp}")
    key = CosignerKey.of_signer(signer)
    signature = signer.sign(cosignature_message(text, timestamp))
    return NoteSignature(key.name, key.key_hash, timestamp.to_bytes(8, "big") + signature)


class Cosignature(_Value):
    """A cosignature by a known witness that verified."""

    __slots__ = ("key", "timestamp")

    def __init__(self, key: CosignerKey, timestamp: int) -> None:
        """Hold the fields as given."""
        self._set(key=key, timestamp=timestamp)

    key: CosignerKey
    """The witness."""
    timestamp: int
    """When it cosigned (POSIX seconds)."""


def verify_cosignatures(
    note: bytes,
    witnesses: Iterable[CosignerKey],
    *,
    quorum: int,
    now: int | None,
    skew: int = DEFAULT_CLOCK_SKEW,
) -> tuple[Cosignature, ...]:
    """Check a checkpoint note's cosignatures against a policy: ``quorum`` of ``witnesses``.

    A signature line naming a known witness (name and key ID) must verify, or the note is
    refused; lines by other keys are ignored. A cosignature dated more than ``skew`` seconds
    after ``now`` does not count (None: no clock to compare with; the caller says so).

    Returns:
        The cosignatures that count, in the order their lines appear.

    Raises:
        SignatureError (``malformed_note``): The bytes are not a signed note.
        SignatureError (``ambiguous_key``): Two different witness keys share a name and key ID,
            or one public key is given twice (under two names or one: a quorum counts keys).
        SignatureError (``cosignature``): A known witness's line does not verify, or fewer than ``quorum``
            witnesses cosigned.
    """
    ring: dict[tuple[str, int], CosignerKey] = {}
    by_key: dict[bytes, CosignerKey] = {}
    for key in witnesses:
        if ring.setdefault((key.name, key.key_hash), key) != key:
            raise SignatureError(
                f"two different witness keys are named {key.label}: keep one",
                reason="ambiguous_key",
            )
        # A quorum counts keys: one key under two names would be two witnesses for one signer.
        same = by_key.get(key.public_key)
        if same is not None:
            raise SignatureError(
                f"witness keys {same.label} and {key.label} are one public key: a quorum "
                "counts keys, not names or entries; give each witness's key once",
                reason="ambiguous_key",
            )
        by_key[key.public_key] = key
    parsed = _note.parse_note(note)
    counted: dict[bytes, Cosignature] = {}
    future: list[str] = []
    for line in parsed.signatures:
        known = ring.get((line.name, line.key_hash))
        if known is None:
            continue
        key = known
        timestamp = _cosigned_at(key, line.signature, parsed.text)
        if now is not None and timestamp > now + skew:
            future.append(f"{key.label} at {timestamp}")
            continue
        counted.setdefault(key.public_key, Cosignature(key, timestamp))
    if len(counted) < quorum:
        found = ", ".join(c.key.label for c in counted.values()) or "none"
        late = f"; dated in the future, not counted: {', '.join(future)}" if future else ""
        raise SignatureError(
            f"cosigned by {len(counted)} of the witnesses given, {quorum} required (cosigned "
            f"by: {found}{late})",
            reason="cosignature",
        )
    return tuple(counted.values())


def _cosigned_at(key: CosignerKey, raw: bytes, text: str) -> int:
    """The time of a known witness's cosignature (timestamp || Ed25519 signature), if it holds."""
    timestamp = int.from_bytes(raw[:8], "big") if len(raw) == 72 else 0
    message = cosignature_message(text, timestamp)
    if (
        len(raw) != 72
        or not 0 < timestamp <= _MAX_TIMESTAMP
        or not _ed25519.verify(key.public_key, message, raw[8:])
    ):
        raise SignatureError(
            f"the cosignature by witness {key.label} does not verify: the checkpoint was "
            "altered after it cosigned, or the line was forged",
            reason="cosignature",
        )
    return timestamp


# -- the witness ----------------------------------------------------------------------------


class _Log(_Value):
    __slots__ = ("root", "size", "time")

    def __init__(self, size: int, root: bytes, time: int) -> None:
        self._set(size=size, root=root, time=time)

    size: int
    root: bytes
    time: int


def _state_error(path: Path, why: str) -> TraceFormatError:
    return TraceFormatError(
        f"{path}: not a witness state ({why}); nothing was cosigned: restore the file from a "
        "backup (a witness that forgets what it cosigned could be made to cosign a fork)",
        reason="witness_state",
    )


def _state_message(unsigned: dict[str, object]) -> bytes:
    """What a state's signature signs: a header, then the state's canonical JSON without it."""
    return b"twinflow witness state v2\n" + canonical_bytes(unsigned)


def read_state(
    path: Path, witness: VerifierKey, *, adopt_unsigned: bool = False
) -> dict[str, _Log]:
    """Read a witness state file (a missing file: the witness has cosigned nothing).

    The state carries the witness's own signature (its signer key) over everything else in it,
    so a file edited by hand (a size rolled back, a root swapped) or another witness's state is
    refused. A state written before states were signed (``twinflow-witness-state/v1``) is read
    only with ``adopt_unsigned``: the operator vouches for it, and the next write signs it.

    Raises:
        TraceFormatError (``witness_state``): The file is not a state this witness wrote.
        OSError: It cannot be read.
    """
    try:
        data = read_regular(path, MAX_STATE_BYTES)
    except FileNotFoundError:
        return {}
    if len(data) > MAX_STATE_BYTES:
        raise _state_error(path, f"over {MAX_STATE_BYTES} bytes")
    if not data.endswith(b"\n") or b"\r" in data:
        raise _state_error(path, "it must be one line of canonical JSON ending in \\n alone")
    try:
        value = parse_json(data[:-1], max_depth=4, canonical=True)
    except CanonicalError as exc:
        raise _state_error(path, f"JSON: {exc.reason}") from None
    if isinstance(value, dict) and value.get("format") == _UNSIGNED_FORMAT:
        if not adopt_unsigned:
            raise TraceFormatError(
                f"{path}: an unsigned witness state ({_UNSIGNED_FORMAT}): nothing shows it was "
                "not edited; nothing was cosigned: check its sizes against the notes this "
                "witness cosigned, then run the witness once with --adopt-unsigned-state to sign it",
                reason="witness_state",
            )
        members = {"format", "logs"}
    else:
        members = {"format", "logs", "signature", "witness"}
    if not isinstance(value, dict) or set(value) != members:
        raise _state_error(path, f"members must be exactly {', '.join(sorted(members))}")
    if value["format"] not in (_STATE_FORMAT, _UNSIGNED_FORMAT) or not isinstance(
        value["logs"], dict
    ):
        raise _state_error(path, f"format must be {_STATE_FORMAT!r}, logs an object")
    if "signature" in value:
        _check_state_signature(path, value, witness)
    if len(value["logs"]) > _MAX_LOGS:
        raise _state_error(path, f"more than {_MAX_LOGS} logs")
    logs = {}
    for origin, entry in value["logs"].items():
        where = f"log {origin[:80]!r}"
        if not isinstance(entry, dict) or set(entry) != {"root_hex", "size", "time"}:
            raise _state_error(path, f"{where}: members must be root_hex, size, time")
        root, size, time = entry["root_hex"], entry["size"], entry["time"]
        if type(root) is not str or len(root) != 64 or not set(root) <= _HEX64:
            raise _state_error(path, f"{where}: root_hex is not 64 lowercase hex digits")
        if type(size) is not int or size < 0 or type(time) is not int or time < 0:
            raise _state_error(path, f"{where}: size and time must be integers >= 0")
        logs[origin] = _Log(size, bytes.fromhex(root), time)
    return logs


def _state_label(name: str, public_key: bytes) -> str:
    """The witness a state names: its cosigner key's label, as ``twinflow witness`` prints it."""
    return CosignerKey(
        name, _key_hash(name, bytes([COSIGNATURE_V1]) + public_key), public_key
    ).label


def _check_state_signature(path: Path, value: dict[str, object], witness: VerifierKey) -> None:
    """Refuse a state whose signature is not this witness's over the rest of the file."""
    label = _state_label(witness.name, witness.public_key)
    if value["witness"] != label:
        raise _state_error(
            path, f"it is the state of witness {str(value['witness'])[:100]!r}, not of {label}"
        )
    signature = value["signature"]
    raw = _b64decode(signature) if isinstance(signature, str) else None
    unsigned = {k: v for k, v in value.items() if k != "signature"}
    if raw is None or len(raw) != 64 or not witness.verify(_state_message(unsigned), raw):
        raise _state_error(
            path, "its signature does not verify: it was edited after the witness wrote it"
        )


def _encode_state(logs: dict[str, _Log], signer: SignerKey) -> bytes:
    entries = {
        origin: {"root_hex": log.root.hex(), "size": log.size, "time": log.time}
        for origin, log in logs.items()
    }
    unsigned: dict[str, object] = {
        "format": _STATE_FORMAT,
        "logs": entries,
        "witness": _state_label(signer.name, signer.verifier.public_key),
    }
    signature = _b64encode(signer.sign(_state_message(unsigned)))
    return canonical_bytes({**unsigned, "signature": signature}) + b"\n"


@contextlib.contextmanager
def hold_state(state: Path) -> Iterator[None]:
    """Be the one witness using ``state`` until the block ends (the writer lock on ``STATE.lock``).

    The lock is `lock_now`'s: taken without waiting, released with the process however it ends.

    Raises:
        FileWriteError (``busy``): Another witness process holds it (nothing was read or written).
    """
    lock = state.with_name(state.name + ".lock")
    state.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(lock, flags, 0o644)
    lock_now(
        fd,
        lambda: FileWriteError(
            f"{state}: another witness process is cosigning with this state; nothing was "
            "cosigned: send the request again (its answer may move the size to prove from)",
            path=state,
            reason="busy",
        ),
    )
    try:
        yield
    finally:
        os.close(fd)  # releases the lock


def _opened_checkpoint(note: bytes, logs: Sequence[VerifierKey]) -> CheckpointBody:
    """The request's checkpoint, signed by a trusted key of its own origin."""
    try:
        parsed = _note.parse_note(note)
        origin = _note.parse_checkpoint_body(parsed.text).origin
    except SignatureError as exc:  # malformed_note or malformed_checkpoint: nothing else
        raise _refused(
            "bad-request", f"the checkpoint is not a signed checkpoint note ({exc})"
        ) from None
    trusted = [k for k in logs if k.name == origin]
    if not trusted:
        raise _refused(
            "unknown-log",
            f"no log key is configured for origin {origin[:100]!r} (404): this witness does not "
            "follow that log",
        )
    try:
        return _note.open_checkpoint(note, trusted, origin=origin).body
    except SignatureError as exc:
        raise _refused(
            "not-signed", f"the checkpoint is not signed by the log's key (403): {exc}"
        ) from None


def _cosigned(note: bytes, line: NoteSignature) -> bytes:
    parsed = _note.parse_note(note)
    kept = [s.line for s in parsed.signatures if (s.name, s.key_hash) != (line.name, line.key_hash)]
    return (parsed.text + "\n" + "".join(f"{s}\n" for s in [*kept, line.line])).encode()


def add_checkpoint(
    request: bytes,
    *,
    state: Path,
    signer: SignerKey,
    logs: Sequence[VerifierKey],
    now: int,
    adopt_unsigned: bool = False,
) -> tuple[bytes, CheckpointBody, int]:
    """Cosign the request's checkpoint if it extends the last one cosigned for its log.

    Args:
        request: A consistency proof file (tlog-witness ``add-checkpoint`` body).
        state: The witness's state file (created on first use).
        signer: The witness's signer key.
        logs: The log verifier keys the witness follows (their names are the origins).
        now: The time to cosign at (POSIX seconds; not earlier than the log's last cosignature).
        adopt_unsigned: Read a state written before states were signed (the operator vouches
            for it); the state written back is signed.

    Returns:
        The checkpoint note with the witness's cosignature added, its body, and the size the
        witness had cosigned before.

    Raises:
        SignatureError (``witness_refused``): Not cosigned; ``reason`` says why (a fork: ``not-consistent``).
        TraceFormatError (``witness_state``): The state file is damaged, edited, unsigned, or
            another witness's.
        FileWriteError (``busy``): Another witness process holds the state's directory.
        TraceFormatError: The request is not a consistency proof file.
    """
    from twinflow.trace._tlog import parse_tlog_consistency

    proof = parse_tlog_consistency(request, where="the request")
    body = _opened_checkpoint(proof.checkpoint, logs)
    if proof.old_size > body.size:
        raise _refused(
            "bad-request", f"old size {proof.old_size} is above the checkpoint's {body.size} (400)"
        )
    if body.size == 0 and body.root_hash != EMPTY_ROOT:
        raise _refused("not-consistent", "a size-0 checkpoint must have the empty root")
    with hold_state(state):
        logs_state = read_state(state, signer.verifier, adopt_unsigned=adopt_unsigned)
        last = logs_state.get(body.origin)
        last_size = 0 if last is None else last.size
        _check_extends(last, body, proof.old_size, proof.hashes, now)
        line = cosign(body.text, signer, now)
        logs_state[body.origin] = _Log(body.size, body.root_hash, now)
        write_replace(state, _encode_state(logs_state, signer), mode=0o644)
    return _cosigned(proof.checkpoint, line), body, last_size


def _check_extends(
    last: _Log | None, body: CheckpointBody, old_size: int, hashes: Sequence[bytes], now: int
) -> None:
    """Refuse unless the checkpoint extends ``last`` (what this witness last cosigned for its
    log) by the proof from ``old_size``, at a time not before it."""
    last_size = 0 if last is None else last.size
    if old_size != last_size:
        raise _refused(
            "old-size-mismatch",
            f"this witness last cosigned {body.origin[:100]!r} at size {last_size}, the proof "
            f"starts at {old_size} (409): make the proof from size {last_size}",
            size=last_size,
        )
    try:
        if last is None:
            if hashes:
                raise InvalidProofError("a proof from size 0 must be empty")
        else:
            verify_consistency(last.size, body.size, hashes, last.root, body.root_hash)
    except InvalidProofError as exc:
        raise _refused(
            "not-consistent",
            f"refusing to cosign a fork: the checkpoint of size {body.size} does not extend "
            f"the one of size {last_size} this witness cosigned for {body.origin[:100]!r} "
            f"({exc}) (422)",
        ) from None
    if last is not None and now < last.time:
        raise _refused(
            "clock",
            f"the clock reads {now}, before this witness's last cosignature of this log "
            f"({last.time}): a cosignature must not be dated earlier; fix the clock",
        )
