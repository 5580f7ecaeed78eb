"""The proof story on the command line: signed checkpoints, proofs checked without the trace, repair."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_testkit import run_trace

from twinflow.cli._main import main
from twinflow.trace.testing import events_of, rechain


def twinflow(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object], str]:
    """Run `twinflow ARGV --json` in-process: exit code, JSON document, stderr."""
    code = main([*argv, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out else {}, captured.err


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory holding a finished trace and a longer one that extends it."""
    monkeypatch.chdir(tmp_path)
    longer = run_trace(3)
    short = longer[: len(run_trace(1))]
    (tmp_path / "short.jsonl").write_bytes(short)
    (tmp_path / "long.jsonl").write_bytes(longer)
    return tmp_path


def test_signed_checkpoint_verifies_and_catches_a_rewrite(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """keygen, checkpoint --sign, verify --key: ok; a rewritten trace, a wrong key or none: refused."""
    assert 0 == twinflow(capsys, "keygen", "example.org/lab", "--out", "lab")[0]
    assert 0 == twinflow(capsys, "keygen", "example.org/other", "--out", "other")[0]
    assert 0o600 == (work / "lab.key").stat().st_mode & 0o777
    code, doc, _ = twinflow(
        capsys, "checkpoint", "short.jsonl", "--sign", "lab.key", "--out", "cp.note"
    )
    assert (0, "example.org/lab\n") == (code, str(doc["note"]).split("\n", 1)[0] + "\n")
    ok = twinflow(capsys, "verify", "short.jsonl", "--checkpoint", "cp.note", "--key", "lab.pub")
    wrong = twinflow(
        capsys, "verify", "short.jsonl", "--checkpoint", "cp.note", "--key", "other.pub"
    )
    none = twinflow(capsys, "verify", "short.jsonl", "--checkpoint", "cp.note")
    rewritten = run_trace(1).replace(b'"hello"', b'"HELLO"')
    # Re-chain the rewrite the way a forger would: every digest and prev recomputed.
    (work / "forged.jsonl").write_bytes(rechain(events_of(rewritten)))
    forged_alone = twinflow(capsys, "verify", "forged.jsonl")
    forged = twinflow(
        capsys, "verify", "forged.jsonl", "--checkpoint", "cp.note", "--key", "lab.pub"
    )
    assert (0, 1, 2) == (ok[0], wrong[0], none[0])
    assert (0, 1) == (forged_alone[0], forged[0])
    assert "checkpoint" == forged[1]["problem"]["kind"]  # type: ignore[index]  # the --json payload is JSON


def test_cosigned_checkpoint_needs_every_key_given(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A checkpoint signed by two keys verifies with both; one signer alone does not satisfy two keys."""
    for name in ("a", "b"):
        twinflow(capsys, "keygen", f"example.org/{name}", "--out", name)
    twinflow(
        capsys,
        "checkpoint",
        "short.jsonl",
        "--sign",
        "a.key",
        "--sign",
        "b.key",
        "--out",
        "both.note",
    )
    twinflow(capsys, "checkpoint", "short.jsonl", "--sign", "a.key", "--out", "one.note")
    both = twinflow(
        capsys,
        "verify",
        "short.jsonl",
        "--checkpoint",
        "both.note",
        "--key",
        "a.pub",
        "--key",
        "b.pub",
    )
    one = twinflow(
        capsys,
        "verify",
        "short.jsonl",
        "--checkpoint",
        "one.note",
        "--key",
        "a.pub",
        "--key",
        "b.pub",
    )
    assert (0, 1) == (both[0], one[0])


def test_inclusion_proof_is_checked_without_the_trace(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """prove --seq writes a proof file; prove --check verifies it against the checkpoint alone."""
    twinflow(capsys, "checkpoint", "long.jsonl", "--out", "cp.json")
    assert 0 == twinflow(capsys, "prove", "long.jsonl", "--seq", "3", "--out", "p.json")[0]
    (work / "long.jsonl").unlink()
    ok = twinflow(capsys, "prove", "--check", "p.json", "--checkpoint", "cp.json")
    proof = json.loads((work / "p.json").read_text())
    proof["seq"] = 4
    (work / "bad.json").write_text(json.dumps(proof))
    bad = twinflow(capsys, "prove", "--check", "bad.json", "--checkpoint", "cp.json")
    assert (0, 1) == (ok[0], bad[0])


def test_a_later_checkpoint_is_proved_to_extend_an_earlier_one(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """prove --from-size writes a consistency proof; --check with both checkpoints verifies it."""
    twinflow(capsys, "checkpoint", "short.jsonl", "--out", "old.json")
    twinflow(capsys, "checkpoint", "long.jsonl", "--out", "new.json")
    size = json.loads((work / "old.json").read_text())["size"]
    assert (
        0 == twinflow(capsys, "prove", "long.jsonl", "--from-size", str(size), "--out", "c.json")[0]
    )
    ok = twinflow(
        capsys,
        "prove",
        "--check",
        "c.json",
        "--checkpoint",
        "new.json",
        "--old-checkpoint",
        "old.json",
    )
    swapped = twinflow(
        capsys,
        "prove",
        "--check",
        "c.json",
        "--checkpoint",
        "old.json",
        "--old-checkpoint",
        "new.json",
    )
    (work / "other.jsonl").write_bytes(
        rechain(events_of(run_trace(3).replace(b'"hello"', b'"howdy"')))
    )
    twinflow(capsys, "checkpoint", "other.jsonl", "--out", "other.json")
    foreign = twinflow(
        capsys,
        "prove",
        "--check",
        "c.json",
        "--checkpoint",
        "other.json",
        "--old-checkpoint",
        "old.json",
    )
    assert (0, 1, 1) == (ok[0], swapped[0], foreign[0])


def test_repair_moves_a_torn_line_and_the_trace_verifies(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """twinflow repair moves the torn bytes to TRACE.partial; the rest verifies."""
    data = (work / "long.jsonl").read_bytes()
    (work / "long.jsonl").write_bytes(data[:-25])
    code, doc, _ = twinflow(capsys, "repair", "long.jsonl")
    torn = len(data.splitlines(keepends=True)[-1]) - 25
    assert (0, torn) == (code, doc["moved_bytes"])
    assert 0 == twinflow(capsys, "verify", "long.jsonl", "--allow-incomplete")[0]


def test_an_hmac_key_file_is_used_as_written(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI and the API sign with the same bytes: a key file's newline is part of the key."""
    from twinflow.trace import Checkpoint, read_checkpoint, sign_checkpoint

    (work / "k").write_bytes(b"secret\n")
    (work / "empty").write_bytes(b"")
    code, doc, _ = twinflow(capsys, "checkpoint", "short.jsonl", "--key-file", "k")
    api = sign_checkpoint(read_checkpoint(work / "short.jsonl"), b"secret\n")
    empty = twinflow(capsys, "checkpoint", "short.jsonl", "--key-file", "empty")
    assert (0, api.signature, 2) == (code, doc["signature"], empty[0])
    assert isinstance(api, Checkpoint)


def test_verify_help_states_the_threat_model(capsys: pytest.CaptureFixture[str]) -> None:
    """`twinflow verify --help` says what a chain proves, what needs a checkpoint, how to publish."""
    with pytest.raises(SystemExit) as done:
        main(["verify", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert 0 == done.value.code
    for phrase in (
        "not edited by accident or in part",
        "a full rewrite or a truncation",
        "anyone who can check it can forge it",
        "to publish a run so a stranger can check it",
    ):
        assert phrase in text


def test_a_prefix_checkpoint_fails_verify_unless_the_tail_is_accepted(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A checkpoint of the first n events of a longer trace: exit 1 naming what it covers; with
    --allow-unsigned-tail exit 0, and the line and --json say which events are signed, by whom."""
    twinflow(capsys, "keygen", "example.org/lab", "--out", "lab")
    twinflow(capsys, "checkpoint", "short.jsonl", "--sign", "lab.key", "--out", "cp.note")
    n = len((work / "short.jsonl").read_bytes().splitlines())
    total = len((work / "long.jsonl").read_bytes().splitlines())
    tail = (work / "long.jsonl").read_bytes()[len((work / "short.jsonl").read_bytes()) :]
    (work / "forged.jsonl").write_bytes(
        (work / "short.jsonl").read_bytes() + tail.replace(b'"hi"', b'"FORGED"')
    )
    (work / "forged.jsonl").write_bytes(rechain(events_of((work / "forged.jsonl").read_bytes())))
    argv = ["--checkpoint", "cp.note", "--key", "lab.pub"]
    key = "+".join((work / "lab.pub").read_text().split("+")[:2])
    for trace in ("long.jsonl", "forged.jsonl"):
        code, doc, err = twinflow(capsys, "verify", trace, *argv)
        assert 1 == code, err
        assert f"events 0-{n - 1} of {total}" in str(doc["problem"]), doc
        code, doc, _ = twinflow(capsys, "verify", trace, *argv, "--allow-unsigned-tail")
        assert (0, f"events 0-{n - 1} of {total}", [key], n) == (
            code,
            doc["coverage"],
            doc["signed_by"],
            doc["covered"],
        )
    assert 0 == main(["verify", "forged.jsonl", *argv, "--allow-unsigned-tail"])
    out = capsys.readouterr().out
    assert f"signed by {key}: events 0-{n - 1} of {total}" in out, out
    assert f"events {n}-{total - 1} are NOT vouched for" in out, out
    code, doc, _ = twinflow(capsys, "verify", "short.jsonl", *argv)
    assert (0, f"events 0-{n - 1} of {n}", [key], "hex") == (
        code,
        doc["coverage"],
        doc["signed_by"],
        doc["root_encoding"],
    )


def test_a_note_signed_for_another_origin_is_refused_unless_expected(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The note's origin must be the one expected (--origin, else the key's name)."""
    twinflow(capsys, "keygen", "example.org/lab", "--out", "lab")
    twinflow(
        capsys,
        "checkpoint",
        "short.jsonl",
        "--sign",
        "lab.key",
        "--origin",
        "example.org/someone-else",
        "--out",
        "cp.note",
    )
    argv = ["verify", "short.jsonl", "--checkpoint", "cp.note", "--key", "lab.pub"]
    code, _, err = twinflow(capsys, *argv)
    assert (1, 1) == (code, len(err.strip().splitlines())), err
    assert "example.org/someone-else" in err
    assert 0 == twinflow(capsys, *argv, "--origin", "example.org/someone-else")[0]
    assert 1 == twinflow(capsys, *argv, "--origin", "example.org/third")[0]


def test_prove_check_reads_the_signed_note_and_names_its_signer(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The note `checkpoint --sign` writes is the checkpoint `prove --check` reads (with --key)."""
    twinflow(capsys, "keygen", "example.org/lab", "--out", "lab")
    twinflow(capsys, "keygen", "example.org/other", "--out", "other")
    twinflow(capsys, "checkpoint", "short.jsonl", "--sign", "lab.key", "--out", "cp.note")
    assert 0 == twinflow(capsys, "prove", "short.jsonl", "--seq", "1", "--out", "p.json")[0]
    check = ["prove", "--check", "p.json", "--checkpoint", "cp.note"]
    code, doc, _ = twinflow(capsys, *check, "--key", "lab.pub")
    key = "+".join((work / "lab.pub").read_text().split("+")[:2])
    assert (0, [key]) == (code, doc["signed_by"])
    assert 2 == twinflow(capsys, *check)[0]  # a signature is never passed over unchecked
    assert 1 == twinflow(capsys, *check, "--key", "other.pub")[0]
