"""Judge scorers: each judgement is a traced run of its own, linked, verified and replayed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from eval_testkit import START, dataset, factory

from twinflow.agent import FunctionModel, Trace
from twinflow.eval import Dataset, RunAborted, run_eval
from twinflow.eval._judge import JudgeWiring
from twinflow.eval._rescore import merge_runs, rescore
from twinflow.eval._results import Shard
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.kernel._errors import TransportError
from twinflow.vocab import Message, ModelRequest, ModelSettings

CLOCK = SteppingClock(START)
RUBRIC = "The answer passes when its total_eur is a positive number."


def judged(n: int = 4, *, wrong: tuple[int, ...] = ()) -> Dataset:
    """The scripted dataset with a judge scorer added to its scorers."""
    data = dataset(n, wrong=wrong).model_dump(mode="json")
    data["scorers"] = [
        {"kind": "fields"},
        {"kind": "judge", "name": "positive", "rubric": RUBRIC, "model": {"url": "scripted"}},
    ]
    return Dataset.model_validate(data)


def verdict_reply(flip: bool = False) -> Callable[[ModelRequest], Message]:
    """A judge that reads the answer from its prompt; ``flip`` gives the opposite verdict."""

    def reply(request: ModelRequest) -> Message:
        prompt = request.transcript.messages[-1].text
        answer = json.loads(prompt.split("\n\n", 1)[1])["answer"]
        positive = answer["total_eur"] > 0
        verdict = positive != flip
        return Message.assistant(json.dumps({"passed": verdict, "reason": f"positive={positive}"}))

    return reply


def wiring(
    reply: Callable[[ModelRequest], Message] | None = None, *, temperature: float = 0.0
) -> JudgeWiring:
    """Judges on a scripted model; without ``reply`` any call to the model fails the test."""

    def gone(request: ModelRequest) -> Message:
        raise AssertionError("the judge was called")

    return JudgeWiring(
        model=lambda judge: FunctionModel(reply or gone),
        settings=lambda judge: ModelSettings(temperature=temperature, max_tokens=64, seed=0),
        clock=SteppingClock(START),
        ids=CountingIds(prefix="judge-"),
    )


def _judge_scores(results: Any) -> list[tuple[str, str]]:
    return [(c.key, s.outcome) for c in results.cases for s in c.scores if s.scorer == "positive"]


def test_each_judgement_is_a_verified_trace_linked_from_its_score(tmp_path: Path) -> None:
    """A judged run writes one judgement trace per case, its checkpoint on the score."""
    run_dir = tmp_path / "run"
    results = run_eval(
        judged(4, wrong=(1,)), factory(), run_dir, clock=CLOCK, judges=wiring(verdict_reply())
    )
    assert [("c0@1", "passed"), ("c1@1", "failed"), ("c2@1", "passed"), ("c3@1", "passed")] == (
        _judge_scores(results)
    )
    score = results.cases[0].scores[1]
    assert score.judgement is not None
    assert "judgements/c0@1.1.jsonl" == score.judgement.trace
    assert Trace.load(run_dir / score.judgement.trace).checkpoint() == score.judgement.checkpoint
    assert "positive=True" == score.detail
    notes = (run_dir / "lab-notes.md").read_text()
    assert "([positive's judgement](judgements/c0@1.1.jsonl))" in notes
    assert (
        'href="judgements/c0@1.1.jsonl">positive\'s judgement</a>'
        in (run_dir / "lab-notes.html").read_text()
    )


def test_rescore_replays_judgements_without_calling_the_judge(tmp_path: Path) -> None:
    """Rescoring a judged run gives identical scores with a judge that fails if called."""
    run_dir = tmp_path / "run"
    results = run_eval(
        judged(4, wrong=(2,)), factory(), run_dir, clock=CLOCK, judges=wiring(verdict_reply())
    )
    assert results.cases == rescore(run_dir, judges=wiring()).cases


def test_a_tampered_judgement_errors_its_score_alone(tmp_path: Path) -> None:
    """An edited judgement trace does not verify: that judge score is errored, naming it."""
    run_dir = tmp_path / "run"
    run_eval(judged(3), factory(), run_dir, clock=CLOCK, judges=wiring(verdict_reply()))
    path = run_dir / "judgements" / "c1@1.1.jsonl"
    path.write_bytes(path.read_bytes().replace(b"positive=True", b"positive=Fals", 1))
    again = rescore(run_dir, judges=wiring())
    assert [("c0@1", "passed"), ("c1@1", "errored"), ("c2@1", "passed")] == _judge_scores(again)
    detail = again.cases[1].scores[1].detail
    assert "judgements/c1@1.1.jsonl does not verify" in detail
    assert "errored" == again.cases[1].status


def test_a_judgement_moved_to_another_case_is_refused(tmp_path: Path) -> None:
    """A verified judgement of another case's output does not score this case."""
    run_dir = tmp_path / "run"
    run_eval(judged(2), factory(), run_dir, clock=CLOCK, judges=wiring(verdict_reply()))
    source = (run_dir / "judgements" / "c0@1.1.jsonl").read_bytes()
    (run_dir / "judgements" / "c1@1.1.jsonl").write_bytes(source)
    detail = rescore(run_dir, judges=wiring()).cases[1].scores[1].detail
    assert "judgements/c1@1.1.jsonl judged another output than this case's" == detail


def test_a_judgement_made_with_other_settings_does_not_replay(tmp_path: Path) -> None:
    """Replay compares the judge's configuration: other settings are a divergence, errored."""
    run_dir = tmp_path / "run"
    run_eval(judged(2), factory(), run_dir, clock=CLOCK, judges=wiring(verdict_reply()))
    again = rescore(run_dir, judges=wiring(temperature=0.5))
    assert ["errored", "errored"] == [o for _, o in _judge_scores(again)]
    assert "does not replay" in again.cases[0].scores[1].detail


def test_a_judge_answering_garbage_is_a_typed_error_recorded_in_its_trace(tmp_path: Path) -> None:
    """A judge whose replies never validate: an errored score naming OutputValidationFailed, linked."""
    run_dir = tmp_path / "run"
    garbage = wiring(lambda request: Message.assistant("{not a verdict"))
    results = run_eval(judged(2), factory(), run_dir, clock=CLOCK, judges=garbage)
    score = results.cases[0].scores[1]
    assert ("errored", True) == (
        score.outcome,
        score.detail.startswith("the judge failed: OutputValidationFailed: "),
    )
    assert score.judgement is not None
    assert Trace.load(run_dir / score.judgement.trace).checkpoint() == score.judgement.checkpoint
    assert results.cases == rescore(run_dir, judges=wiring()).cases


def test_a_verdict_of_the_wrong_shape_is_errored(tmp_path: Path) -> None:
    """A verdict model without a boolean pass field: errored before the judge is called."""
    data = judged(1).model_dump(mode="json")
    data["scorers"][1]["pass_field"] = "reason"
    results = run_eval(
        Dataset.model_validate(data), factory(), tmp_path / "run", clock=CLOCK, judges=wiring()
    )
    assert "has no boolean field 'reason'" in results.cases[0].scores[1].detail
    assert not (tmp_path / "run" / "judgements" / "c0@1.1.jsonl").exists()


def test_rejudge_calls_the_judge_again_and_keeps_the_first_judgements(tmp_path: Path) -> None:
    """--rejudge makes new judgements under rejudged/; the recorded ones are left as they were."""
    run_dir = tmp_path / "run"
    results = run_eval(judged(3), factory(), run_dir, clock=CLOCK, judges=wiring(verdict_reply()))
    before = (run_dir / "judgements" / "c0@1.1.jsonl").read_bytes()
    again = rescore(run_dir, judges=wiring(verdict_reply(flip=True)), rejudge=True)
    assert ["failed"] * 3 == [o for _, o in _judge_scores(again)]
    assert ["passed"] * 3 == [o for _, o in _judge_scores(results)]
    link = again.cases[0].scores[1].judgement
    assert link is not None and "rejudged/c0@1.1.jsonl" == link.trace
    assert before == (run_dir / "judgements" / "c0@1.1.jsonl").read_bytes()


def test_an_unreachable_judge_aborts_the_run_keeping_finished_cases(tmp_path: Path) -> None:
    """A judge whose server cannot be reached stops the run, as the agent's model does."""

    def unreachable(request: ModelRequest) -> Message:
        raise TransportError("connection refused", reason="connect", url="http://127.0.0.1:9")

    with pytest.raises(RunAborted, match="the judge could not be reached"):
        run_eval(judged(2), factory(), tmp_path / "run", clock=CLOCK, judges=wiring(unreachable))


def test_merged_shards_carry_their_judgements(tmp_path: Path) -> None:
    """Merging judged shards copies each judgement and replays it: the same verdicts."""
    data = judged(6, wrong=(3,))
    shards = []
    for index in (1, 2):
        out = tmp_path / f"s{index}"
        run_eval(
            data,
            factory(),
            out,
            clock=CLOCK,
            shard=Shard(index=index, count=2),
            judges=wiring(verdict_reply()),
        )
        shards.append(out)
    merged = merge_runs(shards, tmp_path / "merged", judges=wiring())
    whole = run_eval(
        data, factory(), tmp_path / "whole", clock=CLOCK, judges=wiring(verdict_reply())
    )
    assert _judge_scores(whole) == _judge_scores(merged)
    assert all((tmp_path / "merged" / "judgements" / f"c{i}@1.1.jsonl").is_file() for i in range(6))


def test_a_judge_model_that_cannot_be_built_errors_its_score(tmp_path: Path) -> None:
    """The wiring refusing a judge's model: an errored score naming why, no judgement file."""

    def refuse(judge: Any) -> Any:
        raise ValueError("no such dialect")

    broken = JudgeWiring(
        model=refuse,
        settings=lambda judge: ModelSettings(seed=0),
        clock=SteppingClock(START),
        ids=CountingIds(),
    )
    results = run_eval(judged(1), factory(), tmp_path / "run", clock=CLOCK, judges=broken)
    score = results.cases[0].scores[1]
    assert ("errored", "the judge's model: ValueError: no such dialect") == (
        score.outcome,
        score.detail,
    )
    assert not (tmp_path / "run" / "judgements" / "c0@1.1.jsonl").exists()


def test_lab_notes_link_no_judgement_path_outside_the_judge_folders(tmp_path: Path) -> None:
    """A results file naming a judgement at another path: Lab Notes do not link it."""
    from twinflow.eval._report import render_markdown

    run_dir = tmp_path / "run"
    results = run_eval(judged(1), factory(), run_dir, clock=CLOCK, judges=wiring(verdict_reply()))
    case = results.cases[0]
    link = case.scores[1].judgement
    assert link is not None
    moved = link.model_copy(update={"trace": "../../elsewhere/c0@1.1.jsonl"})
    score = case.scores[1].model_copy(update={"judgement": moved})
    edited = results.model_copy(
        update={"cases": (case.model_copy(update={"scores": (case.scores[0], score)}),)}
    )
    linked = "([positive's judgement](judgements/c0@1.1.jsonl))"
    assert (True, False) == (
        linked in render_markdown(results),
        "elsewhere" in render_markdown(edited),
    )
