"""`python -m twinflow.trace verify`: the auditor's command, its exit codes and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from twinflow.trace import read_checkpoint, verify_trace
from twinflow.trace.__main__ import main
from twinflow.trace._keys import generate_key, parse_verifier_key
from twinflow.trace._note import CheckpointBody, sign_checkpoint_note
from twinflow.trace._testing import rechain, small_events
from twinflow.trace._testing import small_trace as trace


@pytest.fixture
def signed(tmp_path: Path) -> Path:
    """A trace, an old JSON checkpoint, an unsigned note, one signed by one key, two verifier keys."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(trace(6))
    checkpoint = verify_trace(path).checkpoint
    (tmp_path / "cp.json").write_text(str(checkpoint.to_json()).replace("'", '"'))
    (tmp_path / "cp.body").write_text(checkpoint.note_body("example.org/lab"))
    for name, seed in (("lab", 1), ("other", 2)):
        signer = generate_key(f"example.org/{name}", bytes([seed]) * 32)
        (tmp_path / f"{name}.pub").write_text(signer.verifier.text + "\n")
        if name == "lab":
            body = CheckpointBody(
                "example.org/lab", checkpoint.size, bytes.fromhex(checkpoint.root)
            )
            (tmp_path / "cp.note").write_bytes(sign_checkpoint_note(body, [signer]))
    return tmp_path


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--checkpoint", "cp.body"], 0),
        (["--checkpoint", "cp.json"], 2),
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


def _forged_tail(n: int, keep: int) -> bytes:
    """``n`` events whose events from ``keep`` on are rewritten and the chain recomputed."""
    items: list[dict[str, object]] = []
    for seq, item in enumerate(small_events(n)):
        if seq >= keep:
            body = dict(item["body"])  # type: ignore[call-overload]  # a plain JSON value, a dict here
            item = {**item, "body": {**body, "text": f"forged {seq}"}}
        items.append(item)
    return rechain(items)


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    """A 10-event trace forged after event 4, and a note of the genuine first 5 signed by lab."""
    root = read_checkpoint(trace(10), 5).root
    signer = generate_key("example.org/lab", bytes([1]) * 32)
    (tmp_path / "lab.pub").write_text(signer.verifier.text + "\n")
    body = CheckpointBody("example.org/lab", 5, bytes.fromhex(root))
    (tmp_path / "cp5.note").write_bytes(sign_checkpoint_note(body, [signer]))
    (tmp_path / "cp5.body").write_text(body.text)
    (tmp_path / "forged.jsonl").write_bytes(_forged_tail(10, 5))
    return tmp_path


@pytest.mark.parametrize("checkpoint", ["cp5.note", "cp5.body"])
def test_a_prefix_checkpoint_does_not_vouch_for_a_forged_tail(
    prefix: Path,
    checkpoint: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A checkpoint of events 0-4 against a 10-event trace fails, saying what it covers."""
    monkeypatch.chdir(prefix)
    keys = ["--key", "lab.pub"] if checkpoint.endswith(".note") else []
    code = main(["verify", "forged.jsonl", "--checkpoint", checkpoint, *keys])
    err = capsys.readouterr().err.strip().splitlines()
    assert 1 == code
    assert 1 == len(err) and "events 0-4 of 10" in err[0], err


def test_an_accepted_unsigned_tail_is_named_in_the_ok_line(
    prefix: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--allow-unsigned-tail accepts it, and the ok line names the signer and what is signed."""
    monkeypatch.chdir(prefix)
    argv = ["forged.jsonl", "--checkpoint", "cp5.note", "--key", "lab.pub"]
    code = main(["verify", *argv, "--allow-unsigned-tail"])
    out = capsys.readouterr().out
    key = parse_verifier_key((prefix / "lab.pub").read_bytes())
    assert 0 == code
    assert f"signed by example.org/lab+{key.key_hash:08x}: events 0-4 of 10" in out, out
    assert "root (hex) " in out


@pytest.mark.parametrize(
    ("origin", "args", "expected"),
    [
        ("example.org/other-log", [], 1),
        ("example.org/other-log", ["--origin", "example.org/other-log"], 0),
        ("example.org/lab", ["--origin", "example.org/other-log"], 1),
        ("example.org/lab", [], 0),
    ],
)
def test_a_note_signed_for_another_origin_is_refused(
    tmp_path: Path,
    origin: str,
    args: list[str],
    expected: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The origin must be the expected one (--origin, else the key's name): a foreign log's note fails."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.jsonl").write_bytes(trace(6))
    root = verify_trace(trace(6)).checkpoint.root
    signer = generate_key("example.org/lab", bytes([1]) * 32)
    (tmp_path / "lab.pub").write_text(signer.verifier.text + "\n")
    body = CheckpointBody(origin, 6, bytes.fromhex(root))
    (tmp_path / "cp.note").write_bytes(sign_checkpoint_note(body, [signer]))
    code = main(["verify", "t.jsonl", "--checkpoint", "cp.note", "--key", "lab.pub", *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert (expected, 0 if expected == 0 else 1) == (code, len(err)), err


def test_a_json_checkpoint_is_refused_saying_how_to_make_the_note(
    signed: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The note is the one checkpoint file: JSON (once HMAC-signed or not) is one line, exit 2."""
    monkeypatch.chdir(signed)
    checkpoint = verify_trace(signed / "t.jsonl").checkpoint
    document = {**checkpoint.to_json(), "signature": "ab" * 32}
    (signed / "hmac.json").write_text(json.dumps(document))
    assert 2 == main(["verify", "t.jsonl", "--checkpoint", "hmac.json"])
    err = capsys.readouterr().err.strip().splitlines()
    assert 1 == len(err) and "twinflow checkpoint TRACE" in err[0], err
    assert 0 == main(["verify", "t.jsonl", "--checkpoint", "cp.body"])
    assert 1 == main(["verify", "t.jsonl", "--checkpoint", "cp.body", "--key", "lab.pub"])
