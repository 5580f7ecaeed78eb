"""``twinflow eval attest`` on a pre-registered run against a scripted loopback server: the
attestation checks against its run directory and by the stdlib leaf, one case is proved in it,
and an attestation that does not match its run directory is refused with one line."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from cli_testkit import EVAL_PROMPT, SUMS, calc_project, cli_json

from twinflow.kernel import LoopbackServer
from twinflow.trace import __main__ as leaf
from twinflow.trace._attest import PAYLOAD_TYPE, pae
from twinflow.trace._evidence import EVAL_PREDICATE_TYPE, cases_root
from twinflow.trace._keys import parse_signer_key


@pytest.fixture
def attested(tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]) -> Path:
    """A planned, run and attested eval: project/out, lab.key/lab.pub, out/eval.intoto.json."""
    project = calc_project(tmp_path, server.url, prompt=EVAL_PROMPT, dataset=SUMS)
    dataset, spec = str(project / "dataset.yaml"), str(project / "spec.yaml")
    plan = str(project / "plan.note")
    steps: list[tuple[str, ...]] = [
        ("keygen", "example.org/lab", "--out", str(project / "lab")),
        ("eval", "plan", dataset, "--spec", spec, "--metric", "rate", "--rule", "rate >= 0.5"),
        ("eval", "run", dataset, "--spec", spec, "--out", str(project / "out"), "--plan", plan),
        ("eval", "attest", str(project / "out"), "--key", str(project / "lab.key")),
    ]
    steps[1] = (*steps[1], "--out", plan)
    for step in steps:
        code, payload, err = cli_json(capsys, *step)
        assert 0 == code, (step, payload, err)
    return project


def statement(project: Path) -> dict[str, Any]:
    """The statement inside out/eval.intoto.json."""
    envelope = json.loads((project / "out" / "eval.intoto.json").read_bytes())
    result: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))
    return result


def resign(project: Path, st: dict[str, Any], name: str = "forged.intoto.json") -> Path:
    """``st`` signed again with the lab key (a signer who lies), written to project/NAME."""
    import rfc8785

    signer = parse_signer_key((project / "lab.key").read_bytes())
    payload = rfc8785.dumps(st)
    sig = signer.sign(pae(PAYLOAD_TYPE, payload))
    envelope = {
        "payload": base64.b64encode(payload).decode(),
        "payloadType": PAYLOAD_TYPE,
        "signatures": [
            {
                "keyid": f"{signer.verifier.name}+{signer.verifier.key_hash:08x}",
                "sig": base64.b64encode(sig).decode(),
            }
        ],
    }
    path = project / name
    path.write_bytes(rfc8785.dumps(envelope) + b"\n")
    return path


def check(
    project: Path, capsys: pytest.CaptureFixture[str], attestation: Path
) -> tuple[int, dict[str, Any], str]:
    """`eval attest out --check ATTESTATION --key lab.pub`."""
    return cli_json(
        capsys,
        *("eval", "attest", str(project / "out"), "--check", str(attestation)),
        *("--key", str(project / "lab.pub")),
    )


def test_the_attestation_states_the_planned_run_and_checks_against_it(
    attested: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The predicate names the dataset, the kept plan, both cases and their Merkle root."""
    st = statement(attested)
    predicate = st["predicate"]
    roots = [bytes.fromhex(c["rootHex"]) for c in predicate["cases"]["results"]]
    plan = predicate["preRegistration"]
    expected = (EVAL_PREDICATE_TYPE, ["s1@1", "s2@1"], cases_root(roots).hex(), True, True)
    actual = (
        st["predicateType"],
        [c["key"] for c in predicate["cases"]["results"]],
        predicate["cases"]["rootHex"],
        plan["kept"],
        plan["met"],
    )
    assert expected == actual
    assert 0 == check(attested, capsys, attested / "out" / "eval.intoto.json")[0]


def test_one_case_is_checked_by_the_leaf_with_its_trace_and_proof(
    attested: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--case writes a tlog-proof; the leaf's attest-check places the case trace in the run."""
    proof = attested / "s2.tlog-proof"
    code, _, err = cli_json(
        capsys, "eval", "attest", str(attested / "out"), "--case", "s2@1", "--out", str(proof)
    )
    assert 0 == code, err
    argv = [
        *("attest-check", str(attested / "out" / "eval.intoto.json")),
        *("--key", str(attested / "lab.pub"), "--proof", str(proof)),
    ]
    assert 0 == leaf.main([*argv, "--trace", str(attested / "out" / "traces" / "s2@1.jsonl")])
    assert "is case 's2@1' of it" in capsys.readouterr().out
    other = attested / "out" / "traces" / "s1@1.jsonl"
    assert 1 == leaf.main([*argv, "--trace", str(other)])
    assert "the case trace is not the case its proof names" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("case_root", "the attestation states case 's1@1' root (hex)"),
        ("plan", "the attestation states plan digest"),
        ("dataset", "the attestation states dataset digest"),
    ],
)
def test_an_attestation_that_does_not_match_its_run_dir_is_refused(
    attested: Path, capsys: pytest.CaptureFixture[str], change: str, message: str
) -> None:
    """A signed statement with one fact changed: one line naming it, exit 1."""
    st = statement(attested)
    predicate = st["predicate"]
    if change == "case_root":
        results = predicate["cases"]["results"]
        results[0]["rootHex"] = "00" * 32
        roots = [bytes.fromhex(c["rootHex"]) for c in results]
        predicate["cases"]["rootHex"] = cases_root(roots).hex()
    elif change == "plan":
        predicate["preRegistration"]["digest"]["sha256"] = "11" * 32
    else:
        predicate["suite"]["digest"]["sha256"] = "22" * 32
    code, payload, _ = check(attested, capsys, resign(attested, st))
    assert (1, True) == (code, payload["error"].startswith(f"{attested}/forged.intoto.json: "))
    assert message in payload["error"]
    assert 1 == len(payload["error"].splitlines())


def test_a_forged_signature_and_another_run_dir_are_refused(
    attested: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A flipped payload byte fails the signature; a run directory re-run fails the roots."""
    path = attested / "out" / "eval.intoto.json"
    envelope = json.loads(path.read_bytes())
    payload = bytearray(base64.b64decode(envelope["payload"]))
    payload[payload.index(b"self_attested")] = ord("S")
    envelope["payload"] = base64.b64encode(bytes(payload)).decode()
    bad = attested / "bad.intoto.json"
    bad.write_text(json.dumps(envelope))
    code, out, _ = check(attested, capsys, bad)
    assert (1, True) == (code, "does not verify" in out["error"])
    shutil.rmtree(attested / "out" / "cases")
    (attested / "out" / "results.json").unlink()
    code, _, err = cli_json(
        capsys,
        *("eval", "run", str(attested / "dataset.yaml"), "--spec", str(attested / "spec.yaml")),
        *("--out", str(attested / "out2")),
    )
    assert 0 == code, err
    code, out, _ = cli_json(
        capsys,
        *("eval", "attest", str(attested / "out2"), "--check", str(path)),
        *("--key", str(attested / "lab.pub")),
    )
    assert (1, True) == (code, "it is not an attestation of this run directory" in out["error"])


def test_a_case_key_the_run_does_not_have_is_refused(
    attested: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--case of an unknown key: one line, exit 2, no file."""
    proof = attested / "x.tlog-proof"
    code, payload, _ = cli_json(
        capsys, "eval", "attest", str(attested / "out"), "--case", "nope@1", "--out", str(proof)
    )
    assert (2, False) == (code, proof.exists())
    assert payload["error"].startswith(f"{attested}/out has no case 'nope@1'")


def reproduce(
    project: Path, capsys: pytest.CaptureFixture[str], out: str = "repro"
) -> tuple[int, dict[str, Any], str]:
    """`eval reproduce out --spec spec.yaml --out project/OUT`."""
    return cli_json(
        capsys,
        *("eval", "reproduce", str(project / "out"), "--spec", str(project / "spec.yaml")),
        *("--out", str(project / out)),
    )


def test_a_reproduction_is_attested_names_the_run_and_is_compared(
    attested: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both cases replay exactly; the signed reproduction names the run's attestation."""
    code, payload, _ = reproduce(attested, capsys)
    assert (0, ["reproduced", "reproduced"]) == (code, [c["outcome"] for c in payload["cases"]])
    repro = attested / "repro"
    assert (
        0 == cli_json(capsys, "eval", "attest", str(repro), "--key", str(attested / "lab.key"))[0]
    )
    argv = [
        "attest-check",
        str(repro / "reproduction.intoto.json"),
        "--key",
        str(attested / "lab.pub"),
    ]
    assert 0 == leaf.main([*argv, "--names", str(attested / "out" / "eval.intoto.json")])
    assert "2 of 2 case(s) reproduced (recorded)" in capsys.readouterr().out
    assert 1 == leaf.main([*argv, "--names", str(attested / "lab.pub")])
    assert "a reproduction of another run" in capsys.readouterr().err
    code, payload, _ = cli_json(capsys, "eval", "compare", str(attested / "out"), str(repro))
    assert (0, "reproduced") == (code, payload["reproduction"]["cases"][1]["outcome"])


def test_a_changed_spec_diverges_and_another_run_is_refused(
    attested: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A spec with another step limit: each case diverges at seq 0 (its configuration);
    compared with another run, the reproduction is refused in one line."""
    spec = attested / "spec.yaml"
    spec.write_text(spec.read_text().replace("max_steps: 3", "max_steps: 4"))
    code, payload, err = reproduce(attested, capsys)
    diverged = [(c["outcome"], c["seq"]) for c in payload["cases"]]
    assert (0, [("diverged", 0)] * 2) == (code, diverged), err
    spec.write_text(spec.read_text().replace("max_steps: 4", "max_steps: 3"))
    code, _, err = cli_json(
        capsys,
        *("eval", "run", str(attested / "dataset.yaml"), "--spec", str(attested / "spec.yaml")),
        *("--out", str(attested / "other")),
    )
    assert 0 == code, err
    code, payload, _ = cli_json(
        capsys, "eval", "compare", str(attested / "other"), str(attested / "repro")
    )
    assert (1, True) == (code, "is a reproduction of another run" in payload["error"])
    assert 1 == len(payload["error"].splitlines())


def test_an_eval_attestation_given_to_attest_check_is_refused_in_one_line(
    attested: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`twinflow attest --check` of an eval attestation: one line naming the right command."""
    code, _, err = cli_json(
        capsys,
        *("attest", "--check", str(attested / "out" / "eval.intoto.json")),
        *("--key", str(attested / "lab.pub")),
    )
    assert (1, 1, True) == (code, len(err.splitlines()), "eval attest RUN_DIR --check" in err)


def test_reproducing_with_another_runs_attestation_is_refused(
    attested: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--attestation naming other case roots: one line, exit 1, no reproduction written."""
    st = statement(attested)
    st["predicate"]["cases"]["results"][0]["rootHex"] = "00" * 32
    roots = [bytes.fromhex(c["rootHex"]) for c in st["predicate"]["cases"]["results"]]
    st["predicate"]["cases"]["rootHex"] = cases_root(roots).hex()
    code, payload, _ = cli_json(
        capsys,
        *("eval", "reproduce", str(attested / "out"), "--spec", str(attested / "spec.yaml")),
        *("--out", str(attested / "repro"), "--attestation", str(resign(attested, st))),
    )
    assert (1, False) == (code, (attested / "repro").exists())
    assert "is not an attestation of" in payload["error"]
