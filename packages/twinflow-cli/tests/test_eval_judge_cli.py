"""``twinflow eval`` with a judge scorer on a scripted loopback server: the judgement is traced,
rescored with the server gone, judged again with ``--rejudge``; bad judges are refused."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_testkit import (
    EVAL_PROMPT,
    calc_project,
    chat_answer,
    cli_json,
    completion,
    scripted_chat,
)

from twinflow.agent import Trace
from twinflow.kernel import LoopbackServer
from twinflow.kernel._loopback import LoopbackRequest, LoopbackResponse

DATASET = """\
name: sums
scorers:
- kind: judge
  name: judged
  rubric: The answer is the sum of the two numbers.
  model: {{url: "{url}", dialect: llama.cpp, max_tokens: 64}}
cases:
- {{id: s1, input: "2 and 3", expected: "5"}}
- {{id: s2, input: "3 and 2", expected: "5"}}
"""


class Judge:
    """A scripted server: the agent's replies from `scripted_chat`, a judge's verdict here."""

    def __init__(self) -> None:
        self.verdict: Any = {"passed": True, "reason": "it is 5"}
        self.judged = 0

    def __call__(self, request: LoopbackRequest) -> LoopbackResponse:
        body = request.json_value()
        assert isinstance(body, dict)
        if '"passed"' not in json.dumps(body.get("response_format")):
            return scripted_chat(request)
        self.judged += 1
        content = json.dumps({"action": "final", "output": self.verdict})
        if self.verdict == "garbage":
            content = "the answer looks fine to me"
        message = {"role": "assistant", "content": content}
        reply = completion(message, model="scripted-judge", completion_id="chatcmpl-judge")
        return chat_answer(body, reply)


@pytest.fixture
def judge() -> Judge:
    """The judge's script (its verdict can be changed between runs)."""
    return Judge()


@pytest.fixture
def server(judge: Judge) -> Iterator[LoopbackServer]:
    """The scripted server, for the agent and the judge."""
    with LoopbackServer(judge) as running:
        yield running


@pytest.fixture
def project(tmp_path: Path, server: LoopbackServer) -> Path:
    """A judged dataset, a spec on the scripted server and its tool module, side by side."""
    dataset = DATASET.format(url=server.url)
    return calc_project(tmp_path, server.url, prompt=EVAL_PROMPT, dataset=dataset)


def eval_run(project: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    """`twinflow eval run` of the judged dataset into project/out."""
    return cli_json(
        capsys,
        "eval",
        "run",
        str(project / "dataset.yaml"),
        "--spec",
        str(project / "spec.yaml"),
        "--out",
        str(project / "out"),
    )


def judge_scores(run_dir: Path, name: str = "results.json") -> list[dict[str, Any]]:
    """The judge scores of a results file, in case order."""
    results = json.loads((run_dir / name).read_text())
    return [s for c in results["cases"] for s in c["scores"] if s["scorer"] == "judged"]


def test_a_judged_run_links_a_verified_judgement_per_case(
    project: Path, judge: Judge, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each case's judge score names its judgement trace, whose checkpoint it records."""
    code, payload, _ = eval_run(project, capsys)
    assert (0, 2, 2) == (code, payload["summary"]["passed"], judge.judged)
    for score in judge_scores(project / "out"):
        trace = Trace.load(project / "out" / score["judgement"]["trace"])
        checkpoint = trace.checkpoint()
        recorded = score["judgement"]["checkpoint"]
        assert (checkpoint.size, checkpoint.root, checkpoint.head) == (
            recorded["size"],
            recorded["root"],
            recorded["head"],
        )


def test_rescore_replays_the_judgements_with_the_judge_server_gone(
    project: Path, server: LoopbackServer, judge: Judge, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the server stopped, rescore replays every judgement and finds the same scores."""
    assert 0 == eval_run(project, capsys)[0]
    server.__exit__(None, None, None)
    code, payload, err = cli_json(capsys, "eval", "rescore", str(project / "out"))
    assert (0, [], "", 2) == (code, payload["changed"], err, payload["judgements_replayed"])
    assert judge_scores(project / "out") == judge_scores(project / "out", "rescore.json")


def test_rejudge_calls_the_judge_again_and_lists_changed_verdicts(
    project: Path, judge: Judge, capsys: pytest.CaptureFixture[str]
) -> None:
    """--rejudge asks the judge live; a judge now saying no is listed, exit 1."""
    assert 0 == eval_run(project, capsys)[0]
    judge.verdict = {"passed": False, "reason": "changed its mind"}
    code, payload, err = cli_json(capsys, "eval", "rescore", str(project / "out"), "--rejudge")
    assert 1 == code
    expected = [
        {"key": "s1@1", "scorer": "judged", "before": "passed", "after": "failed"},
        {"key": "s2@1", "scorer": "judged", "before": "passed", "after": "failed"},
    ]
    assert expected == payload["changed_verdicts"]
    assert (4, 2) == (judge.judged, err.count("\n"))
    assert "--rejudge: judge 'judged' calls http://127.0.0.1:" in err
    assert (project / "out" / "rejudged" / "s1@1.1.jsonl").is_file()


def test_a_judge_answering_garbage_errors_the_case_and_the_run_goes_on(
    project: Path, judge: Judge, capsys: pytest.CaptureFixture[str]
) -> None:
    """Replies that never validate as a verdict: the case is errored naming why, not a crash."""
    judge.verdict = "garbage"
    code, payload, _ = eval_run(project, capsys)
    assert (0, 2) == (code, payload["summary"]["errored"])
    detail = judge_scores(project / "out")[0]["detail"]
    assert detail.startswith("the judge failed: InvalidModelReply: ")


def test_a_judge_with_a_bad_model_section_is_refused_before_anything_runs(
    project: Path, judge: Judge, capsys: pytest.CaptureFixture[str]
) -> None:
    """A judge model section that is not a model spec: one line, exit 2, no run directory."""
    text = (project / "dataset.yaml").read_text()
    (project / "dataset.yaml").write_text(text.replace("dialect: llama.cpp", "dialect: nope"))
    code, payload, _ = eval_run(project, capsys)
    assert (2, False) == (code, (project / "out").exists())
    assert "judge 'judged': model:" in payload["error"]
    assert 0 == judge.judged


def test_rejudge_sends_no_key_the_user_did_not_name(
    project: Path, judge: Judge, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run directory's judge naming api_key_env: --rejudge refuses (exit 2) until --send-key."""
    monkeypatch.setenv("JUDGE_KEY", "tf-judge-test-key-7c1e9a")
    text = (project / "dataset.yaml").read_text()
    keyed = text.replace("max_tokens: 64}", "max_tokens: 64, api_key_env: JUDGE_KEY}")
    (project / "dataset.yaml").write_text(keyed)
    assert 0 == eval_run(project, capsys)[0]
    code, payload, _ = cli_json(capsys, "eval", "rescore", str(project / "out"), "--rejudge")
    assert (2, 2) == (code, judge.judged)
    assert "would send the key in $JUDGE_KEY to http://127.0.0.1:" in payload["error"]
    argv = ("eval", "rescore", str(project / "out"), "--rejudge", "--send-key", "JUDGE_KEY")
    assert (0, 4) == (cli_json(capsys, *argv)[0], judge.judged)


@pytest.mark.parametrize("held", [[], ["s1@1.1.jsonl"]])
def test_rejudge_refuses_a_rejudged_folder_that_is_a_link(
    project: Path,
    judge: Judge,
    capsys: pytest.CaptureFixture[str],
    tmp_path_factory: pytest.TempPathFactory,
    held: list[str],
) -> None:
    """A received run whose rejudged/ is a link: exit 2, one error line, nothing made or moved there."""
    assert 0 == eval_run(project, capsys)[0]
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    for name in held:
        (elsewhere / name).write_bytes(b"theirs")
    (project / "out" / "rejudged").symlink_to(elsewhere, target_is_directory=True)
    code, payload, _ = cli_json(capsys, "eval", "rescore", str(project / "out"), "--rejudge")
    assert (2, 1, held) == (code, len(payload["error"].splitlines()), sorted(os.listdir(elsewhere)))
    assert "symbolic link" in payload["error"]
