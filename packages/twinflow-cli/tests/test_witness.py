"""Witnesses: cosign only what extends what was cosigned, refuse forks, and a verify policy."""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path

import pytest
from cli_testkit import run_trace

from twinflow.cli._main import main
from twinflow.kernel import SystemClock
from twinflow.kernel._process import ProcessResult, run_process, start_process
from twinflow.trace import SignatureError
from twinflow.trace._canonical import canonical_bytes
from twinflow.trace._keys import generate_key, parse_signer_key, parse_verifier_key
from twinflow.trace._note import open_note, parse_note, sign_note
from twinflow.trace._testing import events_of, rechain
from twinflow.trace._witness import CosignerKey, add_checkpoint, cosign, hold_state


def twinflow(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object], str]:
    """Run `twinflow ARGV --json` in-process: exit code, JSON document, stderr."""
    code = main([*argv, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out else {}, captured.err


def ok(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    """Run a step that must succeed; its JSON document."""
    code, doc, err = twinflow(capsys, *argv)
    assert 0 == code, err
    return doc


@pytest.fixture
def work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Path:
    """A log (lab) with a 5-event and a 15-event trace, a fork of each, two witnesses' keys."""
    monkeypatch.chdir(tmp_path)
    longer = run_trace(3)
    short = longer[: len(run_trace(1))]
    forked = rechain(
        [e if e["seq"] != 1 else {**e, "at": "2026-01-01T00:00:09Z"} for e in events_of(longer)]
    )
    (tmp_path / "short.jsonl").write_bytes(short)
    (tmp_path / "long.jsonl").write_bytes(longer)
    (tmp_path / "fork-short.jsonl").write_bytes(forked[: len(short)])
    (tmp_path / "fork-long.jsonl").write_bytes(forked)
    ok(capsys, "keygen", "example.org/lab", "--out", "lab")
    ok(capsys, "keygen", "example.org/other", "--out", "other")
    for name in ("w1", "w2"):
        ok(capsys, "keygen", f"example.org/{name}", "--cosigner", "--out", name)
    for trace in ("short", "long", "fork-short", "fork-long"):
        ok(capsys, "checkpoint", f"{trace}.jsonl", "--sign", "lab.key", "--out", f"{trace}.note")
    return tmp_path


def request(
    capsys: pytest.CaptureFixture[str], trace: str, old: int, note: str | None = None
) -> str:
    """`prove TRACE --from-size OLD --checkpoint NOTE`: the witness's request file."""
    out = f"{trace}-from-{old}.tlog-consistency"
    ok(
        capsys,
        "prove",
        f"{trace}.jsonl",
        "--from-size",
        str(old),
        "--checkpoint",
        note or f"{trace}.note",
        "--out",
        out,
    )
    return out


def witness(
    capsys: pytest.CaptureFixture[str], req: str, who: str = "w1", *more: str
) -> tuple[int, dict[str, object], str]:
    """`twinflow witness REQ` as witness WHO (state WHO.state) following the lab's log."""
    return twinflow(
        capsys,
        "witness",
        req,
        "--state",
        f"state/{who}.state",
        "--key",
        f"{who}.key",
        "--log",
        "lab.pub",
        *more,
    )


def test_cosigns_an_extension_then_refuses_a_fork(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """5 from 0, then 15 from 5: cosigned; a forked 15 (same size, other root) or a proof from a
    forked prefix: refused, exit 1, saying fork, the state unchanged."""
    first = witness(capsys, request(capsys, "short", 0), "w1", "--out", "short.cosigned.note")
    second = witness(capsys, request(capsys, "long", 5), "w1", "--out", "long.cosigned.note")
    assert [(0, 0, 5), (0, 5, 15)] == [(c, d["old_size"], d["size"]) for c, d, _ in (first, second)]
    state = (work / "state" / "w1.state").read_bytes()
    same_size = witness(capsys, request(capsys, "fork-long", 15))
    from_prefix = witness(capsys, request(capsys, "fork-long", 5))
    # fork-short's first 5 events are not short's: its proof from 5 to 15 cannot hold for short.
    assert (1, "not-consistent") == (same_size[0], same_size[1]["reason"])
    assert 1 == from_prefix[0]
    assert "refusing to cosign a fork" in same_size[2]
    assert state == (work / "state" / "w1.state").read_bytes()


def test_a_forked_prefix_is_refused_at_the_first_extension(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A witness at short (5) refuses fork-long's 15 with a proof from 5: the prefixes differ."""
    assert 0 == witness(capsys, request(capsys, "short", 0))[0]
    code, doc, err = witness(capsys, request(capsys, "fork-long", 5))
    assert (1, "not-consistent") == (code, doc["reason"])
    assert 1 == len(err.strip().splitlines())


def test_a_proof_from_another_size_is_a_conflict(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After cosigning 5, a request from 0 is refused naming 5 (tlog-witness's 409)."""
    assert 0 == witness(capsys, request(capsys, "short", 0))[0]
    code, doc, err = witness(capsys, request(capsys, "long", 0))
    assert (1, "old-size-mismatch", 5) == (code, doc["reason"], doc["cosigned_size"])
    assert "make the proof from size 5" in err


def test_only_the_logs_it_follows_signed_by_their_keys(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log it does not follow (404) and a note for the lab signed by another key (403): exit 1."""
    ok(capsys, "checkpoint", "short.jsonl", "--sign", "other.key", "--out", "other.note")
    ok(
        capsys,
        "checkpoint",
        "short.jsonl",
        "--sign",
        "other.key",
        "--origin",
        "example.org/lab",
        "--out",
        "mislabelled.note",
    )
    unknown = witness(capsys, request(capsys, "short", 0, "other.note"))
    (work / "short-from-0.tlog-consistency").unlink()
    forged = witness(capsys, request(capsys, "short", 0, "mislabelled.note"))
    assert [(1, "unknown-log"), (1, "not-signed")] == [
        (c, d["reason"]) for c, d, _ in (unknown, forged)
    ]
    assert not (work / "state" / "w1.state").exists()


def test_verify_holds_a_quorum_of_witnesses(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """w1 then w2 cosign: verify with both (quorum 2) ok and names them; with w2 missing, 2 of 2 fails."""
    witness(capsys, request(capsys, "short", 0), "w1", "--out", "w1.note")
    both_req = "both.tlog-consistency"
    (work / both_req).write_bytes(b"old 0\n\n" + (work / "w1.note").read_bytes())
    assert 0 == witness(capsys, both_req, "w2", "--out", "both.note")[0]
    base = (
        "verify",
        "short.jsonl",
        "--key",
        "lab.pub",
        "--witness",
        "w1.pub",
        "--witness",
        "w2.pub",
    )
    code, doc, _ = twinflow(capsys, *base, "--checkpoint", "both.note")
    assert (0, ["example.org/w1", "example.org/w2"]) == (
        code,
        [str(c["witness"]).split("+")[0] for c in doc["cosigned_by"]],  # type: ignore[attr-defined]  # JSON list of objects
    )
    one = twinflow(capsys, *base, "--checkpoint", "w1.note")
    one_of_two = twinflow(capsys, *base, "--checkpoint", "w1.note", "--quorum", "1")
    assert (1, 0) == (one[0], one_of_two[0])
    assert "cosigned by 1 of the witnesses given, 2 required" in one[2]


DASH = "— ".encode()


def _cosigned_variants(note: bytes, work: Path) -> dict[str, bytes]:
    """A cosigned note, damaged the ways a hostile publisher or a bad copy would."""
    parsed = parse_note(note)
    line = note.rstrip(b"\n").rsplit(b"\n", 1)[1]
    name, data = line[len(DASH) :].split(b" ")
    raw = base64.b64decode(data)
    signer = parse_signer_key((work / "w1.key").read_bytes())
    future = int(SystemClock().now().timestamp()) + 86_400
    text = parsed.text

    def swap(new_raw: bytes) -> bytes:
        return note.replace(data, base64.b64encode(new_raw))

    return {
        "crlf": note.replace(b"\n", b"\r\n"),
        "no final newline": note[:-1],
        "truncated base64": note.replace(data, data[:-4]),
        "no timestamp (64 bytes)": swap(raw[:4] + raw[12:]),
        "timestamp changed": swap(
            raw[:4] + (int.from_bytes(raw[4:12], "big") + 1).to_bytes(8, "big") + raw[12:]
        ),
        "timestamp zero": swap(raw[:4] + bytes(8) + raw[12:]),
        "key-hint collision": swap(raw[:12] + bytes(64)),
        "duplicate line, one forged": note
        + DASH
        + name
        + b" "
        + base64.b64encode(raw[:12] + bytes(64))
        + b"\n",
        "future timestamp": text.encode()
        + b"\n"
        + note.split(b"\n\n", 1)[1].split(b"\n")[0]
        + b"\n"
        + cosign(text, signer, future).line.encode()
        + b"\n",
        "unknown key only": note.replace(name + b" ", b"example.org/w9 "),
        "100 MB": note + b"x" * (100 * 1024 * 1024),
    }


def test_bad_cosignatures_are_one_line_never_accepted(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each damaged or forged cosignature: verify exits 1 or 2 with one line, no traceback."""
    witness(capsys, request(capsys, "short", 0), "w1", "--out", "good.note")
    outcomes = {}
    for name, data in _cosigned_variants((work / "good.note").read_bytes(), work).items():
        (work / "bad.note").write_bytes(data)
        code, _, err = twinflow(
            capsys,
            "verify",
            "short.jsonl",
            "--checkpoint",
            "bad.note",
            "--key",
            "lab.pub",
            "--witness",
            "w1.pub",
        )
        outcomes[name] = (
            code in (1, 2),
            1 == len(err.strip().splitlines()),
            "Traceback" not in err,
        )
    assert {name: (True, True, True) for name in outcomes} == outcomes


def _state_variants(good: bytes) -> dict[str, bytes]:
    return {
        "crlf": good.replace(b"\n", b"\r\n"),
        "no final newline": good[:-1],
        "truncated": good[: len(good) // 2] + b"\n",
        "not canonical": good.replace(b":", b": ", 1),
        "duplicate member": good.replace(b'{"format"', b'{"format":"x","format"', 1),
        "unknown member": good.replace(b'{"format"', b'{"extra":1,"format"', 1),
        "bad root": good.replace(b'"root_hex":"', b'"root_hex":"zz', 1),
        "negative size": good.replace(b'"size":', b'"size":-', 1),
        "not json": b"\xff\xfe\n",
        "100 MB": good[:-1] + b" " * (100 * 1024 * 1024) + b"\n",
    }


def test_a_damaged_state_cosigns_nothing(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each damaged state file: exit 2, one line, the file untouched, nothing cosigned."""
    assert 0 == witness(capsys, request(capsys, "short", 0))[0]
    req = request(capsys, "long", 5)
    good = (work / "state" / "w1.state").read_bytes()
    outcomes = {}
    for name, data in _state_variants(good).items():
        (work / "state" / "w1.state").write_bytes(data)
        code, _, err = witness(capsys, req, "w1", "--out", f"{name}.note")
        outcomes[name] = (
            code,
            1 == len(err.strip().splitlines()),
            data == (work / "state" / "w1.state").read_bytes(),
            (work / f"{name}.note").exists(),
        )
    assert {name: (2, True, True, False) for name in outcomes} == outcomes


def test_bad_requests_are_refused(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A CRLF, cut, truncated-base64 or 100 MB request: exit 2, one line, nothing cosigned."""
    good = (work / request(capsys, "long", 5)).read_bytes()
    first_hash = good.split(b"\n")[1]
    variants = {
        "crlf": good.replace(b"\n", b"\r\n"),
        "no final newline": good[:-1],
        "truncated base64": good.replace(first_hash, first_hash[:-4], 1),
        "100 MB": good + b"x" * (100 * 1024 * 1024),
    }
    outcomes = {}
    for name, data in variants.items():
        (work / "bad.req").write_bytes(data)
        code, _, err = witness(capsys, "bad.req")
        outcomes[name] = (code, 1 == len(err.strip().splitlines()))
    assert {name: (2, True) for name in outcomes} == outcomes
    assert not (work / "state" / "w1.state").exists()


def test_a_held_state_refuses_a_second_witness(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """While another process holds the state's directory, the witness cosigns nothing: exit 2."""
    req = request(capsys, "short", 0)
    (work / "state").mkdir()
    with hold_state(work / "state" / "w1.state"):
        code, _, err = witness(capsys, req, "w1", "--out", "held.note")
    assert (2, False, False) == (
        code,
        (work / "held.note").exists(),
        (work / "state" / "w1.state").exists(),
    )
    assert "another witness process is cosigning with this state" in err


# Each witness process: import everything, say it arrived, wait at the gate, then cosign.
_RACER = """
import os, sys
from twinflow.cli._main import main
import twinflow.cli._publish, twinflow.trace._witness
arrive, gate, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(arrive, "wb") as f:
    f.write(b"x")
open(gate, "rb").close()
sys.exit(main(argv))
"""


def test_two_witnesses_at_once_on_one_state_one_wins(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two processes released together at a FIFO barrier cosign 5 and a fork of 5: exactly one
    cosigns, the other is refused (busy, or the fork), and the state holds the winner's root."""
    requests = [request(capsys, "short", 0), request(capsys, "fork-short", 0)]
    roots = [
        parse_note((work / f"{t}.note").read_bytes()).text.split("\n")[2]
        for t in ("short", "fork-short")
    ]
    for round_ in range(3):
        state = f"state{round_}/w.state"
        arrive, gate = work / f"arrive{round_}", work / f"gate{round_}"
        os.mkfifo(arrive)
        os.mkfifo(gate)
        racers = [
            start_process(
                [
                    sys.executable,
                    "-c",
                    _RACER,
                    str(arrive),
                    str(gate),
                    "witness",
                    req,
                    "--state",
                    state,
                    "--key",
                    "w1.key",
                    "--log",
                    "lab.pub",
                    "--json",
                ],
                cwd=work,
            )
            for req in requests
        ]
        arrived = 0
        while arrived < 2:  # each open blocks until a racer opens the FIFO to write
            with open(arrive, "rb") as f:
                arrived += len(f.read())
        with open(gate, "wb"):  # releases every racer waiting to open the gate
            results = [r.wait() for r in racers]
        codes = [r.returncode for r in results]
        assert sorted(codes) in ([0, 1], [0, 2]), [r.stderr for r in results]
        winner = codes.index(0)
        saved = json.loads((work / state).read_bytes())["logs"]["example.org/lab"]
        assert base64.b64decode(roots[winner]).hex() == saved["root_hex"]


def test_the_stdlib_leaf_holds_the_same_policy(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -P -m twinflow.trace verify --witness`: ok with the witness, and names it; the wrong
    witness, or a --now an hour before the cosignature (dated in the future): exit 1."""
    doc = witness(capsys, request(capsys, "short", 0), "w1", "--out", "cosigned.note")[1]
    stamp = doc["timestamp"]
    assert isinstance(stamp, int)
    base = [sys.executable, "-P", "-m", "twinflow.trace", "verify", "short.jsonl"]
    base += ["--checkpoint", "cosigned.note", "--key", "lab.pub"]
    runs = [
        run_process([*base, "--witness", who, "--now", str(now)], cwd=work)
        for who, now in (("w1.pub", stamp), ("w2.pub", stamp), ("w1.pub", stamp - 3600))
    ]
    assert [0, 1, 1] == [r.returncode for r in runs], [r.stderr for r in runs]
    assert "cosigned by example.org/w1+" in runs[0].stdout
    assert "dated in the future, not counted" in runs[2].stderr


def test_a_witness_never_dates_backwards(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A clock reading earlier than the log's last cosignature: refused ("clock"), state kept."""
    signer = parse_signer_key((work / "w1.key").read_bytes())
    logs = [parse_verifier_key((work / "lab.pub").read_bytes())]
    state = work / "state" / "lib.state"
    first = (work / request(capsys, "short", 0)).read_bytes()
    add_checkpoint(first, state=state, signer=signer, logs=logs, now=2_000_000_000)
    kept = state.read_bytes()
    with pytest.raises(SignatureError) as refused:
        add_checkpoint(
            (work / request(capsys, "long", 5)).read_bytes(),
            state=state,
            signer=signer,
            logs=logs,
            now=1_999_999_999,
        )
    assert (("witness_refused", "clock"), kept) == (
        (refused.value.reason, refused.value.problem),
        state.read_bytes(),
    )


def test_a_log_key_is_not_a_witness_key(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--witness lab.pub` (a signed-note key, type 0x01): exit 2 naming keygen --cosigner."""
    witness(capsys, request(capsys, "short", 0), "w1", "--out", "cosigned.note")
    code, _, err = twinflow(
        capsys,
        "verify",
        "short.jsonl",
        "--checkpoint",
        "cosigned.note",
        "--key",
        "lab.pub",
        "--witness",
        "lab.pub",
    )
    assert (2, True) == (code, "keygen NAME --cosigner" in err)


def test_a_crlf_copy_of_a_cosigned_note_says_so(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cosigned note converted to CRLF: exit 2 naming the carriage return (not "unsigned")."""
    witness(capsys, request(capsys, "short", 0), "w1", "--out", "cosigned.note")
    crlf = (work / "cosigned.note").read_bytes().replace(b"\n", b"\r\n")
    (work / "crlf.note").write_bytes(crlf)
    code, _, err = twinflow(
        capsys,
        "verify",
        "short.jsonl",
        "--checkpoint",
        "crlf.note",
        "--key",
        "lab.pub",
        "--witness",
        "w1.pub",
    )
    assert (2, True) == (code, "carriage return" in err)


def test_an_existing_out_is_refused_before_the_state_moves(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--out naming a file that exists: exit 2, one line, file and state untouched; then cosigns."""
    (work / "taken.note").write_bytes(b"mine\n")
    req = request(capsys, "short", 0)
    code, _, err = witness(capsys, req, "w1", "--out", "taken.note")
    assert (2, 1, b"mine\n", False) == (
        code,
        len(err.strip().splitlines()),
        (work / "taken.note").read_bytes(),
        (work / "state" / "w1.state").exists(),
    )
    assert 0 == witness(capsys, req, "w1", "--out", "fresh.note")[0]


def test_an_out_in_a_missing_directory_is_refused_before_the_state_moves(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--out in a directory that does not exist: exit 2 and the state is never created."""
    code, _, err = witness(capsys, request(capsys, "short", 0), "w1", "--out", "no/such.note")
    assert (2, 1, False) == (
        code,
        len(err.strip().splitlines()),
        (work / "state" / "w1.state").exists(),
    )


def test_an_out_that_fails_to_write_after_cosigning_still_prints_the_note(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A write failure the early check cannot see (a name too long): the state has moved, so
    the cosigned note is printed on stdout, exit 2 with one line naming where it is."""
    out = "n" * 250 + ".note"  # the name passes, its temporary sibling's is too long
    code = main(["witness", request(capsys, "short", 0), "--state", "state/w1.state",
                 "--key", "w1.key", "--log", "lab.pub", "--out", out])  # fmt: skip
    captured = capsys.readouterr()
    note = parse_note("\n".join(captured.out.splitlines()[2:]).encode() + b"\n")
    assert (2, 1, "example.org/w1") == (
        code,
        len(captured.err.strip().splitlines()),
        note.signatures[-1].name,
    )
    assert "printed on stdout" in captured.err


def cli(work: Path, *argv: str) -> ProcessResult:
    """A real `twinflow ARGV` process in ``work``."""
    return run_process([sys.executable, "-m", "twinflow.cli", *argv], cwd=work, timeout=120)


def renamed_key(work: Path, stem: str, name: str, out: str) -> None:
    """What a witness operator could do: the same secret key saved under another name."""
    twin = generate_key(name, parse_signer_key((work / f"{stem}.key").read_bytes()).seed)
    (work / f"{out}.key").write_text(twin.text + "\n")
    (work / f"{out}.pub").write_text(CosignerKey.of_signer(twin).text + "\n")


def test_one_key_under_two_names_is_not_a_quorum(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """w1's key renamed w1b cosigns too: --quorum 2 of w1 and w1b is refused as a configuration
    error (exit 2, naming both) by `twinflow verify` and the stdlib auditor; w1 and w2 pass."""
    renamed_key(work, "w1", "example.org/w1b", "w1b")
    witness(capsys, request(capsys, "short", 0), "w1", "--out", "w1.note")
    (work / "again.tlog-consistency").write_bytes(b"old 0\n\n" + (work / "w1.note").read_bytes())
    assert 0 == witness(capsys, "again.tlog-consistency", "w1b", "--out", "twice.note")[0]
    assert 0 == witness(capsys, "again.tlog-consistency", "w2", "--out", "pair.note")[0]
    policy = ["--key", "lab.pub", "--quorum", "2", "--witness", "w1.pub", "--witness"]
    stdlib = [sys.executable, "-P", "-m", "twinflow.trace", "verify", "short.jsonl"]
    runs = {
        "cli one key": cli(
            work, "verify", "short.jsonl", "--checkpoint", "twice.note", *policy, "w1b.pub"
        ),
        "cli one file twice": cli(
            work, "verify", "short.jsonl", "--checkpoint", "w1.note", *policy, "w1.pub"
        ),
        "stdlib one key": run_process(
            [*stdlib, "--checkpoint", "twice.note", *policy, "w1b.pub"], cwd=work
        ),
        "cli two keys": cli(
            work, "verify", "short.jsonl", "--checkpoint", "pair.note", *policy, "w2.pub"
        ),
        "stdlib two keys": run_process(
            [*stdlib, "--checkpoint", "pair.note", *policy, "w2.pub"], cwd=work
        ),
    }
    assert {
        "cli one key": 2,
        "cli one file twice": 2,
        "stdlib one key": 2,
        "cli two keys": 0,
        "stdlib two keys": 0,
    } == {name: r.returncode for name, r in runs.items()}
    for name in ("cli one key", "stdlib one key"):
        err = runs[name].stderr
        assert (1, True, True) == (
            len(err.strip().splitlines()),
            "example.org/w1+" in err and "example.org/w1b+" in err,
            "one public key" in err,
        ), err


def test_a_signed_note_counts_one_key_under_two_names_once(work: Path) -> None:
    """open_note(required=2) over the lab key and its renamed twin: refused, not two signers."""
    renamed_key(work, "lab", "example.org/lab2", "lab2")
    lab = parse_signer_key((work / "lab.key").read_bytes())
    twin = parse_signer_key((work / "lab2.key").read_bytes())
    note = sign_note("example.org/lab\n1\n" + "A" * 43 + "=\n", [lab, twin])
    with pytest.raises(SignatureError) as refused:
        open_note(note, [lab.verifier, twin.verifier], required=2)
    assert ("ambiguous_key", True) == (refused.value.reason, "one public key" in str(refused.value))


def _edited_states(good: bytes, work: Path) -> dict[str, bytes]:
    """A signed state edited the ways a hand (or a hostile operator) would."""
    value = json.loads(good)
    lab = value["logs"]["example.org/lab"]
    other = generate_key("example.org/w1", bytes(32))  # same name, another key

    def encoded(state: dict[str, object]) -> bytes:
        return canonical_bytes(state) + b"\n"

    resigned = {k: v for k, v in value.items() if k != "signature"}
    resigned["logs"] = {"example.org/lab": {**lab, "size": 0}}
    message = b"twinflow witness state v2\n" + canonical_bytes(resigned)
    return {
        "size rolled back": encoded({**value, "logs": {"example.org/lab": {**lab, "size": 0}}}),
        "log forgotten": encoded({**value, "logs": {}}),
        "root swapped": encoded(
            {**value, "logs": {"example.org/lab": {**lab, "root_hex": "00" * 32}}}
        ),
        "signature dropped": encoded({k: v for k, v in value.items() if k != "signature"}),
        "re-signed by another key": encoded(
            {**resigned, "signature": base64.b64encode(other.sign(message)).decode()}
        ),
        "downgraded to v1": encoded(
            {"format": "twinflow-witness-state/v1", "logs": {"example.org/lab": {**lab, "size": 0}}}
        ),
    }


def test_an_edited_state_is_refused(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A state edited by hand (size rolled back, log forgotten, re-signed, downgraded): the
    witness refuses it, exit 2, one line, cosigning nothing, the file untouched."""
    assert 0 == witness(capsys, request(capsys, "short", 0))[0]
    good = (work / "state" / "w1.state").read_bytes()
    fork = request(capsys, "fork-long", 0)  # what a rolled-back state would let through
    outcomes = {}
    for name, data in _edited_states(good, work).items():
        (work / "state" / "w1.state").write_bytes(data)
        result = cli(work, "witness", fork, "--state", "state/w1.state", "--key", "w1.key",
                     "--log", "lab.pub", "--out", f"{name}.note")  # fmt: skip
        outcomes[name] = (
            result.returncode,
            1 == len(result.stderr.strip().splitlines()),
            data == (work / "state" / "w1.state").read_bytes(),
            (work / f"{name}.note").exists(),
        )
    assert {name: (2, True, True, False) for name in outcomes} == outcomes


def test_another_witness_state_is_refused(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """w2's state given to w1: exit 2 naming whose state it is; nothing cosigned."""
    assert 0 == witness(capsys, request(capsys, "short", 0), "w2")[0]
    result = cli(work, "witness", request(capsys, "long", 5), "--state", "state/w2.state",
                 "--key", "w1.key", "--log", "lab.pub")  # fmt: skip
    assert (2, True) == (result.returncode, "state of witness 'example.org/w2+" in result.stderr)


def test_an_unsigned_state_is_adopted_only_when_asked(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A v1 (unsigned) state: refused naming --adopt-unsigned-state; with it, the witness goes
    on from the sizes it holds and writes the state back signed."""
    assert 0 == witness(capsys, request(capsys, "short", 0))[0]
    value = json.loads((work / "state" / "w1.state").read_bytes())
    v1 = {"format": "twinflow-witness-state/v1", "logs": value["logs"]}
    (work / "state" / "w1.state").write_bytes(canonical_bytes(v1) + b"\n")
    req = request(capsys, "long", 5)
    base = ["witness", req, "--state", "state/w1.state", "--key", "w1.key", "--log", "lab.pub"]
    refused = cli(work, *base)
    adopted = cli(work, *base, "--adopt-unsigned-state")
    written = json.loads((work / "state" / "w1.state").read_bytes())
    assert (2, 0, "twinflow-witness-state/v2", 15) == (
        refused.returncode,
        adopted.returncode,
        written["format"],
        written["logs"]["example.org/lab"]["size"],
    )
    assert "--adopt-unsigned-state" in refused.stderr
