"""``twinflow eval``: the invoice example against the real embedded SmolLM2 server, and the
rescore / compare / merge subcommands over real run directories."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from twinflow.agent import Agent, FunctionModel, RunStarted, Trace
from twinflow.cli._main import main
from twinflow.eval import Case, Dataset, load_dataset, run_eval
from twinflow.eval._results import Shard
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.models._embedded import embedded_model_file
from twinflow.trace import TraceSink
from twinflow.vocab import Message

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "invoice-extraction"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    code = main([*argv, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out)


@pytest.mark.real_model
def test_invoice_example_runs_against_the_embedded_model_and_rescores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The 22-case invoice example runs on SmolLM2; rescore agrees; a tampered trace is flagged alone."""
    work = tmp_path / "example"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("__pycache__"))
    spec = work / "spec.yaml"
    out = tmp_path / "run"
    code, payload = _run(
        ["eval", "run", str(work / "dataset.yaml"), "--spec", str(spec), "--out", str(out)], capsys
    )
    assert (0, True) == (code, payload["complete"]), payload
    results = json.loads((out / "results.json").read_bytes())
    assert 22 == len(results["cases"]) == results["summary"]["total"]
    counts = results["summary"]
    assert (
        counts["total"]
        == counts["passed"] + counts["failed"] + counts["errored"] + counts["flagged"]
    )
    for case in results["cases"]:
        assert Trace.load(out / case["trace"]).checkpoint().root == case["checkpoint"]["root"]
    html = (out / "lab-notes.html").read_text()
    assert "<svg" in html and "http://" not in html and "https://" not in html
    assert "Pass rate" in (out / "lab-notes.md").read_text()

    # Running the finished run's command again decides from the run directory: no model starts.
    argv = ["eval", "run", str(work / "dataset.yaml"), "--spec", str(spec), "--out", str(out)]
    again = main(argv)
    captured = capsys.readouterr()
    assert (0, False) == (again, "loading SmolLM2" in captured.err + captured.out)
    assert "no model is started" in captured.out

    code, payload = _run(["eval", "rescore", str(out), "--trust-code"], capsys)
    assert (0, [], []) == (code, payload["changed"], payload["flagged"])

    victim = out / results["cases"][4]["trace"]
    data = victim.read_bytes()
    victim.write_bytes(data.replace(b'"step":1', b'"step":2', 1))
    code, payload = _run(["eval", "rescore", str(out), "--trust-code"], capsys)
    assert 1 == code
    assert [results["cases"][4]["key"]] == [f["key"] for f in payload["flagged"]]


@pytest.mark.real_model
def test_the_judged_invoice_example_runs_three_trials_on_the_embedded_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """3 trials with a judge on SmolLM2: every judgement verifies; rescore replays them all."""
    work = tmp_path / "example"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "run"
    argv = ["eval", "run", str(work / "judged.yaml"), "--spec", str(work / "spec.yaml")]
    code, payload = _run([*argv, "--out", str(out), "--trials", "3"], capsys)
    assert (0, 9) == (code, payload["summary"]["total"]), payload
    results = json.loads((out / "results.json").read_bytes())
    judged = [s for c in results["cases"] for s in c["scores"] if s["scorer"] == "judge"]
    assert 9 == len(judged)
    for score in judged:
        link = score["judgement"]
        assert link is not None, score
        assert Trace.load(out / link["trace"]).checkpoint().root == link["checkpoint"]["root"]
    # The embedded server stopped with the run: rescore replays every judgement without it.
    code, payload = _run(["eval", "rescore", str(out), "--trust-code"], capsys)
    assert (0, [], []) == (code, payload["changed"], payload["flagged"])


def _reply(request: Any) -> Message:
    prompt = request.transcript.messages[-1].text
    return Message.assistant("yes" if "good" in prompt or "flip" in prompt else "no")


def _factory(flip: bool) -> Any:
    def build(case: Case, sink: TraceSink, seed: int) -> Agent[Any]:
        handler = (
            _reply
            if not flip
            else (
                lambda r: Message.assistant(
                    "no" if "good" in r.transcript.messages[-1].text else "yes"
                )
            )
        )
        clock = SteppingClock(datetime(2026, 1, 1, tzinfo=UTC))
        return Agent(FunctionModel(handler), clock=clock, ids=CountingIds(), trace=sink)

    return build


DATASET = Dataset(
    name="yesno",
    cases=tuple(
        Case(
            id=f"q{i}",
            input=("good " if i % 2 else "bad ") + str(i),
            expected="yes" if i % 2 else "no",
        )
        for i in range(8)
    ),
)


def test_compare_and_merge_subcommands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """compare names regressions and improvements with a p-value; merge combines shards, exit 0."""
    clock = SteppingClock(datetime(2026, 1, 1, tzinfo=UTC))
    run_eval(DATASET, _factory(False), tmp_path / "a", clock=clock)
    run_eval(DATASET, _factory(True), tmp_path / "b", clock=clock)
    code, payload = _run(["eval", "compare", str(tmp_path / "a"), str(tmp_path / "b")], capsys)
    assert 0 == code
    assert (8, 0, 2 / 256) == (
        len(payload["regressions"]),
        len(payload["improvements"]),
        payload["p_value"],
    )
    assert 0 == main(["eval", "compare", str(tmp_path / "a"), str(tmp_path / "b")])
    lines = capsys.readouterr().out.splitlines()
    side = f"dataset yesno {DATASET.digest[:12]}, spec not recorded, model not recorded"
    assert [f"A: {side}", f"B: {side}"] == lines[:2]
    assert "  exact                8/8 -> 0/8 (-100.0%)" in lines
    assert lines[-3].startswith("  caveat: only 8 discordant pair(s): the exact binomial p")
    # Run directories are received input: a dataset name or case key cannot drive the terminal.
    for name in ("a", "b"):
        results_path = tmp_path / name / "results.json"
        results = json.loads(results_path.read_text())
        results["dataset"] = "yesno\x1b[2J"
        results["cases"][0]["key"] = "q0@1\x1b]0;pwned\x07"
        results_path.write_text(json.dumps(results))
    assert 0 == main(["eval", "compare", str(tmp_path / "a"), str(tmp_path / "b")])
    shown = capsys.readouterr().out
    assert ("\x1b" not in shown, "yesno\\x1b[2J" in shown) == (True, True)
    shards = [tmp_path / "s1", tmp_path / "s2"]
    for i, path in enumerate(shards, start=1):
        run_eval(DATASET, _factory(False), path, clock=clock, shard=Shard(index=i, count=2))
    code, payload = _run(["eval", "merge", *map(str, shards), "--out", str(tmp_path / "m")], capsys)
    summary = payload.get("summary", {})
    assert (0, 8, 8) == (code, summary.get("total"), summary.get("passed")), payload


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing dataset, a bad shard and a non-run directory are usage errors (exit 2)."""
    code, payload = _run(["eval", "rescore", str(tmp_path)], capsys)
    assert 2 == code and "run.json" in payload["error"]
    code, payload = _run(
        [
            "eval",
            "run",
            str(tmp_path / "none.yaml"),
            "--spec",
            str(EXAMPLE / "spec.yaml"),
            "--out",
            str(tmp_path / "o"),
        ],
        capsys,
    )
    assert 2 == code and "no such file" in payload["error"]
    with pytest.raises(SystemExit) as info:
        main(["eval", "run", "d.yaml", "--spec", "s.yaml", "--out", "o", "--shard", "5/4"])
    assert 2 == info.value.code
    with pytest.raises(SystemExit) as info:
        main(["eval", "merge", "--help"])
    assert 0 == info.value.code


@pytest.mark.real_model
def test_two_trials_on_the_embedded_model_record_seeds_and_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two invoice cases, two trials each, on SmolLM2: seeds 0 and 1000 reach the traces, the
    results carry per-case trial counts, and every trace names the model file's sha256."""
    work = tmp_path / "example"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("__pycache__"))
    whole = load_dataset(work / "dataset.yaml")
    small = whole.model_copy(update={"cases": whole.cases[:2]}).model_dump(mode="json")
    (work / "small.yaml").write_text(json.dumps(small))  # JSON is YAML
    out = tmp_path / "run"
    argv = ["eval", "run", str(work / "small.yaml"), "--spec", str(work / "spec.yaml")]
    code, payload = _run([*argv, "--out", str(out), "--trials", "2"], capsys)
    assert (0, True) == (code, payload["complete"]), payload
    results = json.loads((out / "results.json").read_bytes())
    assert [0, 1000, 0, 1000] == [c["seed"] for c in results["cases"]]
    assert [2, 2] == [c["trials"] for c in results["trials"]["cases"]]
    assert 2 == payload["trials"]["k"]
    gguf = embedded_model_file()
    for case in results["cases"]:
        body = next(iter(Trace.load(out / case["trace"]).events)).body
        assert isinstance(body, RunStarted) and body.environment is not None
        assert f"{gguf.name} sha256:" in (body.environment.model or "")
    assert "## Trials" in (out / "lab-notes.md").read_text()
