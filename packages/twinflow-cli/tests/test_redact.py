"""twinflow redact: chosen events replaced by their digest; the chain, root and every proof hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_testkit import run_trace

from twinflow.cli._main import main
from twinflow.trace.__main__ import main as auditor


def twinflow(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object], str]:
    """Run `twinflow ARGV --json` in-process: exit code, JSON document, stderr."""
    code = main([*argv, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out else {}, captured.err


@pytest.fixture
def work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Path:
    """A finished trace, a key pair and the trace's signed checkpoint note."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.jsonl").write_bytes(run_trace(1))
    twinflow(capsys, "keygen", "example.org/lab", "--out", "lab")
    twinflow(capsys, "checkpoint", "t.jsonl", "--sign", "lab.key", "--out", "cp.note")
    return tmp_path


def test_a_redacted_trace_keeps_its_root_and_says_which_seqs(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The prompt's event is gone from the file; verify (both verifiers) and the note still pass
    and name seq 1 as redacted; the root is the original's."""
    original = (work / "t.jsonl").read_bytes()
    secret = json.loads(original.splitlines()[1])["event"]
    assert "model_requested" == secret["body"]["kind"]
    code, doc, err = twinflow(capsys, "redact", "t.jsonl", "--seq", "1", "--out", "public.jsonl")
    assert (0, [1]) == (code, doc["redacted"]), err
    public = (work / "public.jsonl").read_bytes()
    event_bytes = original.splitlines()[1][len(b'{"digest":"') + 64 + len(b'","event":') : -1]
    assert (True, False) == (event_bytes in original, event_bytes in public)
    assert original.splitlines()[1][:75] + b'","redacted":true}' == public.splitlines()[1]
    argv = ["public.jsonl", "--checkpoint", "cp.note", "--key", "lab.pub"]
    code, doc, err = twinflow(capsys, "verify", *argv)
    assert (0, [1], "hex") == (code, doc["redacted"], doc["root_encoding"]), err
    assert 0 == main(["verify", *argv])
    assert "seq 1 is redacted (digest only)" in capsys.readouterr().out
    assert 0 == auditor(["verify", *argv])
    assert "seq 1 is redacted (digest only)" in capsys.readouterr().out
    verified = twinflow(capsys, "verify", "t.jsonl")[1]
    assert verified["checkpoint"] == doc["checkpoint"]


def test_every_proof_still_checks_against_the_redacted_trace(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Proofs made from the public trace (of a redacted event, too) check with the key alone,
    and equal the ones made from the original."""
    twinflow(capsys, "redact", "t.jsonl", "--seq", "1", "--seq", "2", "--out", "public.jsonl")
    for seq in range(4):
        for trace in ("t", "public"):
            out = f"{trace}{seq}.tlog-proof"
            event = [] if trace == "public" and seq in (1, 2) else ["--event-out", f"{out}.json"]
            made = twinflow(
                capsys,
                "prove",
                f"{trace}.jsonl",
                "--seq",
                str(seq),
                "--checkpoint",
                "cp.note",
                "--out",
                out,
                *event,
            )
            assert 0 == made[0], made
            checked = twinflow(capsys, "prove", "--check", out, "--key", "lab.pub")
            assert (0, seq) == (checked[0], checked[1]["index"]), checked
        assert (work / f"t{seq}.tlog-proof").read_bytes() == (
            work / f"public{seq}.tlog-proof"
        ).read_bytes()
    refused = twinflow(
        capsys,
        "prove",
        "public.jsonl",
        "--seq",
        "1",
        "--checkpoint",
        "cp.note",
        "--out",
        "x.tlog-proof",
        "--event-out",
        "x.json",
    )
    assert (2, False) == (refused[0], (work / "x.tlog-proof").exists()), refused
    twinflow(
        capsys, "checkpoint", "t.jsonl", "--size", "2", "--sign", "lab.key", "--out", "two.note"
    )
    made = twinflow(
        capsys,
        "prove",
        "public.jsonl",
        "--from-size",
        "2",
        "--checkpoint",
        "cp.note",
        "--out",
        "c.tlog-consistency",
    )
    assert 0 == made[0], made
    checked = twinflow(
        capsys,
        "prove",
        "--check",
        "c.tlog-consistency",
        "--old-checkpoint",
        "two.note",
        "--key",
        "lab.pub",
    )
    assert 0 == checked[0], checked


def test_show_and_readers_that_need_events_say_it_is_redacted(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """show lists the seq as REDACTED and the page marks it; diff (which reads events) refuses
    it by name, exit 1."""
    twinflow(capsys, "redact", "t.jsonl", "--seq", "1", "--out", "public.jsonl")
    assert 0 == main(
        ["show", "public.jsonl", "--html", "p.html", "--checkpoint", "cp.note", "--key", "lab.pub"]
    )
    assert 0 == main(["show", "public.jsonl"])
    out = capsys.readouterr().out
    assert "seq 1: REDACTED" in out and "seq 1 is redacted (digest only)" in out, out
    assert "redacted" in (work / "p.html").read_text()
    code, _, err = twinflow(capsys, "diff", "--exact", "public.jsonl", "t.jsonl")
    assert (1, True) == (code, "redacted at seq 1" in err), err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--seq", "99"], "holds events 0.."),
        (["--seq", "-1"], "holds events 0.."),
        (["--seq", "LAST"], "never redacted"),
    ],
)
def test_bad_redactions_are_refused_and_write_nothing(
    work: Path, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    """A seq outside the trace or the run's terminal event: exit 2, one line, no file."""
    last = str(len((work / "t.jsonl").read_bytes().splitlines()) - 1)
    args = [last if a == "LAST" else a for a in args]
    code, _, err = twinflow(capsys, "redact", "t.jsonl", *args, "--out", "public.jsonl")
    assert (2, 1, True) == (code, len(err.strip().splitlines()), expected in err), err
    assert not (work / "public.jsonl").exists()


def test_a_redacted_trace_can_be_redacted_again(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Redacting more of a public trace keeps the earlier redactions and the root."""
    twinflow(capsys, "redact", "t.jsonl", "--seq", "1", "--out", "a.jsonl")
    code, doc, err = twinflow(capsys, "redact", "a.jsonl", "--seq", "2", "--out", "b.jsonl")
    assert (0, [1, 2]) == (code, doc["redacted"]), err
    assert (
        0 == twinflow(capsys, "verify", "b.jsonl", "--checkpoint", "cp.note", "--key", "lab.pub")[0]
    )
