"""``twinflow eval run --ray``: a scripted OpenAI-compatible server on loopback, cases on a local Ray."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_testkit import completion

from twinflow.cli._main import main
from twinflow.kernel import LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse
from twinflow.kernel._netpolicy import free_port

DATASET = """
name: yesno
scorers: [{kind: exact}]
cases:
""" + "".join(
    f"- {{id: q{i}, input: '{'good' if i % 2 else 'bad'} {i}', expected: '{'yes' if i % 2 else 'no'}'}}\n"
    for i in range(6)
)

SPEC = """
prompt: "Answer yes or no: {{input}}"
model: {{url: "{url}", mode: native, name: scripted}}
max_steps: 1
"""


def yes_no(request: LoopbackRequest) -> LoopbackResponse:
    """A scripted chat-completions server: "yes" when the last message says good, else "no"."""
    body = request.json_value()
    assert isinstance(body, dict) and isinstance(body["messages"], list)
    last = body["messages"][-1]
    assert isinstance(last, dict)
    answer = "yes" if "good" in str(last["content"]) else "no"
    reply = completion({"role": "assistant", "content": answer}, completion_tokens=1)
    return LoopbackResponse.json_body(reply)


def _files(tmp_path: Path, url: str) -> tuple[Path, Path]:
    (tmp_path / "dataset.yaml").write_text(DATASET)
    (tmp_path / "spec.yaml").write_text(SPEC.format(url=url))
    return tmp_path / "dataset.yaml", tmp_path / "spec.yaml"


def _eval(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any, str]:
    code = main(["eval", *argv, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def _verdicts(run_dir: Path) -> list[tuple[Any, ...]]:
    results = json.loads((run_dir / "results.json").read_bytes())
    return [(c["key"], c["status"], c["scores"]) for c in results["cases"]]


@pytest.mark.usefixtures("ray_executor")
def test_eval_run_on_ray_gives_the_local_verdicts_and_rescores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--ray runs every case on the local Ray: the verdicts of a local run, progress to 6/6, rescore ok."""
    with LoopbackServer(yes_no) as server:
        dataset, spec = _files(tmp_path, server.url)
        common = [str(dataset), "--spec", str(spec)]
        code, local, _ = _eval(["run", *common, "--out", str(tmp_path / "local")], capsys)
        assert (0, True) == (code, local["complete"])
        argv = ["run", *common, "--out", str(tmp_path / "ray"), "--concurrency", "2", "--ray"]
        code, on_ray, err = _eval(argv, capsys)
    assert (0, True, 6) == (code, on_ray["complete"], on_ray["summary"]["passed"])
    assert "6/6 cases done: 6 passed" in err
    assert _verdicts(tmp_path / "local") == _verdicts(tmp_path / "ray")
    code, payload, _ = _eval(["rescore", str(tmp_path / "ray")], capsys)
    assert (0, [], []) == (code, payload["changed"], payload["flagged"])


@pytest.mark.usefixtures("ray_executor")
def test_an_unreachable_model_aborts_naming_the_ray_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model server no worker can reach stops the run (exit 2), naming the case and the node."""
    dataset, spec = _files(tmp_path, f"http://127.0.0.1:{free_port()}")
    argv = ["run", str(dataset), "--spec", str(spec), "--out", str(tmp_path / "run"), "--ray"]
    code, payload, _ = _eval(argv, capsys)
    assert 2 == code
    assert "the model could not be reached (TransportError" in payload["error"]
    assert "raised on Ray node " in payload["error"]
