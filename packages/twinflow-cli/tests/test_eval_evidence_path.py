"""The whole path of an eval's evidence, on a scripted loopback server: a pre-registered run,
attested; one case handed over with its trace and inclusion proof and checked by the stdlib
leaf in a venv holding only it; reproduced in a second directory, the reproduction attested
and checked there too, and compared."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_testkit import EVAL_PROMPT, SUMS, calc_project, cli_json, trace_only_venv

from twinflow.kernel import LoopbackServer
from twinflow.kernel._process import run_process

HANDED_CASE = ("--trace", "s2@1.jsonl", "--proof", "s2.tlog-proof")
NAMES = ("--names", "eval.intoto.json")


def test_an_eval_is_attested_handed_over_reproduced_and_compared(
    tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every step exits 0; the auditor's venv checks the case and the reproduction."""
    (tmp_path / "lab").mkdir()
    project = calc_project(tmp_path / "lab", server.url, prompt=EVAL_PROMPT, dataset=SUMS)
    dataset, spec, out = project / "dataset.yaml", project / "spec.yaml", project / "out"
    steps = [
        ("keygen", "example.org/lab", "--out", str(project / "lab")),
        *[("eval", "plan", str(dataset), "--spec", str(spec), "--metric", "rate")],
        *[("--rule", "rate >= 0.5", "--out", str(project / "plan.note"))],
        ("eval", "run", str(dataset), "--spec", str(spec), "--plan", str(project / "plan.note")),
        ("--out", str(out)),
        ("eval", "attest", str(out), "--key", str(project / "lab.key")),
        ("eval", "attest", str(out), "--case", "s2@1", "--out", str(project / "s2.tlog-proof")),
        ("eval", "reproduce", str(out), "--spec", str(spec), "--out", str(tmp_path / "repro")),
        ("--key", str(project / "lab.key")),
        ("eval", "compare", str(out), str(tmp_path / "repro")),
    ]
    commands: list[tuple[str, ...]] = []
    for step in steps:
        if step[0].startswith("--"):
            commands[-1] = (*commands[-1], *step)
        else:
            commands.append(step)
    payloads = []
    for command in commands:
        code, payload, err = cli_json(capsys, *command)
        assert (command, 0) == (command, code), err
        payloads.append(payload)
    assert True is payloads[2]["plan"]["met"]
    assert ["reproduced"] * 2 == [c["outcome"] for c in payloads[5]["cases"]]
    # The hand-over: four files in a folder of their own, checked with the leaf alone.
    handed = tmp_path / "handed"
    handed.mkdir()
    for path in (
        out / "eval.intoto.json",
        out / "traces" / "s2@1.jsonl",
        project / "s2.tlog-proof",
        project / "lab.pub",
    ):
        shutil.copy(path, handed / path.name)
    shutil.copy(tmp_path / "repro" / "reproduction.intoto.json", handed)
    auditor = trace_only_venv(tmp_path / "auditor") / "twinflow-trace"
    case = run_process(
        [str(auditor), "attest-check", "eval.intoto.json", "--key", "lab.pub", *HANDED_CASE],
        cwd=handed,
        timeout=300,
    )
    assert (0, "") == (case.returncode, case.stderr)
    assert "s2@1.jsonl is case 's2@1' of it" in case.stdout
    reproduced = run_process(
        [str(auditor), "attest-check", "reproduction.intoto.json", "--key", "lab.pub", *NAMES],
        cwd=handed,
        timeout=300,
    )
    assert (0, "") == (reproduced.returncode, reproduced.stderr)
    assert "2 of 2 case(s) reproduced (recorded)" in reproduced.stdout
