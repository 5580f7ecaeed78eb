"""`python -m twinflow.trace verify`: the auditor's command, its exit codes and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from twinflow.trace import _note, verify_trace
from twinflow.trace.__main__ import main
from twinflow.trace.testing import small_trace as trace


@pytest.fixture
def signed(tmp_path: Path) -> Path:
    """A trace, its JSON checkpoint, a C2SP note signed by one key, and two verifier keys."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(trace(6))
    checkpoint = verify_trace(path).checkpoint
    (tmp_path / "cp.json").write_text(str(checkpoint.to_json()).replace("'", '"'))
    for name, seed in (("lab", 1), ("other", 2)):
        signer = _note.generate_key(f"example.org/{name}", bytes([seed]) * 32)
        (tmp_path / f"{name}.pub").write_text(signer.verifier.text + "\n")
        if name == "lab":
            body = _note.CheckpointBody(
                "example.org/lab", checkpoint.size, bytes.fromhex(checkpoint.root)
            )
            (tmp_path / "cp.note").write_bytes(_note.sign_checkpoint_note(body, [signer]))
    return tmp_path


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--checkpoint", "cp.json"], 0),
        (["--checkpoint", "cp.note", "--key", "lab.pub"], 0),
        (["--checkpoint", "cp.note", "--key", "other.pub"], 1),
        (["--checkpoint", "cp.note", "--key", "lab.pub", "--key", "other.pub"], 1),
        (["--checkpoint", "cp.note"], 2),
        (["--checkpoint", "cp.json", "--key", "lab.pub"], 2),
        (["--checkpoint", "missing.json"], 2),
    ],
)
def test_exit_codes(
    args: list[str],
    expected: int,
    signed: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """0 verified, 1 a check failed (a key that did not sign), 2 usage; one stderr line on failure."""
    monkeypatch.chdir(signed)
    code = main(["verify", "t.jsonl", *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert (expected, 0 if expected == 0 else 1) == (code, len(err))


def test_a_damaged_trace_exits_1_naming_the_seq(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A problem is one line with its kind and seq."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(trace(5).replace(b"event 3", b"event X"))
    assert 1 == main(["verify", str(path)])
    assert "edited at seq 3" in capsys.readouterr().err
