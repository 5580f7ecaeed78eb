"""Rescoring reproduces a run exactly: same user code importable, same words for the same numbers."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from eval_testkit import START, dataset, factory

from twinflow.agent import Agent
from twinflow.eval import Case, Dataset, RunAborted, RunDirError, run_eval
from twinflow.eval._rescore import merge_runs, rescore
from twinflow.kernel import SteppingClock, ThreadExecutor
from twinflow.kernel._errors import TransportError
from twinflow.trace import TraceSink

SCORER = '''
def total_is_positive(observation, expected):
    """1.0 when the output total is positive."""
    output = observation.output
    return 1.0 if isinstance(output, dict) and float(output.get("total_eur", 0)) > 0 else 0.0
'''


def test_expected_numbers_are_held_in_their_canonical_json_form() -> None:
    """108.0 and 108 are one JSON number; a case holds the form a run directory stores."""
    case = Case(id="c", input="x", expected={"total": 108.0, "items": [1.5, 2.0]})
    assert {"total": 108, "items": [1.5, 2]} == case.expected
    assert int is type(case.expected["total"])  # type: ignore[index]  # a dict, asserted above


def test_rescore_imports_user_code_from_the_directories_the_run_used(tmp_path: Path) -> None:
    """A custom scorer beside the dataset is found again by rescore, from another sys.path."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "my_scorers.py").write_text(SCORER)
    base = dataset(3)
    data = Dataset.model_validate(
        {
            **base.model_dump(),
            "scorers": [{"kind": "custom", "path": "my_scorers:total_is_positive"}],
        }
    )
    run_dir = tmp_path / "run"
    sys.path.insert(0, str(code))
    try:
        results = run_eval(data, factory(), run_dir, clock=SteppingClock(START), code_dirs=[code])
    finally:
        sys.path.remove(str(code))
        sys.modules.pop("my_scorers", None)
    assert ["passed"] * 3 == [c.status for c in results.cases]
    assert results.cases == rescore(run_dir, trust_code=True).cases
    assert str(code) not in sys.path


def test_a_received_run_directory_runs_no_code_unless_trusted(tmp_path: Path) -> None:
    """Rescore and merge of a run naming scorer code refuse it, import nothing, write nothing."""
    code = tmp_path / "code"
    code.mkdir()
    marker = tmp_path / "PWNED"
    (code / "planted.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
        "def total_is_positive(obs, expected):\n    return True\n"
    )
    base = dataset(2)
    data = Dataset.model_validate({**base.model_dump(), "scorers": [{"kind": "no_denied_calls"}]})
    run_dir = tmp_path / "run"
    run_eval(data, factory(), run_dir, clock=SteppingClock(START), code_dirs=[code])
    # The bundle as an attacker ships it: its run.json now names the planted module.
    manifest = json.loads((run_dir / "run.json").read_text())
    manifest["dataset"]["scorers"] = [{"kind": "custom", "path": "planted:total_is_positive"}]
    tampered = Dataset.model_validate(manifest["dataset"])
    manifest["dataset_digest"] = tampered.digest
    (run_dir / "run.json").write_text(json.dumps(manifest))
    before = sorted(p.name for p in run_dir.iterdir())
    with pytest.raises(RunDirError, match="planted") as caught:
        rescore(run_dir)
    with pytest.raises(RunDirError, match="planted"):
        merge_runs([run_dir], tmp_path / "merged")
    expected = (False, before, False)
    actual = (
        marker.exists(),
        sorted(p.name for p in run_dir.iterdir()),
        (tmp_path / "merged").exists(),
    )
    assert expected == actual
    assert "--trust-code" in str(caught.value)
    try:
        rescore(run_dir, trust_code=True)
    finally:
        sys.modules.pop("planted", None)
    assert marker.exists()


def test_a_run_that_failed_never_passes_even_if_its_scorers_do(tmp_path: Path) -> None:
    """A case whose agent run failed is failed, with the error as its reason."""
    base = dataset(2, bad=(1,))
    data = Dataset.model_validate({**base.model_dump(), "scorers": [{"kind": "no_denied_calls"}]})
    results = run_eval(data, factory(), tmp_path / "run", clock=SteppingClock(START))
    by_id = {c.case_id: c for c in results.cases}
    assert ("passed", "failed") == (by_id["c0"].status, by_id["c1"].status)
    assert by_id["c1"].error is not None and "OutputValidationFailed" in by_id["c1"].error
    assert "passed" == by_id["c1"].scores[0].outcome


def test_cases_in_flight_when_the_run_aborts_are_kept(tmp_path: Path) -> None:
    """At concurrency 4, every case that started beside the one that aborts finishes and is kept."""
    inner = factory()

    def unreachable(case: Case, sink: TraceSink, seed: int) -> Agent[Any]:
        agent = inner(case, sink, seed)
        if case.id == "c0":

            def refuse(request: Any) -> Any:
                raise TransportError(
                    "connection refused", reason="connect", url="http://127.0.0.1:9"
                )

            agent.model = type(agent.model)(refuse)
        return agent

    with pytest.raises(RunAborted):
        run_eval(
            dataset(8),
            unreachable,
            tmp_path,
            clock=SteppingClock(START),
            executor=ThreadExecutor(),
            concurrency=4,
        )
    # Which neighbours had started when c0 failed depends on thread timing; each that started
    # (it has a trace) must have its result written, and the aborted case must not.
    started = {p.stem for p in (tmp_path / "traces").glob("*.jsonl")} - {"c0@1"}
    kept = {p.stem for p in (tmp_path / "cases").glob("*.json")}
    assert started == kept


@pytest.mark.parametrize("number", ["\u00b2", "9" * 5000])
def test_a_judgement_named_by_digits_int_refuses_is_not_a_judgement(number: str) -> None:
    """A received judgement trace named ``<key>.².jsonl`` (``str.isdigit`` takes it, ``int``
    does not) is no judgement of the key, not a crash."""
    from twinflow.eval._rescore import _judgement_number

    assert _judgement_number(f"judgements/c@1.{number}.jsonl", "c@1") is None
    assert 3 == _judgement_number("judgements/c@1.3.jsonl", "c@1")
