"""``twinflow eval plan`` and ``eval run --plan`` on a scripted loopback server: a run that
matches its plan runs and reports the rule; anything else is refused with one line, exit 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_testkit import EVAL_PROMPT, SUMS, calc_project, cli_json

from twinflow.kernel import LoopbackServer


@pytest.fixture
def project(tmp_path: Path, server: LoopbackServer) -> Path:
    """A dataset, a spec on a scripted server and its tool module, side by side."""
    return calc_project(tmp_path, server.url, prompt=EVAL_PROMPT, dataset=SUMS)


def plan(
    project: Path, capsys: pytest.CaptureFixture[str], *extra: str, rule: str = "rate >= 0.5"
) -> tuple[int, dict[str, Any], str]:
    """`twinflow eval plan` of the project into project/plan.note."""
    dataset, spec = str(project / "dataset.yaml"), str(project / "spec.yaml")
    return cli_json(
        capsys,
        *("eval", "plan", dataset, "--spec", spec, "--metric", "rate", "--rule", rule),
        *("--out", str(project / "plan.note"), *extra),
    )


def run(
    project: Path, capsys: pytest.CaptureFixture[str], *extra: str, out: str = "out"
) -> tuple[int, dict[str, Any], str]:
    """`twinflow eval run` of the project into project/OUT."""
    dataset, spec = str(project / "dataset.yaml"), str(project / "spec.yaml")
    return cli_json(
        capsys, "eval", "run", dataset, "--spec", spec, "--out", str(project / out), *extra
    )


def test_a_planned_run_reports_its_rule_and_that_the_plan_came_first(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """plan, then run --plan: the rule's outcome is printed and in Lab Notes, plan first."""
    assert 0 == plan(project, capsys)[0]
    code, payload, _ = run(project, capsys, "--plan", str(project / "plan.note"))
    assert (0, True, {"rate": 1.0}) == (code, payload["plan"]["met"], payload["plan"]["values"])
    notes = (project / "out" / "lab-notes.md").read_text()
    assert "- rule met (rate = 1)" in notes
    assert "before the run's first trace started" in notes
    assert (project / "plan.note").read_bytes() == (project / "out" / "plan.note").read_bytes()


def test_a_plan_made_after_the_run_is_named_so(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plan written once the traces exist: Lab Notes say the run came first."""
    assert 0 == run(project, capsys)[0]
    assert 0 == plan(project, capsys)[0]
    assert 0 == run(project, capsys, "--plan", str(project / "plan.note"))[0]
    notes = (project / "out" / "lab-notes.md").read_text()
    assert "the run came first, so this plan is not a pre-registration" in notes


def test_a_run_of_another_spec_is_refused_before_anything_runs(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The spec changed after the plan: one line, exit 2, no run directory."""
    assert 0 == plan(project, capsys)[0]
    spec = project / "spec.yaml"
    spec.write_text(spec.read_text().replace("max_steps: 3", "max_steps: 4"))
    code, payload, _ = run(project, capsys, "--plan", str(project / "plan.note"))
    assert (2, False) == (code, (project / "out").exists())
    assert payload["error"].startswith("the plan registered another spec (plan: ")


def test_a_signed_plan_verifies_by_its_key_and_a_tampered_one_is_refused(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--sign, then --plan-key: runs; an edited plan or a missing key: exit 2, nothing run."""
    assert 0 == cli_json(capsys, "keygen", "example.org/lab", "--out", str(project / "lab"))[0]
    assert 0 == plan(project, capsys, "--sign", str(project / "lab.key"))[0]
    key = ("--plan-key", str(project / "lab.pub"))
    note = project / "plan.note"
    code, payload, _ = run(project, capsys, "--plan", str(note))
    assert (2, False) == (code, (project / "out").exists())
    assert "the plan is signed: name the verifier key" in payload["error"]
    text = note.read_bytes()
    note.write_bytes(text.replace(b'"rate >= 0.5"', b'"rate >= 0.1"'))
    code, payload, _ = run(project, capsys, "--plan", str(note), *key)
    assert (2, False) == (code, (project / "out").exists())
    assert "the plan's signature does not verify" in payload["error"]
    note.write_bytes(text)
    assert 0 == run(project, capsys, "--plan", str(note), *key)[0]
    assert (
        "signed by example.org/lab (not verified here)"
        in (project / "out" / "lab-notes.md").read_text()
    )


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"not a plan\n", "not a plan file"),
        (b"twinflow eval plan v1\n{}\n", "not a plan file: dataset: Field required"),
    ],
)
def test_a_malformed_plan_file_is_refused_with_one_line(
    project: Path, capsys: pytest.CaptureFixture[str], content: bytes, why: str
) -> None:
    """A plan file that is not one: exit 2, one line naming the file and why."""
    (project / "bad.note").write_bytes(content)
    code, payload, _ = run(project, capsys, "--plan", str(project / "bad.note"))
    assert (2, False, 1) == (code, (project / "out").exists(), len(payload["error"].splitlines()))
    assert why in payload["error"]


def test_a_bad_rule_or_metric_writes_no_plan(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """eval plan with a rule that does not parse: exit 2, no plan file."""
    code, payload, _ = plan(project, capsys, rule="rate >= 0.8; import os")
    assert (2, False) == (code, (project / "plan.note").exists())
    assert "cannot read '; import os'" in payload["error"]


def test_a_run_with_another_trial_count_is_refused(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plan for 2 trials: a run of 1 is refused, exit 2; a run of 2 runs both trials."""
    assert 0 == plan(project, capsys, "--trials", "2")[0]
    code, payload, _ = run(project, capsys, "--plan", str(project / "plan.note"))
    assert (2, False) == (code, (project / "out").exists())
    assert payload["error"].startswith("the plan registered another trial count (plan: 2;")
    code, payload, _ = run(project, capsys, "--plan", str(project / "plan.note"), "--trials", "2")
    assert (0, 4) == (code, payload["summary"]["total"])
