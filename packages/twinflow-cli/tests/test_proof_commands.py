"""The proof story on the command line: signed checkpoints, proofs checked without the trace, repair."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from cli_testkit import run_trace

from twinflow.cli._main import main
from twinflow.trace._testing import events_of, rechain


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


def test_inclusion_proof_is_a_tlog_proof_checked_without_the_trace(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """prove --seq writes a C2SP tlog-proof carrying the published note; prove --check verifies
    it with the key alone (digest from the event file, given, or the extra line); another seq,
    another event or another key fails."""
    twinflow(capsys, "keygen", "example.org/lab", "--out", "lab")
    twinflow(capsys, "keygen", "example.org/other", "--out", "other")
    twinflow(capsys, "checkpoint", "long.jsonl", "--sign", "lab.key", "--out", "cp.note")
    made = twinflow(
        capsys,
        "prove",
        "long.jsonl",
        "--seq",
        "3",
        "--checkpoint",
        "cp.note",
        "--out",
        "p.tlog-proof",
        "--event-out",
        "e3.json",
    )
    assert 0 == made[0], made
    twinflow(
        capsys,
        "prove",
        "long.jsonl",
        "--seq",
        "4",
        "--checkpoint",
        "cp.note",
        "--out",
        "p4.tlog-proof",
        "--event-out",
        "e4.json",
    )
    text = (work / "p.tlog-proof").read_text()
    assert ("c2sp.org/tlog-proof@v1", "index 3") == (text.split("\n")[0], text.split("\n")[2])
    assert text.endswith((work / "cp.note").read_text())
    (work / "long.jsonl").unlink()
    check = ["prove", "--check", "p.tlog-proof", "--key", "lab.pub"]
    code, doc, _ = twinflow(capsys, *check, "--event", "e3.json")
    key = "+".join((work / "lab.pub").read_text().split("+")[:2])
    assert (0, 3, [key], "hex") == (code, doc["index"], doc["signed_by"], doc["root_encoding"])
    assert 0 == twinflow(capsys, *check, "--digest", str(made[1]["digest"]))[0]
    assert (0, "from the proof's extra line") == (
        twinflow(capsys, *check)[0],
        twinflow(capsys, *check)[1]["digest_from"],
    )
    assert 1 == twinflow(capsys, *check, "--event", "e4.json")[0]
    assert 1 == twinflow(capsys, "prove", "--check", "p.tlog-proof", "--key", "other.pub")[0]
    assert 2 == twinflow(capsys, "prove", "--check", "p.tlog-proof")[0]  # signed: needs --key
    moved = text.replace("index 3", "index 4")
    (work / "moved.tlog-proof").write_text(moved)
    assert 1 == twinflow(capsys, "prove", "--check", "moved.tlog-proof", "--key", "lab.pub")[0]


def test_a_later_checkpoint_is_proved_to_extend_an_earlier_one(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """prove --from-size writes the tlog-witness request body; --check with the old note
    verifies it; swapped checkpoints or another run's old note fail."""
    twinflow(capsys, "keygen", "example.org/lab", "--out", "lab")
    twinflow(capsys, "checkpoint", "short.jsonl", "--sign", "lab.key", "--out", "old.note")
    twinflow(capsys, "checkpoint", "long.jsonl", "--sign", "lab.key", "--out", "new.note")
    size = (work / "old.note").read_text().split("\n")[1]
    made = twinflow(
        capsys,
        "prove",
        "long.jsonl",
        "--from-size",
        size,
        "--checkpoint",
        "new.note",
        "--out",
        "c.tlog-consistency",
    )
    assert 0 == made[0], made
    assert (work / "c.tlog-consistency").read_text().startswith(f"old {size}\n")
    check = ["prove", "--check", "c.tlog-consistency", "--key", "lab.pub"]
    ok = twinflow(capsys, *check, "--old-checkpoint", "old.note")
    twinflow(
        capsys,
        "prove",
        "long.jsonl",
        "--from-size",
        size,
        "--checkpoint",
        "old.note",
        "--out",
        "back.tlog-consistency",
    )
    (work / "other.jsonl").write_bytes(
        rechain(events_of(run_trace(3).replace(b'"hello"', b'"howdy"')))
    )
    twinflow(
        capsys,
        "checkpoint",
        "other.jsonl",
        "--size",
        size,
        "--sign",
        "lab.key",
        "--out",
        "other.note",
    )
    foreign = twinflow(capsys, *check, "--old-checkpoint", "other.note")
    swapped = twinflow(capsys, *check, "--old-checkpoint", "new.note")
    assert (0, 1, 1) == (ok[0], foreign[0], swapped[0])
    assert (int(size), "hex") == (ok[1]["old_size"], ok[1]["root_encoding"])


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


@pytest.mark.parametrize("command", ["checkpoint", "verify"])
def test_an_hmac_key_file_is_refused_saying_what_replaced_it(
    work: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """--key-file (HMAC) is retired: one line naming keygen / --sign / --key, exit 2."""
    (work / "k").write_bytes(b"secret\n")
    code, _, err = twinflow(capsys, command, "short.jsonl", "--key-file", "k")
    assert (2, 1) == (code, len(err.strip().splitlines())), err
    assert "checkpoint TRACE --sign lab.key" in err


def test_checkpoint_writes_the_note_and_json_is_only_a_view(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --sign, --origin writes the unsigned note (the body alone); --out needs a log
    name; --json prints the root labelled hex beside the note."""
    code, doc, _ = twinflow(
        capsys, "checkpoint", "short.jsonl", "--origin", "example.org/lab", "--out", "cp.note"
    )
    lines = (work / "cp.note").read_text().split("\n")
    assert (0, "example.org/lab", "hex") == (code, lines[0], doc["root_encoding"])
    assert doc["root"] == base64.b64decode(lines[2]).hex()
    assert 2 == twinflow(capsys, "checkpoint", "short.jsonl", "--out", "x.note")[0]
    assert 0 == twinflow(capsys, "verify", "short.jsonl", "--checkpoint", "cp.note")[0]


def test_checkpoint_stdout_redirected_is_the_note_itself(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`checkpoint --sign KEY > cp.note` writes the note --out writes; commentary is on stderr."""
    twinflow(capsys, "keygen", "example.org/lab", "--out", "lab")
    twinflow(capsys, "checkpoint", "short.jsonl", "--sign", "lab.key", "--out", "out.note")
    for argv, key in ((["--sign", "lab.key"], ["--key", "lab.pub"]), (["--origin", "x.org"], [])):
        assert 0 == main(["checkpoint", "short.jsonl", *argv])
        captured = capsys.readouterr()
        (work / "redirected.note").write_text(captured.out)
        verified = twinflow(
            capsys, "verify", "short.jsonl", "--checkpoint", "redirected.note", *key
        )
        assert (0, "(root (hex)") == (verified[0], captured.err[:11]), captured
    signed = twinflow(capsys, "checkpoint", "short.jsonl", "--sign", "lab.key")[1]
    assert (work / "out.note").read_text().split("\n")[:3] == str(signed["note"]).split("\n")[:3]


def test_verify_help_states_the_threat_model(capsys: pytest.CaptureFixture[str]) -> None:
    """`twinflow verify --help` says what a chain proves, what needs a checkpoint, how to publish."""
    with pytest.raises(SystemExit) as done:
        main(["verify", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert 0 == done.value.code
    for phrase in (
        "not edited by accident or in part",
        "a full rewrite or a truncation",
        "an unsigned note says nothing about who did",
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


@pytest.mark.parametrize(
    ("name", "expected"),
    [("crlf", 2), ("cut", 2), ("huge", 2), ("json", 2), ("another-tree", 1), ("past-size", 1)],
)
def test_prove_check_answers_bad_proof_files_in_one_line(
    work: Path, capsys: pytest.CaptureFixture[str], name: str, expected: int
) -> None:
    """Malformed proof files exit 2, false ones 1, each with one line and no traceback."""
    twinflow(capsys, "keygen", "example.org/lab", "--out", "lab")
    twinflow(capsys, "checkpoint", "long.jsonl", "--sign", "lab.key", "--out", "cp.note")
    twinflow(
        capsys, "checkpoint", "long.jsonl", "--size", "4", "--sign", "lab.key", "--out", "four.note"
    )
    twinflow(
        capsys,
        "prove",
        "long.jsonl",
        "--seq",
        "2",
        "--checkpoint",
        "cp.note",
        "--out",
        "p.tlog-proof",
    )
    good = (work / "p.tlog-proof").read_bytes()
    head = good[: good.index(b"\n\n") + 2]
    forms = {
        "crlf": lambda: good.replace(b"\n", b"\r\n"),
        "cut": lambda: good[:-1],
        "json": lambda: b'{"kind": "inclusion", "seq": 2}\n',
        "another-tree": lambda: head + (work / "four.note").read_bytes(),
        "past-size": lambda: good.replace(b"index 2", b"index 99"),
    }
    path = work / "bad.tlog-proof"
    if name == "huge":
        with path.open("wb") as f:
            f.write(good)
            f.truncate(100 * 1024 * 1024)
    else:
        path.write_bytes(forms[name]())
    code, doc, err = twinflow(capsys, "prove", "--check", "bad.tlog-proof", "--key", "lab.pub")
    lines = err.strip().splitlines()
    assert (expected, 1, False) == (code, len(lines), doc["ok"]), err
    assert "Traceback" not in err


def test_every_root_a_command_prints_says_its_encoding(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each human line naming a root says (hex) or (base64); each --json root has root_encoding."""
    twinflow(capsys, "keygen", "example.org/lab", "--out", "lab")
    twinflow(
        capsys, "checkpoint", "short.jsonl", "--size", "2", "--sign", "lab.key", "--out", "two.note"
    )
    human = [
        ["checkpoint", "long.jsonl"],
        ["checkpoint", "long.jsonl", "--sign", "lab.key", "--out", "cp.note"],
        ["verify", "long.jsonl", "--checkpoint", "cp.note", "--key", "lab.pub"],
        ["redact", "long.jsonl", "--seq", "1", "--out", "public.jsonl"],
        ["prove", "long.jsonl", "--seq", "2", "--checkpoint", "cp.note", "--out", "p.tlog-proof"],
        ["prove", "--check", "p.tlog-proof", "--key", "lab.pub"],
        [
            "prove",
            "long.jsonl",
            "--from-size",
            "2",
            "--checkpoint",
            "cp.note",
            "--out",
            "c.tlog-consistency",
        ],
        [
            "prove",
            "--check",
            "c.tlog-consistency",
            "--key",
            "lab.pub",
            "--old-checkpoint",
            "two.note",
        ],
        ["diff", "--exact", "long.jsonl", "long.jsonl"],
        ["show", "long.jsonl"],
    ]
    unlabelled = []
    for argv in human:
        assert 0 == main(argv), argv
        for line in capsys.readouterr().out.splitlines():
            if " root" in line.lower() and "(hex)" not in line and "base64" not in line:
                unlabelled.append((argv[0], line))
    assert [] == unlabelled
    for argv in (
        ["checkpoint", "long.jsonl"],
        ["verify", "long.jsonl"],
        ["show", "long.jsonl"],
        ["prove", "--check", "p.tlog-proof", "--key", "lab.pub"],
    ):
        doc = twinflow(capsys, *argv)[1]
        assert "hex" == doc["root_encoding"], argv
