"""C2SP tlog-proof and consistency proof files: made, checked, and every malformed form refused."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest

from twinflow.trace import InvalidProofError, SignatureError, TraceFormatError, read_checkpoint
from twinflow.trace.__main__ import main
from twinflow.trace._keys import SignerKey, generate_key
from twinflow.trace._note import CheckpointBody, sign_checkpoint_note
from twinflow.trace._testing import small_trace
from twinflow.trace._tlog import (
    check_proof_file,
    parse_tlog_consistency,
    parse_tlog_proof,
    prove_tlog_consistency,
    prove_tlog_inclusion,
)

LAB = generate_key("example.org/lab", bytes([1]) * 32)
OTHER = generate_key("example.org/other", bytes([2]) * 32)
IMPOSTOR = generate_key("example.org/lab", bytes([3]) * 32)
TRACE = small_trace(11)
OTHER_TRACE = small_trace(12)[:-1] + b"\n"


def note(size: int, *, data: bytes = TRACE, signers: tuple[SignerKey, ...] = (LAB,)) -> bytes:
    """The checkpoint note of the first ``size`` events, signed by ``signers`` (none: unsigned)."""
    root = bytes.fromhex(read_checkpoint(data, size).root)
    body = CheckpointBody("example.org/lab", size, root)
    return sign_checkpoint_note(body, list(signers)) if signers else body.text.encode()


def digest(seq: int, data: bytes = TRACE) -> bytes:
    """Event ``seq``'s 32-byte digest, read from its trace line."""
    return bytes.fromhex(data.splitlines()[seq][11:75].decode())


KEYS = [LAB.verifier.text.encode()]


def test_every_event_of_every_size_is_proved_and_checked() -> None:
    """For each size and seq, the proof round-trips its text and checks; the summary says hex."""
    for size in range(1, 12):
        cp = note(size)
        for seq in range(size):
            proof = prove_tlog_inclusion(TRACE, seq, cp)
            assert proof == parse_tlog_proof(proof.to_bytes())
            checked = check_proof_file(proof.to_bytes(), KEYS, where="p", digest=digest(seq))
            assert (seq, digest(seq).hex()) == (checked.index, checked.digest)
            assert "root (hex) " in checked.summary()


def test_every_pair_of_sizes_is_proved_consistent() -> None:
    """For each old size <= new size, the consistency text round-trips and checks."""
    for new in range(0, 12):
        for old in range(0, new + 1):
            proof = prove_tlog_consistency(TRACE, old, note(new))
            assert proof == parse_tlog_consistency(proof.to_bytes())
            checked = check_proof_file(proof.to_bytes(), KEYS, where="c", old_checkpoint=note(old))
            assert (old, new) == (checked.old.checkpoint.size, checked.checkpoint.checkpoint.size)  # type: ignore[union-attr]  # consistency sets old


def test_the_formats_are_the_c2sp_texts() -> None:
    """Header, extra, index, base64 hashes, blank line, the note verbatim; `old N` for consistency."""
    cp = note(7)
    text = prove_tlog_inclusion(TRACE, 3, cp).to_bytes()
    lines = text.split(b"\n")
    assert [b"c2sp.org/tlog-proof@v1", b"extra " + base64.b64encode(digest(3)), b"index 3"] == (
        lines[:3]
    )
    assert text.endswith(b"\n\n" + cp)
    consistency = prove_tlog_consistency(TRACE, 4, cp).to_bytes()
    assert consistency.startswith(b"old 4\n") and consistency.endswith(b"\n\n" + cp)


def test_a_note_of_another_trace_is_refused_when_making_a_proof() -> None:
    """A proof is made only for a note whose root is the trace's at that size (exit 1)."""
    with pytest.raises(InvalidProofError, match="not a checkpoint of this trace"):
        prove_tlog_inclusion(TRACE, 1, note(11, data=OTHER_TRACE))
    with pytest.raises(InvalidProofError, match="not a checkpoint of this trace"):
        prove_tlog_consistency(TRACE, 1, note(11, data=OTHER_TRACE))


def _proof() -> bytes:
    return prove_tlog_inclusion(TRACE, 5, note(11)).to_bytes()


def _consistency() -> bytes:
    return prove_tlog_consistency(TRACE, 6, note(11)).to_bytes()


def _swap_line(data: bytes, number: int, line: bytes) -> bytes:
    lines = data.split(b"\n")
    lines[number] = line
    return b"\n".join(lines)


def _collide(data: bytes) -> bytes:
    """The note's signature line replaced by IMPOSTOR's, which has LAB's name and (forged) hint."""
    body = data[: data.rindex(b"\n\n") + 1]
    signature = IMPOSTOR.sign(body[body.index(b"\n\n") + 2 :])
    raw = LAB.key_hash.to_bytes(4, "big") + signature
    return body + b"\n\xe2\x80\x94 example.org/lab " + base64.b64encode(raw) + b"\n"


MALFORMED: dict[str, tuple[Callable[[], bytes], type[Exception]]] = {
    "crlf": (lambda: _proof().replace(b"\n", b"\r\n"), TraceFormatError),
    "no-final-newline": (lambda: _proof()[:-1], TraceFormatError),
    "truncated-base64": (
        lambda: _swap_line(_proof(), 3, _proof().split(b"\n")[3][:-3]),
        TraceFormatError,
    ),
    "hash-not-32-bytes": (
        lambda: _swap_line(_proof(), 3, base64.b64encode(b"x" * 31)),
        TraceFormatError,
    ),
    "non-canonical-base64": (
        lambda: _swap_line(_proof(), 3, _proof().split(b"\n")[3][:-2] + b"B="),
        TraceFormatError,
    ),
    "leading-zero-index": (lambda: _proof().replace(b"index 5", b"index 05"), TraceFormatError),
    "no-index": (lambda: _proof().replace(b"index 5\n", b""), TraceFormatError),
    "wrong-header": (lambda: _proof().replace(b"@v1", b"@v2"), TraceFormatError),
    "no-checkpoint": (lambda: _proof()[: _proof().index(b"\n\n") + 1], TraceFormatError),
    "64-hashes": (
        lambda: _proof().replace(
            b"index 5\n", b"index 5\n" + b"\n".join([base64.b64encode(bytes(32))] * 64) + b"\n"
        ),
        TraceFormatError,
    ),
    "index-past-size": (lambda: _proof().replace(b"index 5", b"index 11"), InvalidProofError),
    "another-index": (lambda: _proof().replace(b"index 5", b"index 4"), InvalidProofError),
    "another-tree-same-size": (
        lambda: _proof()[: _proof().index(b"\n\n") + 2] + note(11, data=OTHER_TRACE),
        InvalidProofError,
    ),
    "one-hash-changed": (
        lambda: _swap_line(_proof(), 3, base64.b64encode(bytes(32))),
        InvalidProofError,
    ),
    "a-hash-dropped": (
        lambda: _swap_line(_proof(), 3, b"").replace(b"\n\n", b"\n", 1),
        InvalidProofError,
    ),
    "unsigned-checkpoint": (
        lambda: _proof()[: _proof().index(b"\n\n") + 2] + note(11, signers=()),
        SignatureError,
    ),
    "signed-by-unknown-key-only": (
        lambda: _proof()[: _proof().index(b"\n\n") + 2] + note(11, signers=(OTHER,)),
        SignatureError,
    ),
    "key-hint-collision": (lambda: _collide(_proof()), SignatureError),
    "duplicate-line-forged-second": (
        lambda: _collide(_proof()).replace(
            b"\n\xe2\x80\x94", b"\n" + _proof().rsplit(b"\n", 2)[1] + b"\n\xe2\x80\x94"
        ),
        SignatureError,
    ),
    "signature-crlf": (lambda: _proof()[:-1] + b"\r\n", TraceFormatError),
    "signature-no-final-newline": (lambda: _proof()[:-1], TraceFormatError),
    "checkpoint-truncated-base64-root": (
        lambda: _proof().replace(
            base64.b64encode(bytes.fromhex(read_checkpoint(TRACE).root)),
            base64.b64encode(bytes.fromhex(read_checkpoint(TRACE).root))[:-4],
        ),
        SignatureError,
    ),
    "consistency-old-leading-zero": (
        lambda: _consistency().replace(b"old 6", b"old 06"),
        TraceFormatError,
    ),
    "consistency-crlf": (lambda: _consistency().replace(b"\n", b"\r\n"), TraceFormatError),
    "consistency-old-size-wrong": (
        lambda: _consistency().replace(b"old 6", b"old 5"),
        InvalidProofError,
    ),
    "consistency-another-tree": (
        lambda: _consistency()[: _consistency().index(b"\n\n") + 2] + note(11, data=OTHER_TRACE),
        InvalidProofError,
    ),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_or_false_proof_is_refused_with_its_error(name: str) -> None:
    """Each variant raises its one documented error (never accepted, never another exception)."""
    make, expected = MALFORMED[name]
    data = make()
    old = note(6) if data.startswith(b"old ") else None
    with pytest.raises(expected):
        check_proof_file(data, KEYS, where="p", digest=None, old_checkpoint=old)


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_the_auditor_command_answers_each_in_one_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`twinflow-trace prove-check`: exit 1 for a false proof, 2 for a malformed one, one line."""
    make, expected = MALFORMED[name]
    data = make()
    (tmp_path / "p").write_bytes(data)
    (tmp_path / "lab.pub").write_text(LAB.verifier.text + "\n")
    (tmp_path / "old.note").write_bytes(note(6))
    old = ["--old-checkpoint", str(tmp_path / "old.note")] if data.startswith(b"old ") else []
    code = main(["prove-check", str(tmp_path / "p"), "--key", str(tmp_path / "lab.pub"), *old])
    err = capsys.readouterr().err.strip().splitlines()
    failed = expected in (InvalidProofError, SignatureError)
    assert (1 if failed else 2, 1) == (code, len(err)), err
    assert "Traceback" not in err[0]


def test_a_duplicated_valid_signature_line_counts_once() -> None:
    """The same valid line twice is one signer (as Go and C2SP read it), never two."""
    data = _proof()
    line = data.rsplit(b"\n", 2)[1]
    checked = check_proof_file(data + line + b"\n", KEYS, where="p")
    assert 1 == len(checked.checkpoint.signed_by)


def test_a_hundred_megabyte_file_is_refused_without_reading_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A huge (sparse) file: exit 2, one line, at most a megabyte read."""
    big = tmp_path / "big.tlog-proof"
    with big.open("wb") as f:
        f.write(b"c2sp.org/tlog-proof@v1\n")
        f.truncate(100 * 1024 * 1024)
    (tmp_path / "lab.pub").write_text(LAB.verifier.text + "\n")
    code = main(["prove-check", str(big), "--key", str(tmp_path / "lab.pub")])
    err = capsys.readouterr().err.strip().splitlines()
    assert (2, 1) == (code, len(err)), err


def test_the_digest_is_given_hashed_from_the_event_file_or_read_from_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--digest, --event (sha256 of the file) and the extra line all check; another event fails."""
    (tmp_path / "p").write_bytes(_proof())
    (tmp_path / "lab.pub").write_text(LAB.verifier.text + "\n")
    line = TRACE.splitlines()[5]
    (tmp_path / "e5.json").write_bytes(line[len(b'{"digest":"') + 64 + len(b'","event":') : -1])
    (tmp_path / "e4.json").write_bytes(b"{}")
    argv = ["prove-check", str(tmp_path / "p"), "--key", str(tmp_path / "lab.pub")]
    outcomes = [
        main([*argv, "--digest", digest(5).hex()]),
        main([*argv, "--event", str(tmp_path / "e5.json")]),
        main(argv),
        main([*argv, "--event", str(tmp_path / "e4.json")]),
        main([*argv, "--digest", "XY" * 32]),
    ]
    out = capsys.readouterr().out
    assert [0, 0, 0, 1, 2] == outcomes
    assert hashlib.sha256((tmp_path / "e5.json").read_bytes()).hexdigest() in out
    assert "from the proof's extra line" in out


def test_an_unsigned_proof_checks_without_keys_and_says_unsigned() -> None:
    """A proof carrying the note body alone checks with no key; its line says UNSIGNED; a key
    given asks for a signature it does not have."""
    data = prove_tlog_inclusion(TRACE, 2, note(5, signers=())).to_bytes()
    checked = check_proof_file(data, [], where="p")
    assert ((), True) == (checked.checkpoint.signed_by, "UNSIGNED" in checked.summary())
    with pytest.raises(SignatureError):
        check_proof_file(data, KEYS, where="p")


def test_a_proof_for_another_log_is_refused_unless_that_origin_is_expected() -> None:
    """The checkpoint's origin must be the key's name, or the --origin given."""
    root = bytes.fromhex(read_checkpoint(TRACE, 5).root)
    body = CheckpointBody("example.org/elsewhere", 5, root)
    cp = sign_checkpoint_note(body, [LAB])
    data = prove_tlog_inclusion(TRACE, 2, cp).to_bytes()
    with pytest.raises(SignatureError, match="elsewhere"):
        check_proof_file(data, KEYS, where="p")
    assert (
        5
        == check_proof_file(
            data, KEYS, where="p", origin="example.org/elsewhere"
        ).checkpoint.checkpoint.size
    )
