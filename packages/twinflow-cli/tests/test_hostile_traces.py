"""A hostile-file corpus through every trace command: exit 1 or 2, one line, no traceback.

The commands run in-process through `twinflow.cli._main.main`, so an exception that escaped a
handler would fail the test rather than hide in a child's stderr.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_testkit import run_trace

from twinflow.cli._main import main
from twinflow.trace import verify_trace
from twinflow.trace._format import DEFAULT_MAX_LINE_BYTES
from twinflow.trace._keys import generate_key
from twinflow.trace._note import CheckpointBody, sign_checkpoint_note
from twinflow.trace._testing import framed

SPEC = "prompt: hi\nmodel:\n  url: http://127.0.0.1:9/v1\n"


def first_event_with(body: bytes) -> bytes:
    """A forged first line whose body is ``body`` (raw JSON bytes)."""
    return framed(
        b'{"at":"2026-01-01T00:00:00Z","body":' + body + b',"prev":"' + b"0" * 64 + b'","seq":0}'
    )


def corpus() -> dict[str, bytes]:
    """The hostile files, by name."""
    good = run_trace()
    return {
        "deep": first_event_with(b'{"kind":"run_started","x":' + b"[" * 1000 + b"]" * 1000 + b"}"),
        "deep-unhashed": b'{"digest":"'
        + b"0" * 64
        + b'","event":'
        + b"[" * 1000
        + b"]" * 1000
        + b"}\n",
        "duplicate-key": first_event_with(b'{"kind":"run_started","kind":"run_finished"}'),
        "nan": first_event_with(b'{"kind":"run_started","x":NaN}'),
        "huge-line": b'{"digest":"'
        + b"a" * 64
        + b'","event":"'
        + b"x" * DEFAULT_MAX_LINE_BYTES
        + b'"}\n',
        "non-utf8": first_event_with(b'{"kind":"run_started","x":"\xff\xfe"}'),
        "bom": b"\xef\xbb\xbf" + good,
        "not-an-event": b'{"a":1}\n',
        "forged-not-an-event": framed(b'{"a":1}'),
        "truncated": good[:-30],
        "empty": b"",
        "binary": bytes(range(256)) * 4,
    }


COMMANDS = {
    "verify": ["verify", "{f}"],
    "checkpoint": ["checkpoint", "{f}"],
    "prove": ["prove", "{f}", "--seq", "0", "--origin", "example.org/lab"],
    "prove-consistency": ["prove", "{f}", "--from-size", "0", "--origin", "example.org/lab"],
    "prove-for-the-note": ["prove", "{f}", "--seq", "0", "--checkpoint", "{note}"],
    "diff": ["diff", "{f}", "{f}"],
    "replay": ["replay", "{f}", "--spec", "{spec}"],
    "repair": ["repair", "{f}"],
    "prove-check": ["prove", "--check", "{f}", "--key", "{vkey}"],
    "prove-check-consistency": [
        "prove",
        "--check",
        "{f}",
        "--old-checkpoint",
        "{note}",
        "--key",
        "{vkey}",
    ],
    "verify-checkpoint": ["verify", "{good}", "--checkpoint", "{f}"],
    "verify-signed-checkpoint": ["verify", "{good}", "--checkpoint", "{f}", "--key", "{vkey}"],
    "verify-with-hostile-key": ["verify", "{good}", "--checkpoint", "{note}", "--key", "{f}"],
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The corpus on disk, plus a good trace and a spec."""
    root = tmp_path_factory.mktemp("hostile")
    out = {}
    for name, data in corpus().items():
        out[name] = root / f"{name}.jsonl"
        out[name].write_bytes(data)
    (root / "good.jsonl").write_bytes(run_trace())
    (root / "spec.yaml").write_text(SPEC)
    signer = generate_key("example.org/lab", bytes(range(32)))
    (root / "lab.pub").write_text(signer.verifier.text + "\n")
    checkpoint = verify_trace(root / "good.jsonl").checkpoint
    body = CheckpointBody("example.org/lab", checkpoint.size, bytes.fromhex(checkpoint.root))
    (root / "cp.note").write_bytes(sign_checkpoint_note(body, [signer]))
    return out


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("as_json", [False, True])
def test_every_command_answers_every_hostile_file_with_one_line(
    command: str,
    as_json: bool,
    files: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Exit 1 or 2, exactly one stderr line, and one JSON document on stdout under --json."""
    root = next(iter(files.values())).parent
    for name, original in sorted(files.items()):
        path = tmp_path / original.name
        path.write_bytes(original.read_bytes())  # repair may change its copy, never the corpus
        argv = [
            a.format(
                f=path,
                spec=root / "spec.yaml",
                good=root / "good.jsonl",
                vkey=root / "lab.pub",
                note=root / "cp.note",
            )
            for a in COMMANDS[command]
        ]
        code = main([*argv, *(["--json"] if as_json else [])])
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        if (command, name) == ("repair", "truncated"):
            # The one hostile file repair exists for: the torn line is moved aside, exit 0.
            assert (0, [], 1) == (code, lines, len(list(tmp_path.glob("*.partial")))), captured.err
            continue
        assert (True, 1) == (code in (1, 2), len(lines)), (name, code, captured.err)
        assert "Traceback" not in captured.err
        if as_json:
            assert False is json.loads(captured.out)["ok"], name
        path.unlink()
