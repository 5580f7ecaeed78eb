"""twinflow's signed checkpoints against Go's reference, golang.org/x/mod/sumdb/note.

The Go side is `tests/go/notecheck/main.go`, built once per session from Debian's
golang-go and golang-golang-x-mod-dev, offline (GOPATH mode). Without `go` these tests fail
and say how to install it: interoperability is a promise, not an optional extra (.ci/run
installs both packages where they are missing).
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from pathlib import Path

import pytest
from cli_testkit import build_go_tool

from twinflow.kernel._process import run_process
from twinflow.trace import SignatureError
from twinflow.trace._keys import SignerKey, generate_key, parse_signer_key, parse_verifier_key
from twinflow.trace._note import (
    CheckpointBody,
    open_checkpoint,
    open_note,
    parse_note,
    sign_checkpoint_note,
    sign_note,
)
from twinflow.trace._witness import CosignerKey, cosign, verify_cosignatures

LOG = generate_key("example.com/log", hashlib.sha256(b"log").digest())
WITNESS = generate_key("example.com/witness", hashlib.sha256(b"witness").digest())
BODY = CheckpointBody("example.com/log", 1024, hashlib.sha256(b"root").digest(), ("ext 1",))


@pytest.fixture(scope="session")
def notecheck(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go reference driver, built once for the session."""
    return build_go_tool("notecheck", tmp_path_factory.mktemp("go"))


def _go(binary: Path, *args: str, stdin: bytes = b"") -> tuple[int, str, str]:
    result = run_process([str(binary), *args], stdin=stdin, timeout=120.0)
    return result.returncode, result.stdout, result.stderr


def _go_keygen(binary: Path, name: str) -> tuple[str, str]:
    status, out, err = _go(binary, "keygen", name)
    assert 0 == status, err
    skey, vkey = out.splitlines()
    return skey, vkey


def test_go_verifies_a_checkpoint_twinflow_signed(notecheck: Path) -> None:
    """Go opens a twinflow-signed checkpoint with twinflow's verifier key and reads its text."""
    status, out, err = _go(
        notecheck, "verify", LOG.verifier.text, stdin=sign_checkpoint_note(BODY, [LOG])
    )
    assert 0 == status, err
    opened = json.loads(out)
    assert BODY.text == opened["text"]
    assert [{"name": "example.com/log", "hash": f"{LOG.key_hash:08x}"}] == opened["sigs"]


def test_twinflow_verifies_a_checkpoint_go_signed(notecheck: Path) -> None:
    """twinflow opens a checkpoint Go signed with a Go-generated key, read from Go's key text."""
    skey, vkey = _go_keygen(notecheck, "example.com/go-log")
    body = CheckpointBody("example.com/go-log", 7, bytes(range(32)))
    status, signed, err = _go(notecheck, "sign", skey, stdin=body.text.encode())
    assert 0 == status, err
    opened = open_checkpoint(signed.encode(), [parse_verifier_key(vkey)], origin=body.origin)
    assert body == opened.body
    assert (parse_verifier_key(vkey),) == opened.verified_by


def test_twinflow_reads_a_key_pair_go_generated(notecheck: Path) -> None:
    """Go's signer key parses, derives Go's verifier key, and signs what Go then verifies."""
    skey, vkey = _go_keygen(notecheck, "example.com/pair")
    signer = parse_signer_key(skey + "\n")
    assert parse_verifier_key(vkey + "\n") == signer.verifier
    assert (skey, vkey) == (signer.text, signer.verifier.text)
    status, _, err = _go(notecheck, "verify", vkey, stdin=sign_note("hello\n", [signer]))
    assert 0 == status, err


def test_go_signs_with_a_twinflow_key_byte_for_byte(notecheck: Path) -> None:
    """Go signing with twinflow's signer key text writes exactly the note twinflow writes."""
    status, signed, err = _go(notecheck, "sign", LOG.text, stdin=BODY.text.encode())
    assert 0 == status, err
    assert sign_checkpoint_note(BODY, [LOG]) == signed.encode()


def test_cosigning_across_implementations(notecheck: Path) -> None:
    """A twinflow log signature cosigned by Go, and the reverse, verify with both keys on both sides."""
    status, cosigned, err = _go(
        notecheck,
        "cosign",
        WITNESS.text,
        LOG.verifier.text,
        stdin=sign_checkpoint_note(BODY, [LOG]),
    )
    assert 0 == status, err
    ours = open_note(cosigned.encode(), [LOG.verifier, WITNESS.verifier], required=2)
    assert (LOG.verifier, WITNESS.verifier) == ours.verified_by
    go_skey, go_vkey = _go_keygen(notecheck, "example.com/go-witness")
    status, go_signed, err = _go(notecheck, "sign", go_skey, stdin=BODY.text.encode())
    assert 0 == status, err
    both = sign_note(parse_note(go_signed.encode()), [LOG])
    status, out, err = _go(notecheck, "verify", go_vkey, LOG.verifier.text, stdin=both)
    assert 0 == status, err
    assert ["example.com/go-witness", "example.com/log"] == [
        s["name"] for s in json.loads(out)["sigs"]
    ]


def test_both_refuse_a_tampered_checkpoint(notecheck: Path) -> None:
    """Go and twinflow both refuse a twinflow checkpoint whose tree size was changed."""
    tampered = sign_checkpoint_note(BODY, [LOG]).replace(b"\n1024\n", b"\n1025\n")
    status, _, err = _go(notecheck, "verify", LOG.verifier.text, stdin=tampered)
    assert (1, "invalid signature") == (status, err.split(": ", 1)[1][:17])
    with pytest.raises(SignatureError):
        open_note(tampered, [LOG.verifier])


def test_key_names_refuse_the_same_spaces_as_go(notecheck: Path) -> None:
    """Every code point Go's unicode.IsSpace accepts is refused in a key name, and no other.

    Code points below U+0020 are refused anywhere in a note, so they are left out. Candidates:
    all of U+0020..U+30FF (every space lies below U+3100) and everything either side calls a space.
    """
    status, out, err = _go(notecheck, "spaces", "-")
    assert 0 == status, err
    go_spaces = {int(line, 16) for line in out.splitlines()} - set(range(0x20))
    python_spaces = {c for c in range(0x20, sys.maxunicode + 1) if chr(c).isspace()}
    candidates = set(range(0x20, 0x3100)) | go_spaces | python_spaces
    assert go_spaces == {c for c in candidates if _name_refused(chr(c))}


def _name_refused(char: str) -> bool:
    try:
        parse_verifier_key(f"a{char}b+00000000+" + base64.b64encode(b"\x01" + bytes(32)).decode())
    except SignatureError as error:
        return ("malformed_key", "bad-key-name") == (error.reason, error.problem)
    return False


def _mutations(note: bytes) -> list[bytes]:
    """Every one-byte deletion, a few one-byte substitutions at every offset, every truncation."""
    out = {note[:i] + note[i + 1 :] for i in range(len(note))}
    for i in range(len(note)):
        for value in (0x00, 0x09, 0x0A, 0x20, 0x2B, 0x2D, 0x3D, 0x41, 0x7F, 0x80, 0xE2, 0xFF):
            out.add(note[:i] + bytes([value]) + note[i + 1 :])
        out.add(note[:i])
        out.add(note[: i + 1] + note[i:])  # a doubled byte
    out.discard(note)
    return sorted(out)


def _edge_cases() -> list[bytes]:
    """Hand-made notes at the edges of the format: odd texts, limits, odd but valid characters."""
    unknown = f"— example.com/other {base64.b64encode(bytes(68)).decode()}\n".encode()
    signed = sign_checkpoint_note(BODY, [LOG])
    cases = [
        sign_note("\n", [LOG]),
        sign_note("a\n\nb\n\n", [LOG]),
        sign_note("\ufeffbom\n", [LOG]),
        sign_note("\ufffd \ufffe \x7f \u2028\n", [LOG]),
        sign_note("— looks like a signature\n", [LOG]),
        signed + unknown * 99,
        signed + unknown * 100,
        signed + b"".join(unknown.replace(b"other", f"o{i}".encode()) for i in range(99)),
        signed + b"".join(unknown.replace(b"other", f"o{i}".encode()) for i in range(100)),
        signed.replace(b"\n\n", b"\n\n\n"),
        b"\n\n" + signed[signed.index(b"\n\n") + 2 :],
    ]
    return cases


def _ours(note: bytes, keys: list[SignerKey]) -> tuple[str, SignatureError | None]:
    try:
        opened = open_note(note, [k.verifier for k in keys])
    except SignatureError as error:
        return "error", error if error.reason == "malformed_note" else None
    names = " ".join(f"{k.name}+{k.key_hash:08x}" for k in opened.verified_by)
    return f"ok {names}", None


def test_go_and_twinflow_agree_on_mutated_notes(notecheck: Path) -> None:
    """On every small mutation of a cosigned checkpoint, twinflow accepts only what Go accepts.

    The only allowed difference is twinflow's stricter base64: Go ignores set padding bits in
    a signature, twinflow refuses them as non-canonical.
    """
    note = sign_note(parse_note(sign_checkpoint_note(BODY, [LOG])), [WITNESS])
    mutated = _mutations(note) + _edge_cases()
    stdin = "".join(base64.b64encode(m).decode() + "\n" for m in mutated).encode()
    status, out, err = _go(
        notecheck, "batch", LOG.verifier.text, WITNESS.verifier.text, stdin=stdin
    )
    assert 0 == status, err
    theirs = out.splitlines()
    assert len(mutated) == len(theirs)
    disagreements = []
    for data, go_answer in zip(mutated, theirs, strict=True):
        our_answer, error = _ours(data, [LOG, WITNESS])
        if our_answer == go_answer:
            continue
        stricter_base64 = error is not None and error.problem == "bad-base64"
        if not (our_answer == "error" and stricter_base64):
            disagreements.append((data, go_answer, our_answer))
    assert [] == disagreements
    assert 1000 < len(mutated)


# Where twinflow's key reader is deliberately stricter than Go's NewVerifier on these mutations:
# an uppercase hash (strconv.ParseUint takes it; every writer, Go's included, writes lowercase).
_STRICTER_KEY_PROBLEMS = {"bad-hash"}


def test_go_and_twinflow_agree_on_mutated_verifier_keys(notecheck: Path) -> None:
    """On every small mutation of a verifier key, twinflow reads only keys Go reads, the same way."""
    text = LOG.verifier.text.encode()
    mutated = [m for m in _mutations(text) if m]
    stdin = "".join(base64.b64encode(m).decode() + "\n" for m in mutated).encode()
    status, out, err = _go(notecheck, "keys", "-", stdin=stdin)
    assert 0 == status, err
    disagreements: list[tuple[bytes, str, str]] = []
    for data, go_answer in zip(mutated, out.splitlines(), strict=True):
        try:
            key = parse_verifier_key(data)
        except SignatureError as error:
            if go_answer != "error" and error.problem not in _STRICTER_KEY_PROBLEMS:
                disagreements.append((data, go_answer, str(error.problem)))
            continue
        if go_answer != f"ok {key.name}+{key.key_hash:08x}":
            disagreements.append((data, go_answer, "ok"))
    assert [] == disagreements
    assert 500 < len(mutated)


# C2SP tlog-cosignature/v1: x/mod/sumdb/note knows key type 0x01 only, so Go checks the log's
# signature on a cosigned note with x/mod alone (the cosignature ignored as an unknown key's),
# and the cosignature with a cosignature/v1 verifier notecheck writes on Go's crypto/ed25519.
COSIGNED_AT = 1_796_000_000


def _cosigned_note() -> bytes:
    line = cosign(BODY.text, WITNESS, COSIGNED_AT).line
    return sign_checkpoint_note(BODY, [LOG]) + f"{line}\n".encode()


def test_go_checks_a_twinflow_cosignature(notecheck: Path) -> None:
    """Go opens a twinflow-cosigned checkpoint with the log key and the witness's cosigner key,
    and reads the cosignature's timestamp."""
    cosigner = CosignerKey.of_signer(WITNESS)
    status, out, err = _go(
        notecheck, "cosigned", LOG.verifier.text, cosigner.text, stdin=_cosigned_note()
    )
    assert 0 == status, err
    opened = json.loads(out)
    assert (
        BODY.text,
        [f"{LOG.key_hash:08x}", f"{cosigner.key_hash:08x}"],
        {cosigner.label: COSIGNED_AT},
    ) == (opened["text"], [s["hash"] for s in opened["sigs"]], opened["times"])


def test_x_mod_alone_verifies_the_log_and_ignores_the_cosignature(notecheck: Path) -> None:
    """With x/mod's own verifier only, the cosigned note opens; the cosignature is listed as
    unverified; x/mod's NewVerifier refuses the cosigner key text (type 0x04)."""
    status, out, err = _go(notecheck, "verify", LOG.verifier.text, stdin=_cosigned_note())
    assert 0 == status, err
    cosigner = CosignerKey.of_signer(WITNESS)
    assert [{"name": WITNESS.name, "hash": f"{cosigner.key_hash:08x}"}] == json.loads(out)[
        "unverified"
    ]
    stdin = base64.b64encode(cosigner.text.encode()) + b"\n"
    assert (0, "error\n") == _go(notecheck, "keys", "-", stdin=stdin)[:2]


def test_go_and_twinflow_refuse_a_changed_cosignature_time(notecheck: Path) -> None:
    """A cosignature whose timestamp was moved: Go's note.Open and twinflow both refuse it."""
    note = _cosigned_note()
    line = note.rstrip(b"\n").rsplit(b"\n", 1)[1]
    name, data = line.split(b" ")[1:]
    raw = bytearray(base64.b64decode(data))
    raw[11] ^= 1
    moved = note.replace(data, base64.b64encode(bytes(raw)))
    cosigner = CosignerKey.of_signer(WITNESS)
    status, _, err = _go(notecheck, "cosigned", LOG.verifier.text, cosigner.text, stdin=moved)
    assert (1, "invalid signature") == (status, err.split(": ", 1)[1][:17])
    with pytest.raises(SignatureError, match=r"cosigned by|does not verify"):
        verify_cosignatures(moved, [cosigner], quorum=1, now=None)
    assert name == WITNESS.name.encode()
