"""One run directory has one writer at a time: a second eval run, rescore or merge is refused."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from eval_testkit import START, dataset, factory

from twinflow._base._errors import FileWriteError
from twinflow._base._files import hold_directory
from twinflow.eval import run_eval
from twinflow.eval._rescore import merge_runs, rescore
from twinflow.kernel import SteppingClock
from twinflow.kernel._process import run_process

CLOCK = SteppingClock(START)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A finished run directory."""
    out = tmp_path / "run"
    run_eval(dataset(2), factory(), out, clock=CLOCK)
    return out


def test_a_second_writer_of_a_run_directory_is_refused(run_dir: Path) -> None:
    """While one writer holds the directory, run_eval, rescore and merge into it are refused."""
    with hold_directory(run_dir):
        with pytest.raises(FileWriteError, match="another twinflow process") as caught:
            rescore(run_dir)
        assert "another twinflow process is writing" in str(caught.value)
        with pytest.raises(FileWriteError, match="another twinflow process"):
            run_eval(dataset(2), factory(), run_dir, clock=CLOCK)
        with pytest.raises(FileWriteError, match="another twinflow process"):
            merge_runs([run_dir], run_dir)
    # Released with the block: the directory can be written again.
    assert 2 == len(rescore(run_dir).cases)


def test_a_merge_into_a_new_directory_still_works_with_its_own_lock(
    run_dir: Path, tmp_path: Path
) -> None:
    """The lock file a merge creates in its target does not make the target look non-empty."""
    merged = merge_runs([run_dir], tmp_path / "merged")
    assert 2 == merged.summary.total


def test_the_command_exits_2_with_one_line_while_another_eval_writes(run_dir: Path) -> None:
    """`twinflow eval rescore` on a directory another process writes: exit 2, one line."""
    with hold_directory(run_dir):
        result = run_process(
            [sys.executable, "-m", "twinflow.cli", "eval", "rescore", str(run_dir)], timeout=120
        )
    assert 2 == result.returncode, result.stderr
    assert [
        f"twinflow eval: {run_dir}: another twinflow process is writing this run directory"
    ] == [line.split(" (")[0] for line in result.stderr.strip().splitlines()]
