"""``twinflow eval run --budget`` / ``--case-budget`` on a scripted loopback server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_testkit import EVAL_PROMPT, calc_project, cli_json

from twinflow.agent import RunSpec
from twinflow.cli._eval_cost import check_priced, note_unpriced
from twinflow.cli._main import main
from twinflow.eval import Case, Dataset
from twinflow.kernel import LoopbackServer

FIVE = "name: sums\ncases:\n" + "".join(
    f'- {{id: s{i}, input: "{i} and 1", expected: "{i + 1}"}}\n' for i in range(1, 6)
)


@pytest.fixture
def project(tmp_path: Path, server: LoopbackServer) -> Path:
    """Five cases, each two requests of 10 + 5 tokens on the scripted server."""
    return calc_project(tmp_path, server.url, prompt=EVAL_PROMPT, dataset=FIVE)


def eval_run(
    project: Path, capsys: pytest.CaptureFixture[str], *flags: str
) -> tuple[int, dict, str]:
    """`eval run` of the project with ``flags``: exit code, JSON document, stderr."""
    argv = ["eval", "run", str(project / "dataset.yaml"), "--spec", str(project / "spec.yaml")]
    return cli_json(capsys, *argv, "--out", str(project / "out"), *flags)


def test_an_eval_stops_at_its_token_budget_and_says_how_many_ran(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """30 tokens a case, a budget of 70: three cases ran, two never started."""
    code, payload, _ = eval_run(project, capsys, "--budget", "tokens=70")
    assert 0 == code, payload
    expected = (
        "budget tokens reached 90, over the eval's limit of 70 (budget_exceeded): "
        "no case started after 3 ran"
    )
    assert (expected, 3, False) == (
        payload["stopped"],
        payload["summary"]["total"],
        payload["complete"],
    )
    assert 3 == len(list((project / "out" / "traces").glob("*.jsonl")))


def test_a_case_budget_ends_each_case_with_budget_exceeded(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--case-budget requests=1: every case's trace ends with budget_exceeded then run_failed."""
    _, payload, _ = eval_run(project, capsys, "--case-budget", "requests=1")
    assert 5 == payload["summary"]["total"], payload
    for trace in sorted((project / "out" / "traces").glob("*.jsonl")):
        kinds = [json.loads(x)["event"]["body"]["kind"] for x in trace.read_text().splitlines()]
        assert ["budget_exceeded", "run_failed"] == kinds[-2:]


@pytest.mark.parametrize(
    ("flag", "words"),
    [
        ("--budget=cost_usd=1", "budget cost_usd: no price for openai-compatible:local@"),
        ("--case-budget=cost_usd=1", "budget cost_usd: no price for openai-compatible:local@"),
        ("--budget=dollars=1", "give one of tokens"),
        ("--budget=tokens", "give KEY=N"),
        ("--case-budget=dollars=1", "dollars"),
    ],
)
def test_a_budget_flag_that_cannot_be_kept_exits_2_before_any_case(
    project: Path, capsys: pytest.CaptureFixture[str], flag: str, words: str
) -> None:
    """A cost on an unpriced model, an unknown key or a malformed flag: exit 2, nothing run."""
    argv = ["eval", "run", str(project / "dataset.yaml"), "--spec", str(project / "spec.yaml")]
    try:
        code = main([*argv, "--out", str(project / "out"), flag])
    except SystemExit as exited:  # argparse refuses a malformed flag itself
        code = int(str(exited.code))
    assert 2 == code
    assert words in capsys.readouterr().err
    assert not (project / "out" / "traces").exists()


def priced(project: Path) -> Path:
    """The project's model named gpt-4o-mini: priced at 0.15 and 0.6 dollars a million tokens,
    so each case (two replies of 10 + 5 tokens) costs 9e-06 dollars."""
    spec = project / "spec.yaml"
    text = spec.read_text().replace("  dialect:", "  name: gpt-4o-mini\n  dialect:")
    spec.write_text(text)
    return project


def with_budget(project: Path, lines: str, case: str = "") -> None:
    """The dataset with ``lines`` added at its top, and ``case`` added to case s1."""
    dataset = project / "dataset.yaml"
    text = dataset.read_text().replace("{id: s1,", "{id: s1," + case, 1)
    dataset.write_text(lines + text)


def test_a_cost_budgeted_eval_stops_at_its_budget_with_the_count(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """9e-06 dollars a case, a budget of 2e-05: three cases ran, the Lab Notes' cost table."""
    code, payload, _ = eval_run(priced(project), capsys, "--budget", "cost_usd=2e-05")
    assert 0 == code, payload
    expected = (
        "budget cost_usd reached 2.7e-05, over the eval's limit of 2e-05 (budget_exceeded): "
        "no case started after 3 ran"
    )
    assert (expected, 3) == (payload["stopped"], payload["summary"]["total"])
    assert {"usd": 2.7e-05, "cases_priced": 3, "cases_unknown": 0} == payload["cost"]
    notes = (project / "out" / "lab-notes.md").read_text()
    table = "| case | US dollars |\n|---|---:|\n| s1@1 | 0.000009 |\n| s2@1 | 0.000009 |\n"
    assert "## Cost\n\nTotal $0.000027 for 3 cases" in notes
    assert table in notes
    assert "<h2>Cost</h2>" in (project / "out" / "lab-notes.html").read_text()
    results = json.loads((project / "out" / "results.json").read_bytes())
    assert [9e-06] * 3 == [case["cost_usd"] for case in results["cases"]]


def test_a_dataset_budget_stops_the_eval_and_a_flag_replaces_it(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The dataset's budget: cost_usd stops it after three; --budget tokens=40 after two."""
    with_budget(priced(project), "budget: {cost_usd: 2.0e-05}\n")
    _, payload, _ = eval_run(project, capsys)
    assert 3 == payload["summary"]["total"], payload
    _, payload, _ = eval_run(project, capsys, "--budget", "tokens=40")
    assert payload["stopped"].startswith("budget tokens reached 60"), payload


def test_a_case_budget_in_the_dataset_replaces_the_specs_and_the_flag_replaces_it(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Case s1's budget of one request ends its run; --case-budget tokens=1000 lets it finish."""
    with_budget(project, "", " budget: {requests: 1},")
    _, payload, _ = eval_run(project, capsys)
    assert 5 == payload["summary"]["total"], payload
    ended = {
        trace.stem: json.loads(trace.read_text().splitlines()[-2])["event"]["body"]["kind"]
        for trace in (project / "out" / "traces").glob("*.jsonl")
    }
    assert "budget_exceeded" == ended.pop("s1@1")
    assert {"model_responded", "output_accepted"} >= set(ended.values())
    _, payload, _ = eval_run(
        project, capsys, "--out", str(project / "flag"), "--case-budget", "tokens=1000"
    )
    kinds = (project / "flag" / "traces" / "s1@1.jsonl").read_text()
    assert "budget_exceeded" not in kinds


@pytest.mark.parametrize(
    ("top", "case"),
    [("budget: {cost_usd: 1}\n", ""), ("", " budget: {cost_usd: 1},")],
)
def test_a_dataset_cost_budget_on_an_unpriced_model_exits_2_before_any_case(
    project: Path, capsys: pytest.CaptureFixture[str], top: str, case: str
) -> None:
    """The eval's or a case's cost budget, the model unpriced: refused, nothing run."""
    with_budget(project, top, case)
    code, _, err = eval_run(project, capsys)
    assert 2 == code
    assert "budget cost_usd: no price for openai-compatible:local@" in err
    assert not (project / "out" / "traces").exists()


def test_a_hosted_model_without_a_price_is_said_once(capsys: pytest.CaptureFixture[str]) -> None:
    """A hosted model the table does not price: one line for the whole eval, none per case."""
    spec = RunSpec.model_validate({"prompt": "p", "model": "openai:gpt-not-a-model"})
    data = Dataset(name="d", cases=tuple(Case(id=f"c{i}", input="x") for i in range(3)))
    check_priced(spec, data, None, None)
    lines = capsys.readouterr().err.splitlines()
    assert 1 == len(lines)
    assert lines[0].startswith("note: no price for openai-compatible:gpt-not-a-model@https://")
    assert lines[0].endswith(": each case's cost is recorded as unknown")


def test_a_local_model_without_a_price_says_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    """A model on this machine costs nothing to say: no line."""
    spec = RunSpec.model_validate({"prompt": "p", "model": "ollama:qwen2.5:0.5b"})
    check_priced(spec, Dataset(name="d", cases=(Case(id="c", input="x"),)), None, None)
    assert "" == capsys.readouterr().err


def test_show_and_compare_carry_the_cost(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """show: each reply's cost and price, the run's total; compare: per run and per case."""
    priced(project)
    eval_run(project, capsys, "--budget", "cost_usd=2e-05")
    eval_run(project, capsys, "--out", str(project / "b"), "--budget", "cost_usd=1e-05")
    trace = project / "out" / "traces" / "s1@1.jsonl"
    assert 0 == main(["show", str(trace)])
    shown = capsys.readouterr().out
    assert "<- model reply ($4.5e-06 at gpt-4o-mini 0.15/0.6 US dollars per million" in shown
    assert "\ncost: $0.000009\n" in shown
    code, payload, _ = cli_json(capsys, "show", str(trace))
    assert (0, 9e-06, 0) == (code, payload["cost"]["usd"], payload["cost"]["unpriced"])
    code, payload, _ = cli_json(capsys, "eval", "compare", str(project / "out"), str(project / "b"))
    assert (0, 2.7e-05, 1.8e-05) == (code, payload["cost_a"], payload["cost_b"])
    assert [9e-06, None] == payload["case_costs"]["s3@1"]
    assert 0 == main(["eval", "compare", str(project / "out"), str(project / "b")])
    assert "cost $0.000027 -> $0.000018 (cases whose cost is known)" in capsys.readouterr().out


def test_twinflow_run_says_a_hosted_models_unknown_price_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`twinflow run`'s note: one line, the run's cost unknown; none for a priced model."""
    note_unpriced(RunSpec.model_validate({"prompt": "p", "model": "gemini:gemini-not-a-model"}))
    note_unpriced(RunSpec.model_validate({"prompt": "p", "model": "openai:gpt-4o-mini"}))
    lines = capsys.readouterr().err.splitlines()
    assert 1 == len(lines)
    assert lines[0].startswith("note: no price for gemini:gemini-not-a-model@https://")
    assert lines[0].endswith(": the run's cost is recorded as unknown")
