"""Run attestations: an in-toto statement in a DSSE envelope, checked by securesystemslib too."""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import rfc8785
from cli_testkit import calc_project, scripted_chat, trace_only_venv
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import CryptoSigner, SSlibKey

from twinflow.cli._main import main
from twinflow.kernel import LoopbackServer
from twinflow.kernel._process import ProcessResult, run_process
from twinflow.trace._attest import PAYLOAD_TYPE, PREDICATE_TYPE, key_id
from twinflow.trace._keys import parse_signer_key, parse_verifier_key


def run(*args: str, cwd: Path, module: str = "twinflow.cli") -> ProcessResult:
    """`python -P -m MODULE ARGS` in a fresh interpreter."""
    return run_process(
        [sys.executable, "-P", "-m", module, *args],
        cwd=cwd,
        env={"PYTHONDONTWRITEBYTECODE": "1"},
        timeout=300,
    )


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A real run (tool module beside its spec), a lab key, its signed checkpoint and attestation."""
    root = tmp_path_factory.mktemp("attest")
    with LoopbackServer(scripted_chat) as server:
        calc_project(root, server.url)
        for _ in range(2):  # trace.jsonl, and another run's trace.1.jsonl
            made = run("run", "spec.yaml", "--out", "r1", cwd=root)
            assert 0 == made.returncode, made.stderr
    for step in (
        ("keygen", "example.org/lab", "--out", "lab"),
        ("keygen", "example.org/other", "--out", "other"),
        ("checkpoint", "r1/trace.jsonl", "--sign", "lab.key", "--out", "cp.note"),
        ("checkpoint", "r1/trace.1.jsonl", "--sign", "lab.key", "--out", "cp1.note"),
        ("attest", "r1/trace.jsonl", "--key", "lab.key", "--out", "run.intoto.json"),
        ("keygen", "example.org/witness", "--cosigner", "--out", "witness"),
        ("prove", "r1/trace.jsonl", "--from-size", "0", "--checkpoint", "cp.note", "--out", "c0"),
        (
            "witness",
            "c0",
            "--state",
            "w.state",
            "--key",
            "witness.key",
            "--log",
            "lab.pub",
            "--out",
            "cp.cosigned.note",
        ),
    ):
        done = run(*step, cwd=root)
        assert 0 == done.returncode, done.stderr
    yield root


def _statement(envelope: dict[str, object]) -> dict[str, object]:
    payload = envelope["payload"]
    assert isinstance(payload, str)
    statement: dict[str, object] = json.loads(base64.b64decode(payload))
    return statement


def _sslib_key(path: Path) -> SSlibKey:
    """The lab's verifier key as securesystemslib holds it (keyid: the note key's name+hash)."""
    key = parse_verifier_key(path.read_bytes())
    return SSlibKey(key_id(key), "ed25519", "ed25519", {"public": key.public_key.hex()})


def test_securesystemslib_verifies_the_envelope(published: Path) -> None:
    """securesystemslib's DSSE verifier accepts the envelope with the lab key and refuses another."""
    envelope = Envelope.from_dict(json.loads((published / "run.intoto.json").read_bytes()))
    accepted = envelope.verify([_sslib_key(published / "lab.pub")], 1)
    assert [key_id(parse_verifier_key((published / "lab.pub").read_bytes()))] == list(accepted)
    assert PAYLOAD_TYPE == envelope.payload_type
    with pytest.raises(VerificationError):
        Envelope.from_dict(json.loads((published / "run.intoto.json").read_bytes())).verify(
            [_sslib_key(published / "other.pub")], 1
        )


def test_statement_names_the_trace_output_checkpoint_spec_and_tools(published: Path) -> None:
    """Each subject and predicate field equals what an independent computation gives."""
    statement = _statement(json.loads((published / "run.intoto.json").read_bytes()))
    trace = (published / "r1" / "trace.jsonl").read_bytes()
    events = [json.loads(line)["event"] for line in trace.splitlines()]
    accepted = next(e for e in events if e["body"]["kind"] == "output_accepted")
    output_digest = hashlib.sha256(rfc8785.dumps(accepted["body"]["value"])).hexdigest()
    note = (published / "cp.note").read_text().split("\n")
    predicate = statement["predicate"]
    assert isinstance(predicate, dict)
    assert (
        "https://in-toto.io/Statement/v1",
        PREDICATE_TYPE,
        [
            {"name": "trace.jsonl", "digest": {"sha256": hashlib.sha256(trace).hexdigest()}},
            {"name": "output", "digest": {"sha256": output_digest}},
        ],
        {
            "origin": note[0],
            "size": int(note[1]),
            "root_hex": base64.b64decode(note[2]).hex(),
        },
        {
            "run_id": events[0]["body"]["run_id"],
            "config_digest": events[0]["body"]["config_digest"],
        },
        {"seq": accepted["seq"], "schema_name": accepted["body"]["schema_name"]},
        {
            "name": "spec.yaml",
            "sha256": hashlib.sha256((published / "r1" / "spec.yaml").read_bytes()).hexdigest(),
        },
        [
            {
                "module": "calc",
                "origin": "code_dir",
                "sha256": hashlib.sha256((published / "calc.py").read_bytes()).hexdigest(),
            }
        ],
    ) == (
        statement["_type"],
        statement["predicateType"],
        statement["subject"],
        predicate["checkpoint"],
        predicate["run"],
        predicate["output"],
        predicate["spec"],
        predicate["tools"],
    )
    assert ("openai-compatible", "local") == (
        predicate["model"]["kind"],
        predicate["model"]["name"],
    )


def test_both_checkers_accept_it_against_the_trace_and_checkpoint(published: Path) -> None:
    """`twinflow attest --check` and the stdlib leaf's attest-check both say ok, naming the signer."""
    args = ("--key", "lab.pub", "--checkpoint", "cp.note")
    ours = run("attest", "r1/trace.jsonl", "--check", "run.intoto.json", *args, cwd=published)
    leaf = run(
        "attest-check",
        "run.intoto.json",
        "--trace",
        "r1/trace.jsonl",
        *args,
        cwd=published,
        module="twinflow.trace",
    )
    assert (0, 0) == (ours.returncode, leaf.returncode), ours.stderr + leaf.stderr
    assert "signed by example.org/lab+" in leaf.stdout
    assert "matches the trace and the checkpoint" in ours.stdout


def test_twinflow_reads_an_envelope_securesystemslib_signed(published: Path) -> None:
    """An envelope securesystemslib signs over our statement with the lab key checks in the leaf."""
    ours = json.loads((published / "run.intoto.json").read_bytes())
    signer_key = parse_signer_key((published / "lab.key").read_bytes())
    private = Ed25519PrivateKey.from_private_bytes(signer_key.seed)
    sslib = _sslib_key(published / "lab.pub")
    envelope = Envelope(base64.b64decode(ours["payload"]), PAYLOAD_TYPE, {})
    envelope.sign(CryptoSigner(private, sslib))
    (published / "sslib.json").write_text(json.dumps(envelope.to_dict(), indent=1) + "\n")
    leaf = run(
        "attest-check",
        "sslib.json",
        "--key",
        "lab.pub",
        "--trace",
        "r1/trace.jsonl",
        cwd=published,
        module="twinflow.trace",
    )
    assert 0 == leaf.returncode, leaf.stderr


def _envelope_variants(good: bytes) -> dict[str, bytes]:
    envelope = json.loads(good)
    statement = _statement(envelope)
    sig = envelope["signatures"][0]

    def with_(**changes: object) -> bytes:
        return json.dumps({**envelope, **changes}).encode()

    def resigned_payload(changed: dict[str, object]) -> bytes:
        payload = base64.b64encode(json.dumps(changed).encode()).decode()
        return with_(payload=payload)

    other_subject = json.loads(json.dumps(statement))
    other_subject["subject"][0]["digest"]["sha256"] = "0" * 64
    return {
        "crlf": good.replace(b",", b",\r\n"),
        "truncated": good[: len(good) // 2],
        "truncated base64": with_(payload=envelope["payload"][:-3]),
        "payload edited": resigned_payload(other_subject),
        "duplicate keyid": with_(signatures=[sig, sig]),
        "unknown key only": with_(signatures=[{**sig, "keyid": "example.org/else+00000000"}]),
        "key-hint collision": with_(
            signatures=[{**sig, "sig": base64.b64encode(bytes(64)).decode()}]
        ),
        "unknown member": with_(extra=1),
        "no signatures": with_(signatures=[]),
        "other payload type": with_(payloadType="text/plain"),
        "short signature": with_(signatures=[{**sig, "sig": sig["sig"][:8]}]),
        "not json": b"\x00\xff" * 10,
        "duplicate member": good.replace(b'{"payload"', b'{"payloadType":"x","payload"', 1),
        "deep": b"[" * 100_000 + b"]" * 100_000,
        "100 MB": b" " * (100 * 1024 * 1024) + good,
    }


def test_bad_envelopes_are_one_line_never_accepted(published: Path) -> None:
    """Each malformed or forged envelope: exit 1 or 2, one line on stderr, no traceback."""
    good = (published / "run.intoto.json").read_bytes()
    outcomes = {}
    for name, data in _envelope_variants(good).items():
        path = published / "bad.json"
        path.write_bytes(data)
        leaf = run(
            "attest-check", "bad.json", "--key", "lab.pub", cwd=published, module="twinflow.trace"
        )
        outcomes[name] = (
            leaf.returncode in (1, 2),
            1 == len(leaf.stderr.splitlines()),
            "Traceback" not in leaf.stderr,
            "" == leaf.stdout,
        )
    assert {name: (True, True, True, True) for name in outcomes} == outcomes


def test_another_trace_or_checkpoint_is_refused(published: Path) -> None:
    """Checked against another run's trace or checkpoint (same key), the attestation fails: exit 1."""
    leaf = [
        run(
            "attest-check",
            "run.intoto.json",
            "--key",
            "lab.pub",
            *extra,
            cwd=published,
            module="twinflow.trace",
        )
        for extra in (("--trace", "r1/trace.1.jsonl"), ("--checkpoint", "cp1.note"))
    ]
    assert [1, 1] == [r.returncode for r in leaf], [r.stderr for r in leaf]
    assert [True, True] == ["the attestation states" in r.stderr for r in leaf]


def test_the_command_refuses_what_the_leaf_refuses(
    published: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`twinflow attest TRACE --check` on each bad envelope: exit 1 or 2, one line, nothing on stdout."""
    good = (published / "run.intoto.json").read_bytes()
    trace, key, bad = (str(published / p) for p in ("r1/trace.jsonl", "lab.pub", "bad2.json"))
    outcomes = {}
    for name, data in _envelope_variants(good).items():
        Path(bad).write_bytes(data)
        code = main(["attest", trace, "--check", bad, "--key", key])
        captured = capsys.readouterr()
        outcomes[name] = (code in (1, 2), 1 == len(captured.err.splitlines()), "" == captured.out)
    assert {name: (True, True, True) for name in outcomes} == outcomes


def test_a_damaged_trace_is_not_attested(
    published: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trace with one byte changed: `attest` exits 1 and writes no attestation."""
    data = bytearray((published / "r1" / "trace.jsonl").read_bytes())
    data[data.index(b'"prompt"') + 12] ^= 1
    (published / "damaged.jsonl").write_bytes(bytes(data))
    out = published / "damaged.intoto.json"
    code = main(
        [
            "attest",
            str(published / "damaged.jsonl"),
            "--key",
            str(published / "lab.key"),
            "--out",
            str(out),
        ]
    )
    assert (1, False) == (code, out.exists())
    assert 1 == len(capsys.readouterr().err.splitlines())


def test_an_auditor_with_only_twinflow_trace_checks_the_whole_claim(
    published: Path, tmp_path: Path
) -> None:
    """In a venv holding the twinflow-trace wheel alone: the trace against the cosigned note
    (log key, witness, quorum, a clock given) and the attestation against both: ok."""
    bin_dir = trace_only_venv(tmp_path)
    now = str(json.loads((published / "w.state").read_bytes())["logs"]["example.org/lab"]["time"])
    verify = run_process(
        [
            str(bin_dir / "twinflow-trace"),
            "verify",
            "r1/trace.jsonl",
            "--checkpoint",
            "cp.cosigned.note",
            "--key",
            "lab.pub",
            "--witness",
            "witness.pub",
            "--quorum",
            "1",
            "--now",
            now,
        ],
        cwd=published,
    )
    check = run_process(
        [
            str(bin_dir / "twinflow-trace"),
            "attest-check",
            "run.intoto.json",
            "--key",
            "lab.pub",
            "--trace",
            "r1/trace.jsonl",
            "--checkpoint",
            "cp.cosigned.note",
        ],
        cwd=published,
    )
    assert (0, 0) == (verify.returncode, check.returncode), verify.stderr + check.stderr
    assert "cosigned by example.org/witness+" in verify.stdout
    assert "matches the trace and the checkpoint" in check.stdout
