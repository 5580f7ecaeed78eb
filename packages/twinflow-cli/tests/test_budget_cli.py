"""`twinflow run` with a `budget:` in its spec: crossing it ends the run as a recorded decision."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import CALC, OUTPUT, SPEC, chat_completion, one_line, twinflow

from twinflow.kernel import LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse


def write_project(tmp_path: Path, url: str, budget: str) -> None:
    """The calculator project with ``budget`` (YAML lines) appended to its spec."""
    (tmp_path / "calc.py").write_text(CALC)
    (tmp_path / "answer.py").write_text(OUTPUT)
    (tmp_path / "spec.yaml").write_text(SPEC.format(url=url) + budget)


def test_a_run_over_its_token_budget_ends_with_budget_exceeded(tmp_path: Path) -> None:
    """budget.requests: 1 and a second request: a budget_exceeded event, a one-line failure."""
    with LoopbackServer(chat_completion) as server:
        write_project(tmp_path, server.url, "budget:\n  requests: 1\n")
        result = twinflow("run", "spec.yaml", "--out", "out", cwd=tmp_path)
    assert 1 == result.returncode, result.stderr
    assert "requests reached 2, over the limit of 1 (budget_exceeded)" in one_line(result.stderr)
    lines = (tmp_path / "out" / "trace.jsonl").read_text().splitlines()
    kinds = [json.loads(line)["event"]["body"]["kind"] for line in lines]
    assert ["budget_exceeded", "run_failed"] == kinds[-2:]
    shown = twinflow("show", "out/trace.jsonl", cwd=tmp_path).stdout
    assert "  budget requests exceeded: 2 used, limit 1" in shown
    replayed = twinflow("replay", "out/trace.jsonl", "--spec", "spec.yaml", cwd=tmp_path)
    assert 0 == replayed.returncode, replayed.stderr


def test_a_cost_budget_is_refused_before_any_request(tmp_path: Path) -> None:
    """budget.cost_usd: exit 2 naming the key, no request sent, no run directory."""
    seen: list[LoopbackRequest] = []

    def never(request: LoopbackRequest) -> LoopbackResponse:
        seen.append(request)
        return chat_completion(request)

    with LoopbackServer(never) as server:
        write_project(tmp_path, server.url, "budget:\n  cost_usd: 0.5\n")
        result = twinflow("run", "spec.yaml", "--out", "out", cwd=tmp_path)
    assert 2 == result.returncode, result.stderr
    assert "budget.cost_usd" in one_line(result.stderr)
    assert ([], False) == (seen, (tmp_path / "out").exists())
