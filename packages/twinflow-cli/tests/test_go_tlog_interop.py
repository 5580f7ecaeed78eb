"""twinflow's proofs against Go's reference, golang.org/x/mod/sumdb/tlog (and sumdb/note).

The Go side is `tests/go/tlogcheck/main.go`: its own small reader of the two proof files, Go's
`note.Open` for the checkpoint inside, `tlog.CheckRecord` / `tlog.CheckTree` for the hashes, and
`tlog.ProveRecord` / `tlog.ProveTree` to make the same proofs from the event digests alone.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from cli_testkit import build_go_tool

from twinflow.kernel._process import run_process
from twinflow.trace import read_checkpoint, walk_trace
from twinflow.trace._keys import generate_key
from twinflow.trace._note import CheckpointBody, sign_checkpoint_note
from twinflow.trace._testing import small_trace
from twinflow.trace._tlog import prove_tlog_consistency, prove_tlog_inclusion

LAB = generate_key("example.org/lab", bytes([7]) * 32)
TRACE = small_trace(13)
DIGESTS = [event.digest for event in walk_trace(TRACE)]


@pytest.fixture(scope="session")
def tlogcheck(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go reference driver, built once for the session."""
    return build_go_tool("tlogcheck", tmp_path_factory.mktemp("go"))


def note(size: int) -> bytes:
    """LAB's signed checkpoint note of the first ``size`` events."""
    root = bytes.fromhex(read_checkpoint(TRACE, size).root)
    return sign_checkpoint_note(CheckpointBody("example.org/lab", size, root), [LAB])


def go(binary: Path, *args: str, stdin: bytes = b"") -> tuple[int, str, str]:
    """Run the Go driver: exit status, stdout, stderr."""
    result = run_process([str(binary), *args], stdin=stdin, timeout=120.0)
    return result.returncode, result.stdout, result.stderr


def test_go_checks_every_tlog_proof_twinflow_makes(tlogcheck: Path, tmp_path: Path) -> None:
    """For every size and seq, Go's CheckRecord accepts the proof; the wrong digest it refuses."""
    for size in range(1, 14):
        cp = note(size)
        for seq in range(size):
            path = tmp_path / f"{size}-{seq}.tlog-proof"
            path.write_bytes(prove_tlog_inclusion(TRACE, seq, cp).to_bytes())
            status, out, err = go(
                tlogcheck, "inclusion", LAB.verifier.text, str(path), DIGESTS[seq]
            )
            assert (0, f"ok example.org/lab {size} {seq}") == (status, out.strip()), err
            other = DIGESTS[(seq + 1) % 13]
            assert 1 == go(tlogcheck, "inclusion", LAB.verifier.text, str(path), other)[0]


def test_go_checks_every_consistency_proof_twinflow_makes(tlogcheck: Path, tmp_path: Path) -> None:
    """For every 1 <= old <= new, Go's CheckTree accepts the proof against the old note."""
    for new in range(1, 14):
        for old in range(1, new + 1):
            path = tmp_path / f"{old}-{new}.tlog-consistency"
            path.write_bytes(prove_tlog_consistency(TRACE, old, note(new)).to_bytes())
            (tmp_path / "old.note").write_bytes(note(old))
            status, out, err = go(
                tlogcheck, "consistency", LAB.verifier.text, str(path), str(tmp_path / "old.note")
            )
            assert (0, f"ok example.org/lab {old} {new}") == (status, out.strip()), err


def test_go_refuses_a_consistency_proof_against_another_old_root(
    tlogcheck: Path, tmp_path: Path
) -> None:
    """A proof from 5 to 13 checked against a note of size 5 of another trace: Go refuses it."""
    (tmp_path / "c").write_bytes(prove_tlog_consistency(TRACE, 5, note(13)).to_bytes())
    body = CheckpointBody("example.org/lab", 5, bytes(32))
    (tmp_path / "old.note").write_bytes(sign_checkpoint_note(body, [LAB]))
    status, _, err = go(
        tlogcheck, "consistency", LAB.verifier.text, str(tmp_path / "c"), str(tmp_path / "old.note")
    )
    assert 1 == status, err


def test_go_makes_the_same_hashes_from_the_digests_alone(tlogcheck: Path) -> None:
    """tlog's TreeHash, ProveRecord and ProveTree over the event digests equal ours, line for line."""
    stdin = "".join(f"{d}\n" for d in DIGESTS).encode()
    for size in range(1, 14):
        root = base64.b64encode(bytes.fromhex(read_checkpoint(TRACE, size).root)).decode()
        for n in range(size):
            status, out, err = go(tlogcheck, "prove", "record", str(size), str(n), stdin=stdin)
            ours = prove_tlog_inclusion(TRACE, n, note(size))
            expected = [root, *(base64.b64encode(h).decode() for h in ours.hashes)]
            assert (0, expected) == (status, out.split()), err
        for n in range(1, size + 1):
            status, out, err = go(tlogcheck, "prove", "tree", str(size), str(n), stdin=stdin)
            consistency = prove_tlog_consistency(TRACE, n, note(size))
            expected = [root, *(base64.b64encode(h).decode() for h in consistency.hashes)]
            assert (0, expected) == (status, out.split()), err
