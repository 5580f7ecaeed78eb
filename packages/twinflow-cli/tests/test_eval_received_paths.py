"""``eval merge / rescore / compare`` on received run directories: every path a directory names is
read inside it (no absolute path, no '..', no link at any component, no FIFO), a refusal is one
line with exit 2 and nothing is written, and compare verifies the traces it compares."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from twinflow.agent import Agent, FunctionModel
from twinflow.cli._main import main
from twinflow.eval import Case, Dataset, run_eval
from twinflow.eval._results import Shard
from twinflow.kernel import CountingIds, SteppingClock
from twinflow.trace import TraceSink
from twinflow.vocab import Message

DATASET = Dataset(
    name="yesno",
    cases=tuple(Case(id=f"q{i}", input=f"good {i}", expected="yes") for i in range(4)),
)
SECRET = b"SECRET-KEY-MATERIAL-0123456789\n"


def _clock() -> SteppingClock:
    return SteppingClock(datetime(2026, 1, 1, tzinfo=UTC))


def _factory(case: Case, sink: TraceSink, seed: int) -> Agent[Any]:
    return Agent(
        FunctionModel(lambda r: Message.assistant("yes")),
        clock=_clock(),
        ids=CountingIds(),
        trace=sink,
    )


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.err


def _shards(tmp_path: Path) -> list[Path]:
    shards = [tmp_path / "s1", tmp_path / "s2"]
    for i, path in enumerate(shards, start=1):
        run_eval(DATASET, _factory, path, clock=_clock(), shard=Shard(index=i, count=2))
    return shards


def _plant(run_dir: Path, secret: Path, variant: str) -> str:
    """Make the first case of ``run_dir`` name its trace the way ``variant`` says; the path named."""
    results_path = run_dir / "results.json"
    results = json.loads(results_path.read_bytes())
    case = results["cases"][0]
    trace = run_dir / case["trace"]
    outside = secret.parent / "outside"
    outside.mkdir(exist_ok=True)
    (outside / trace.name).write_bytes(SECRET)
    named = case["trace"]
    if variant == "absolute":
        named = str(secret)
    elif variant == "climbing":
        named = os.path.relpath(secret, run_dir)
    elif variant == "climbing-inside":
        named = f"traces/../../{run_dir.name}/../{secret.name}"
    elif variant == "link":
        trace.unlink()
        trace.symlink_to(secret)
    elif variant == "traces-dir-link":
        for name in (run_dir / "traces").iterdir():
            name.rename(outside / f"kept-{name.name}")
        (run_dir / "traces").rmdir()
        (run_dir / "traces").symlink_to(outside)
    elif variant == "fifo":
        trace.unlink()
        os.mkfifo(trace)
    case["trace"] = named
    results_path.write_text(json.dumps(results))
    return named


VARIANTS = ["absolute", "climbing", "climbing-inside", "link", "traces-dir-link", "fifo"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_merge_refuses_a_trace_path_that_leaves_its_shard_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], variant: str
) -> None:
    """A shard naming a trace outside itself, through a link or at a FIFO: exit 2, no output dir."""
    secret = tmp_path / "secret.key"
    secret.write_bytes(SECRET)
    shards = _shards(tmp_path)
    named = _plant(shards[1], secret, variant)
    out = tmp_path / "merged"
    code, err = _cli(["eval", "merge", *map(str, shards), "--out", str(out)], capsys)
    assert 2 == code, err
    assert 1 == len(err.strip().splitlines()), err
    assert "results.json" in err and named.split("/")[-1][:40] in err, err
    assert not out.exists()


@pytest.mark.parametrize("variant", ["link", "traces-dir-link", "fifo"])
def test_rescore_refuses_a_trace_that_is_a_link_or_not_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], variant: str
) -> None:
    """Rescore reads each trace inside the run directory: a link or FIFO is exit 2, no rescore.json."""
    secret = tmp_path / "secret.key"
    secret.write_bytes(SECRET)
    run_dir = tmp_path / "run"
    run_eval(DATASET, _factory, run_dir, clock=_clock())
    _plant(run_dir, secret, variant)
    code, err = _cli(["eval", "rescore", str(run_dir)], capsys)
    assert 2 == code, err
    assert 1 == len(err.strip().splitlines()), err
    assert not (run_dir / "rescore.json").exists()


@pytest.mark.parametrize("key", ["../../escape", "/abs/escape", "q0@2"])
def test_rescore_refuses_a_recorded_key_its_case_does_not_make(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    """A key names the case's files: one edited to another name or out of the directory is exit 2."""
    run_dir = tmp_path / "run"
    run_eval(DATASET, _factory, run_dir, clock=_clock())
    results = json.loads((run_dir / "results.json").read_bytes())
    results["cases"][0]["key"] = key
    (run_dir / "results.json").write_text(json.dumps(results))
    code, err = _cli(["eval", "rescore", str(run_dir)], capsys)
    assert 2 == code, err
    assert "results.json" in err and "edited" in err, err
    assert not (run_dir / "rescore.json").exists()


@pytest.mark.parametrize("variant", VARIANTS)
def test_compare_refuses_a_trace_path_that_leaves_its_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], variant: str
) -> None:
    """Compare reads each scored trace inside its run directory: every escape is exit 2, one line."""
    secret = tmp_path / "secret.key"
    secret.write_bytes(SECRET)
    run_eval(DATASET, _factory, tmp_path / "a", clock=_clock())
    run_eval(DATASET, _factory, tmp_path / "b", clock=_clock())
    _plant(tmp_path / "b", secret, variant)
    code, err = _cli(["eval", "compare", str(tmp_path / "a"), str(tmp_path / "b")], capsys)
    assert 2 == code, err
    assert 1 == len(err.strip().splitlines()), err
    assert "SECRET" not in err


@pytest.mark.parametrize("change", ["rewritten", "removed", "swapped"])
def test_compare_verifies_the_traces_it_compares(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: str
) -> None:
    """A scored trace altered, removed or swapped for another case's after scoring: exit 1."""
    run_eval(DATASET, _factory, tmp_path / "a", clock=_clock())
    run_eval(DATASET, _factory, tmp_path / "b", clock=_clock())
    traces = sorted((tmp_path / "b" / "traces").glob("*.jsonl"))
    if change == "rewritten":
        data = traces[0].read_bytes()
        traces[0].write_bytes(data.replace(b'"yes"', b'"no!"', 1))
    elif change == "removed":
        traces[0].unlink()
    else:
        traces[0].write_bytes(traces[1].read_bytes())
    code, err = _cli(["eval", "compare", str(tmp_path / "a"), str(tmp_path / "b")], capsys)
    assert 1 == code, err
    assert 1 == len(err.strip().splitlines()) and traces[0].name in err, err
