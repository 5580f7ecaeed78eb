"""``twinflow eval`` on a scripted loopback server: resumes decided before any model starts,
one spec digest, the embedded model named by its weights."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from cli_testkit import EVAL_PROMPT, SUMS, calc_project

from twinflow.agent import load_spec
from twinflow.cli._main import main
from twinflow.cli._wiring import run_identity
from twinflow.kernel import LoopbackServer
from twinflow.models._embedded import embedded_model_file


@pytest.fixture
def project(tmp_path: Path, server: LoopbackServer) -> Path:
    """A dataset, a spec on the scripted server and its tool module, side by side."""
    return calc_project(tmp_path, server.url, prompt=EVAL_PROMPT, dataset=SUMS)


def eval_run(
    project: Path, spec: str, out: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    """`twinflow eval run` in this process: its exit code and stderr."""
    argv = ["eval", "run", str(project / "dataset.yaml"), "--spec", str(project / spec)]
    code = main([*argv, "--out", str(project / out), "--json"])
    return code, capsys.readouterr().err


def test_a_resume_refused_for_another_spec_starts_no_model(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A finished run, resumed with an embedded-model spec: refused before the model loads."""
    assert 0 == eval_run(project, "spec.yaml", "out", capsys)[0]
    text = (project / "spec.yaml").read_text()
    url_line = next(line for line in text.splitlines() if line.strip().startswith("url:"))
    (project / "embedded.yaml").write_text(text.replace(url_line, "  url: embedded"))
    code, err = eval_run(project, "embedded.yaml", "out", capsys)
    assert 2 == code
    assert "holds a run of another spec" in err
    assert (False, False) == (
        "loading SmolLM2" in err,
        (project / "out" / "model-server.log").exists(),
    )


def test_lab_notes_and_a_refused_resume_quote_one_spec_digest(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The spec digest in Lab Notes is run_identity's, the one a resume for another spec quotes."""
    assert 0 == eval_run(project, "spec.yaml", "out", capsys)[0]
    spec_digest = run_identity(load_spec(project / "spec.yaml")).spec_digest
    assert spec_digest is not None
    notes = (project / "out" / "lab-notes.md").read_text()
    assert f"- **spec digest**: {spec_digest}" in notes.splitlines()
    changed = (project / "spec.yaml").read_text().replace("max_steps: 3", "max_steps: 4")
    (project / "other.yaml").write_text(changed)
    code, err = eval_run(project, "other.yaml", "out", capsys)
    assert 2 == code
    assert f"holds a run of another spec (recorded: {spec_digest[:12]};" in err


def test_the_embedded_model_is_named_by_its_file_and_sha256(project: Path) -> None:
    """run.json's model for `url: embedded` is the GGUF file's name and digest, not 'embedded'."""
    text = (project / "spec.yaml").read_text()
    url_line = next(line for line in text.splitlines() if line.strip().startswith("url:"))
    (project / "embedded.yaml").write_text(text.replace(url_line, "  url: embedded"))
    gguf = embedded_model_file()
    digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
    model = run_identity(load_spec(project / "embedded.yaml")).model
    assert f"openai-compatible llama.cpp embedded {gguf.name} sha256:{digest} name=local" in (
        model or ""
    )


def test_trials_send_distinct_seeds_to_the_server_and_report_pass_at_k(
    project: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """`eval run --trials 3` sends seeds 0, 1000 and 2000 per case and prints pass@3 and pass^3."""
    argv = ["eval", "run", str(project / "dataset.yaml"), "--spec", str(project / "spec.yaml")]
    code = main([*argv, "--out", str(project / "out"), "--trials", "3"])
    out = capsys.readouterr().out
    assert 0 == code
    assert "3 trials per case: rate 100.0% (95% CI 100.0% to 100.0%, clustered by case); " in out
    assert "pass@3 100.0%, pass^3 100.0%" in out
    results = json.loads((project / "out" / "results.json").read_bytes())
    assert [0, 1000, 2000, 0, 1000, 2000] == [c["seed"] for c in results["cases"]]
    sent = {body["seed"] for r in server.requests if isinstance(body := r.json_value(), dict)}
    assert {0, 1000, 2000} == sent
    assert [("s1", 3, 3), ("s2", 3, 3)] == [
        (c["case_id"], c["trials"], c["passed"]) for c in results["trials"]["cases"]
    ]


def test_a_trial_count_out_of_range_is_a_usage_error(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--trials 0 exits 2 with one line naming the bound; nothing is written."""
    argv = ["eval", "run", str(project / "dataset.yaml"), "--spec", str(project / "spec.yaml")]
    code = main([*argv, "--out", str(project / "out"), "--trials", "0"])
    err = capsys.readouterr().err
    assert 2 == code
    assert "--trials 0: must be from 1 to 1000" in err
    assert not (project / "out").exists()


def test_compare_prints_a_seeded_bootstrap_interval_and_says_the_sample_is_small(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`eval compare --seed 5` prints the paired interval with its seed, and that 2 cases are
    too few for it; the JSON records the seed; a negative seed is a usage error."""
    argv = ["eval", "run", str(project / "dataset.yaml"), "--spec", str(project / "spec.yaml")]
    for out in ("a", "b"):
        assert 0 == main([*argv, "--out", str(project / out), "--trials", "2"])
    capsys.readouterr()
    pair = ["eval", "compare", str(project / "a"), str(project / "b")]
    assert 0 == main([*pair, "--seed", "5"])
    text = capsys.readouterr().out
    assert "95% interval on the difference +0.0% to +0.0% (paired cluster bootstrap" in text
    assert "2 cases, 10000 resamples, --seed 5)" in text
    assert "caveat: only 2 paired case(s): a percentile bootstrap needs about 20" in text
    assert 0 == main([*pair, "--seed", "5", "--json"])
    assert 5 == json.loads(capsys.readouterr().out)["bootstrap"]["seed"]
    assert 2 == main([*pair, "--seed", "-1"])
    assert "--seed -1: must be from 0 to 2**64 - 1" in capsys.readouterr().err
