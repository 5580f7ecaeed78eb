"""Rescoring reproduces a run exactly: same user code importable, same words for the same numbers."""

from __future__ import annotations

import sys
from pathlib import Path

from eval_testkit import START, dataset, factory

from twinflow.eval import Case, Dataset, rescore, run_eval
from twinflow.kernel import SteppingClock

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
    assert results.cases == rescore(run_dir).cases
    assert str(code) not in sys.path
