"""``twinflow eval run --budget`` / ``--case-budget`` on a scripted loopback server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_testkit import EVAL_PROMPT, calc_project, cli_json

from twinflow.cli._main import main
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
        ("--budget=cost_usd=1", "no price for any model yet"),
        ("--budget=dollars=1", "give one of tokens"),
        ("--budget=tokens", "give KEY=N"),
        ("--case-budget=dollars=1", "dollars"),
    ],
)
def test_a_budget_flag_that_cannot_be_kept_exits_2_before_any_case(
    project: Path, capsys: pytest.CaptureFixture[str], flag: str, words: str
) -> None:
    """A cost, an unknown key or a malformed flag: exit 2, nothing run."""
    argv = ["eval", "run", str(project / "dataset.yaml"), "--spec", str(project / "spec.yaml")]
    try:
        code = main([*argv, "--out", str(project / "out"), flag])
    except SystemExit as exited:  # argparse refuses a malformed flag itself
        code = int(str(exited.code))
    assert 2 == code
    assert words in capsys.readouterr().err
    assert not (project / "out" / "traces").exists()
