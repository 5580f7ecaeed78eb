"""``twinflow eval merge`` merges the shards of one run only, and Lab Notes name the spec.

Real ``twinflow`` processes on a scripted loopback server: shards run with another spec, model
or plan are refused with one line naming the field and the shard, and nothing is written.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from cli_testkit import EVAL_PROMPT, SUMS, calc_project

from twinflow.kernel import LoopbackServer
from twinflow.kernel._process import ProcessResult, run_process


def twinflow(*args: str, cwd: Path) -> ProcessResult:
    """Run ``python -m twinflow.cli ARGS`` in ``cwd``."""
    return run_process(
        [sys.executable, "-m", "twinflow.cli", *args],
        cwd=cwd,
        env={"PYTHONDONTWRITEBYTECODE": "1"},
        timeout=300,
    )


@pytest.fixture
def project(tmp_path: Path, server: LoopbackServer) -> Path:
    """A dataset, a spec on the scripted server, and variants of it: another prompt, model."""
    calc_project(tmp_path, server.url, prompt=EVAL_PROMPT, dataset=SUMS)
    spec = (tmp_path / "spec.yaml").read_text()
    (tmp_path / "prompt.yaml").write_text(spec.replace("add the numbers", "sum the numbers"))
    (tmp_path / "model.yaml").write_text(
        spec.replace("dialect: llama.cpp", "name: other\n  dialect: llama.cpp")
    )
    return tmp_path


def shard(project: Path, index: int, out: str, spec: str = "spec.yaml", *extra: str) -> str:
    """``eval run`` of shard INDEX/2 of the dataset into ``out``."""
    made = twinflow(
        *("eval", "run", "dataset.yaml", "--spec", spec, "--out", out),
        *("--shard", f"{index}/2", *extra),
        cwd=project,
    )
    assert 0 == made.returncode, made.stderr
    return out


def test_merge_refuses_shards_of_another_spec_model_or_plan(project: Path) -> None:
    """A second shard run with another spec, model or plan is refused (exit 2), naming the
    field and the shard; the shards of one run still merge, their plan with them."""
    planned = twinflow(
        *("eval", "plan", "dataset.yaml", "--spec", "spec.yaml", "--metric", "rate"),
        *("--rule", "rate >= 0.5", "--out", "plan.note"),
        cwd=project,
    )
    assert 0 == planned.returncode, planned.stderr
    first = shard(project, 1, "s1")
    for what, spec, extra in (
        ("spec", "prompt.yaml", ()),
        ("spec and model", "model.yaml", ()),
        ("plan", "spec.yaml", ("--plan", "plan.note")),
    ):
        second = shard(project, 2, f"s2-{what.replace(' ', '-')}", spec, *extra)
        merged = twinflow("eval", "merge", first, second, "--out", "merged", cwd=project)
        assert 2 == merged.returncode, merged.stderr
        line = f"shard {second} was run with another {what} than shard {first} ("
        assert (1, True) == (len(merged.stderr.splitlines()), line in merged.stderr), merged
        assert not (project / "merged" / "results.json").exists()
    with_plan = shard(project, 1, "p1", "spec.yaml", "--plan", "plan.note")
    second = "s2-plan"
    merged = twinflow("eval", "merge", with_plan, second, "--out", "merged", cwd=project)
    assert 0 == merged.returncode, merged.stderr
    assert (project / "plan.note").read_bytes() == (project / "merged" / "plan.note").read_bytes()
    assert "rule met" in (project / "merged" / "lab-notes.md").read_text()


def test_lab_notes_name_the_spec_digest_from_the_traces_without_a_recorded_one(
    project: Path,
) -> None:
    """A run.json without the run's identity (an older or a stripped one): Lab Notes still
    state the spec digest, from the traces' run_started."""
    shard(project, 1, "s1")
    shard(project, 2, "s2")
    digest = json.loads((project / "s1" / "run.json").read_text())["identity"]["spec_digest"]
    for name in ("s1", "s2"):
        manifest = json.loads((project / name / "run.json").read_text())
        del manifest["identity"]
        (project / name / "run.json").write_text(json.dumps(manifest))
    merged = twinflow("eval", "merge", "s1", "s2", "--out", "merged", cwd=project)
    assert 0 == merged.returncode, merged.stderr
    notes = (project / "merged" / "lab-notes.md").read_text()
    assert f"- **spec digest**: {digest} (from the traces)" in notes.splitlines()
