"""The workflow gate: the real workflows validate, a broken one fails naming its fault."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

GateRunner = Callable[..., subprocess.CompletedProcess[str]]


def test_the_real_workflows_are_valid(run_gate: GateRunner) -> None:
    """Every workflow in .github/workflows passes the schema check."""
    done = run_gate("workflows")
    assert 0 == done.returncode, done.stdout + done.stderr
    assert ".github/workflows/ci.yml" in done.stdout


BROKEN = {
    "a misspelt steps key": ("    steps:\n", "    step:\n"),
    "a job without runs-on": ("    runs-on: ubuntu-latest\n", ""),
    "an unknown trigger": ("  pull_request:\n", "  pull_requests:\n"),
    "a timeout that is not a number": ("timeout-minutes: 30", "timeout-minutes: thirty"),
}


@pytest.mark.parametrize(("old", "new"), BROKEN.values(), ids=BROKEN.keys())
def test_a_broken_workflow_fails(
    old: str, new: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """Each structural mistake in a workflow fails the gate (class 17: static validation)."""
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    text = (repo_root / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8")
    assert old in text
    (workflows / "ci.yml").write_text(text.replace(old, new, 1), encoding="utf-8")
    done = run_gate("workflows", "--root", tmp_path)
    assert 1 == done.returncode, done.stdout + done.stderr
    assert "ci.yml" in done.stderr


def test_no_workflow_cannot_pass(tmp_path: Path, run_gate: GateRunner) -> None:
    """A tree without workflows is not 'valid': the gate cannot run (exit 2)."""
    done = run_gate("workflows", "--root", tmp_path)
    assert 2 == done.returncode
