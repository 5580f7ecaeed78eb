"""The runner, rescoring, resume, shards and merge, with a scripted model and real trace files."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from eval_testkit import START, dataset, factory

from twinflow._base._errors import FileWriteError
from twinflow._base._files import WRITER_LOCK
from twinflow.agent import Agent, FunctionModel, Trace
from twinflow.eval import Case, EvalValueError, RunAborted, RunDirError, Summary, run_eval
from twinflow.eval._rescore import load_run, merge_runs, rescore
from twinflow.eval._results import RunIdentity, Shard, select_keys
from twinflow.eval._stats import RunSide, compare_results, compare_runs
from twinflow.kernel import SteppingClock, SubprocessLauncher, ThreadExecutor, TransportError
from twinflow.kernel._netpolicy import free_port
from twinflow.trace import TraceSink
from twinflow.vocab import value_bytes as canonical_bytes

CLOCK = SteppingClock(START)


def _verdicts(results: Any) -> list[tuple[str, str, tuple[Any, ...]]]:
    return [(c.key, c.status, c.scores) for c in results.cases]


def test_run_writes_results_traces_and_checkpoint_roots(tmp_path: Path) -> None:
    """Each case repeat gets a trace; results.json records its status, scores and checkpoint root."""
    data = dataset(6, wrong=(1,), bad=(2,))
    results = run_eval(data, factory(), tmp_path / "run", clock=CLOCK)
    assert Summary(total=6, passed=4, failed=2, errored=0, flagged=0) == results.summary
    assert results.complete
    on_disk = json.loads((tmp_path / "run" / "results.json").read_bytes())
    assert results.model_dump(mode="json") == on_disk
    first = results.cases[0]
    assert Trace.load(tmp_path / "run" / first.trace).checkpoint() == first.checkpoint
    assert {"lab-notes.md", "lab-notes.html", "run.json", "results.json"} <= set(
        os.listdir(tmp_path / "run")
    )


def test_results_json_is_the_canonical_encoding_of_the_results(tmp_path: Path) -> None:
    """results.json, spliced from the cases files' encodings, is byte for byte the canonical
    encoding of the results: with trials, and cases an earlier run of a resumed one scored."""
    out = tmp_path / "run"
    data = dataset(4, wrong=(1,))
    first = run_eval(data, factory(), out, clock=CLOCK, trials=2)
    assert canonical_bytes(first) + b"\n" == (out / "results.json").read_bytes()
    (out / "cases" / "c2@2.json").unlink()
    resumed = run_eval(data, factory(), out, clock=CLOCK, trials=2)
    assert canonical_bytes(resumed) + b"\n" == (out / "results.json").read_bytes()


def test_progress_counts_the_results_so_far_an_earlier_runs_included(tmp_path: Path) -> None:
    """Each progress call carries the summary of every result the run holds at that point."""
    out = tmp_path / "run"
    data = dataset(4, wrong=(1,))
    run_eval(data, factory(), out, clock=CLOCK)
    for key in ("c1@1", "c3@1"):
        (out / "cases" / f"{key}.json").unlink()
    calls: list[tuple[int, int, Summary]] = []
    results = run_eval(data, factory(), out, clock=CLOCK, progress=lambda *call: calls.append(call))
    by_key = {r.key: r for r in results.cases}
    held = [by_key[k] for k in ("c0@1", "c2@1", "c1@1", "c3@1")]  # the earlier run's first
    expected = [(n, 4, Summary.of(held[:n])) for n in (2, 3, 4)]
    assert expected == calls


def test_rescore_gives_identical_scores_and_flags_exactly_a_tampered_trace(tmp_path: Path) -> None:
    """Rescoring from traces alone reproduces every score; editing one trace flags only that case."""
    run_dir = tmp_path / "run"
    results = run_eval(dataset(6, wrong=(1,)), factory(), run_dir, clock=CLOCK)
    assert results.cases == rescore(run_dir).cases
    trace = run_dir / "traces" / "c3@1.jsonl"
    trace.write_bytes(trace.read_bytes().replace(b"13.0", b"14.0", 1))
    again = rescore(run_dir)
    assert ["c3@1"] == [c.key for c in again.cases if c.status == "flagged"]
    flagged = next(c for c in again.cases if c.key == "c3@1")
    assert () == flagged.scores
    assert flagged.problem is not None and "edited" in flagged.problem
    others = [c for c in again.cases if c.key != "c3@1"]
    assert [c for c in results.cases if c.key != "c3@1"] == others
    assert json.loads((run_dir / "rescore.json").read_bytes())["summary"]["flagged"] == 1


def test_a_deleted_trace_is_flagged(tmp_path: Path) -> None:
    """A trace that is gone flags its case as missing rather than scoring it."""
    run_dir = tmp_path / "run"
    run_eval(dataset(2), factory(), run_dir, clock=CLOCK)
    (run_dir / "traces" / "c0@1.jsonl").unlink()
    flagged = rescore(run_dir).cases[0]
    assert ("flagged", "traces/c0@1.jsonl is missing") == (flagged.status, flagged.problem)


def test_resume_after_an_interrupt_runs_only_unfinished_cases(tmp_path: Path) -> None:
    """A run interrupted in case c3 resumes at c3; the partial trace is kept aside, never lost."""
    run_dir = tmp_path / "run"
    built: list[str] = []
    inner = factory(built)

    def interrupting(case: Case, sink: TraceSink, seed: int) -> Agent[Any]:
        if case.id == "c3":
            sink.write(b'{"digest":"partial')
            raise KeyboardInterrupt
        return inner(case, sink, seed)

    with pytest.raises(KeyboardInterrupt):
        run_eval(dataset(6), interrupting, run_dir, clock=CLOCK)
    assert ["c0", "c1", "c2"] == built
    assert not (run_dir / "results.json").exists()
    resumed: list[str] = []
    results = run_eval(dataset(6), factory(resumed), run_dir, clock=CLOCK)
    assert ["c3", "c4", "c5"] == resumed
    assert 6 == results.summary.passed
    assert b'{"digest":"partial' == (run_dir / "traces" / "c3@1.interrupted.jsonl").read_bytes()


KILLED_RUN = """
import http.server, sys
sys.path.insert(0, {tests!r})
from eval_testkit import START, dataset, factory
from twinflow.eval import run_eval
from twinflow.kernel import (
    SteppingClock,
)
inner = factory()
class Up(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
def slow(case, sink, seed):
    if case.id == "c4":  # tell the parent we are mid-case, then hang until killed
        http.server.HTTPServer(("127.0.0.1", {port}), Up).serve_forever()
    return inner(case, sink, seed)
run_eval(dataset(8), slow, {out!r}, clock=SteppingClock(START))
"""


def test_a_killed_run_resumes_without_rerunning_finished_cases(tmp_path: Path) -> None:
    """SIGKILL in the middle of case c4; the next run does c4..c7 only and the results are complete."""
    out, port = tmp_path / "run", free_port()
    script = KILLED_RUN.format(tests=str(Path(__file__).parent), port=port, out=str(out))
    launcher = SubprocessLauncher(grace=1.0)
    with launcher.launch(
        [sys.executable, "-c", script],
        health_url=f"http://127.0.0.1:{port}/",
        deadline=60.0,
        log_path=tmp_path / "child.log",
    ) as child:
        os.killpg(child.pid, signal.SIGKILL)  # the whole group: the run dies mid-case, unwarned
    # The launcher reaps its watchdog; the killed run may still be exiting. A blocking flock on
    # the run's writer lock returns once the dead process has let go of it (no sleep, no window).
    with (out / WRITER_LOCK).open("rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fcntl.flock(lock, fcntl.LOCK_UN)
    assert ["c0@1", "c1@1", "c2@1", "c3@1"] == sorted(
        p.stem for p in (out / "cases").glob("*.json")
    )
    assert (out / "traces" / "c4@1.jsonl").exists()
    built: list[str] = []
    results = run_eval(dataset(8), factory(built), out, clock=CLOCK)
    assert ["c4", "c5", "c6", "c7"] == built
    assert (8, 8, True) == (results.summary.total, results.summary.passed, results.complete)
    assert (out / "traces" / "c4@1.interrupted.jsonl").exists()
    assert results.cases == rescore(out).cases


def test_a_run_directory_of_another_dataset_is_refused(tmp_path: Path) -> None:
    """Resuming into a directory holding another dataset's run is a usage error."""
    run_eval(dataset(2), factory(), tmp_path, clock=CLOCK)
    with pytest.raises(RunDirError, match="another dataset"):
        run_eval(dataset(3), factory(), tmp_path, clock=CLOCK)


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        (
            RunIdentity(spec_digest="b" * 64, model="m"),
            "another spec (recorded: aaaaaaaaaaaa; this run: bbbbbbbbbbbb)",
        ),
        (
            RunIdentity(spec_digest="a" * 64, model="other"),
            "another model (recorded: m; this run: other)",
        ),
        (None, "another spec (recorded: aaaaaaaaaaaa; this run: not recorded)"),
    ],
)
def test_resuming_with_another_spec_or_model_is_refused_naming_both(
    tmp_path: Path, changed: RunIdentity | None, named: str
) -> None:
    """run.json records the spec digest and the model; a resume with another one is refused."""
    first = RunIdentity(spec_digest="a" * 64, model="m")
    run_eval(dataset(2), factory(), tmp_path, clock=CLOCK, identity=first)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(RunDirError) as caught:
        run_eval(dataset(2), factory(), tmp_path, clock=CLOCK, identity=changed)
    assert named in str(caught.value)
    assert before == {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    # The same identity resumes (nothing left to run).
    assert 2 == run_eval(dataset(2), factory(), tmp_path, clock=CLOCK, identity=first).summary.total


@pytest.mark.parametrize("name", ["results.json", "run.json", "lab-notes.md", "cases/c0@1.json"])
def test_eval_files_refuse_a_planted_link(tmp_path: Path, name: str) -> None:
    """A link planted at a name the run writes: refused before any file is written, target untouched."""
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "out"
    (out / "cases").mkdir(parents=True)
    (out / name).symlink_to(victim)
    with pytest.raises(FileWriteError, match="symbolic link"):
        run_eval(dataset(2), factory(), out, clock=CLOCK)
    assert "precious" == victim.read_text()
    written = [p for p in out.rglob("*") if not p.is_dir() and p.name != WRITER_LOCK]
    assert [name] == [str(p.relative_to(out)) for p in written]


def test_an_unreachable_model_aborts_and_keeps_finished_cases(tmp_path: Path) -> None:
    """A transport failure stops the run (it is not a model failure) and finished cases stay."""
    inner = factory()

    def unreachable(case: Case, sink: TraceSink, seed: int) -> Agent[Any]:
        agent = inner(case, sink, seed)
        if case.id == "c2":

            def refuse(request: Any) -> Any:
                raise TransportError(
                    "connection refused", reason="connect", url="http://127.0.0.1:9"
                )

            agent.model = type(agent.model)(refuse)
        return agent

    with pytest.raises(RunAborted, match="case c2@1: the model could not be reached"):
        run_eval(dataset(4), unreachable, tmp_path, clock=CLOCK)
    assert 2 == len(list((tmp_path / "cases").glob("*.json")))


def test_concurrent_run_matches_serial_run(tmp_path: Path) -> None:
    """With a thread executor at concurrency 4 the verdicts equal a serial run's, in dataset order."""
    data = dataset(12, wrong=(2, 7), bad=(5,))
    serial = run_eval(data, factory(), tmp_path / "a", clock=CLOCK)
    threaded = run_eval(
        data, factory(), tmp_path / "b", clock=CLOCK, executor=ThreadExecutor(), concurrency=4
    )
    assert _verdicts(serial) == _verdicts(threaded)


def test_progress_is_reported_after_each_case(tmp_path: Path) -> None:
    """The progress callback sees 0/n first, then every case done."""
    seen: list[tuple[int, int]] = []
    run_eval(
        dataset(3), factory(), tmp_path, clock=CLOCK, progress=lambda d, t, s: seen.append((d, t))
    )
    assert [(0, 3), (1, 3), (2, 3), (3, 3)] == seen


def test_shards_partition_the_cases() -> None:
    """The slices 1/n..n/n are disjoint and together hold every case, repeats staying together."""
    data = dataset(20)
    keys = [k for s in range(1, 5) for _, _, k in select_keys(data, Shard(index=s, count=4))]
    assert sorted(k for _, _, k in select_keys(data, None)) == sorted(keys)
    assert Shard(index=2, count=4) == Shard.parse("2/4")
    # Superscripts, thousands of digits, other scripts' digits pass str.isdigit: one typed error too.
    for bad in ("0/4", "5/4", "x", "1/", "\u00b9/\u00b2", "1/" + "9" * 5000, "\u0661/\u0662"):
        with pytest.raises(EvalValueError, match="--shard"):
            Shard.parse(bad)


def test_merged_shards_equal_an_unsharded_run(tmp_path: Path) -> None:
    """Three shards merged give the same verdicts, in the same order, as one unsharded run."""
    data = dataset(10, wrong=(3,), bad=(8,))
    whole = run_eval(data, factory(), tmp_path / "whole", clock=CLOCK)
    shards = [tmp_path / f"s{i}" for i in (1, 2, 3)]
    for i, path in enumerate(shards, start=1):
        run_eval(data, factory(), path, clock=CLOCK, shard=Shard(index=i, count=3))
    merged = merge_runs(shards, tmp_path / "merged")
    assert _verdicts(whole) == _verdicts(merged)
    assert merged.cases == rescore(tmp_path / "merged").cases
    assert (tmp_path / "merged" / "lab-notes.html").is_file()


def test_merge_refuses_missing_shards_and_flags_tampered_traces(tmp_path: Path) -> None:
    """Merging without every shard is refused; a tampered shard trace is flagged in the merge."""
    data = dataset(6)
    shards = [tmp_path / f"s{i}" for i in (1, 2)]
    for i, path in enumerate(shards, start=1):
        run_eval(data, factory(), path, clock=CLOCK, shard=Shard(index=i, count=2))
    with pytest.raises(RunDirError, match=r"merge needs each of 1/2 \.\. 2/2 once") as caught:
        merge_runs(shards[:1], tmp_path / "m1")
    assert "shards" == caught.value.reason
    victim = next((shards[0] / "traces").glob("*.jsonl"))
    victim.write_bytes(victim.read_bytes()[:-40] + b"\n")
    merged = merge_runs(shards, tmp_path / "m2")
    assert [victim.stem] == [c.key for c in merged.cases if c.status == "flagged"]


def test_compare_lists_regressions_and_improvements(tmp_path: Path) -> None:
    """Comparing two runs pairs cases by key and reports each change with the McNemar p-value."""
    a = run_eval(dataset(8, wrong=(0,)), factory(), tmp_path / "a", clock=CLOCK)
    b_data = dataset(8, wrong=(1, 2, 3, 4, 5, 6, 7))
    b = run_eval(b_data, factory(), tmp_path / "b", clock=CLOCK)
    comparison = compare_results(a, b)
    assert ("c0@1",) == comparison.improvements
    assert tuple(f"c{i}@1" for i in range(1, 8)) == comparison.regressions
    assert 2 * (1 + 8) / 256 == comparison.p_value  # exact binomial tail, k <= 1 of 8
    from_dirs = compare_runs(tmp_path / "a", tmp_path / "b")
    # The directories add what only the traces hold: the outputs (every case's changed here).
    assert tuple(f"c{i}@1" for i in range(8)) == from_dirs.outputs_changed
    from_results = {"outputs_changed": (), "side_a": None, "side_b": None, "differs": ()}
    assert comparison == from_dirs.model_copy(update=from_results)


def test_compare_names_both_sides_scorer_deltas_and_a_small_sample(tmp_path: Path) -> None:
    """compare says what each side ran and where they differ, per-scorer counts, and that 8
    discordant pairs are too few to conclude."""
    data_a, data_b = dataset(8, wrong=(0,)), dataset(8, wrong=(1, 2, 3, 4, 5, 6, 7))
    for name, data, spec in (("a", data_a, "a" * 64), ("b", data_b, "b" * 64)):
        identity = RunIdentity(spec_digest=spec, model="openai-compatible llama.cpp m1")
        run_eval(data, factory(), tmp_path / name, clock=CLOCK, identity=identity)
    c = compare_runs(tmp_path / "a", tmp_path / "b")
    assert ("dataset", "spec") == c.differs
    expected_a = RunSide(
        dataset=f"scripted {data_a.digest[:12]}",
        spec="a" * 12,
        model="openai-compatible llama.cpp m1",
    )
    assert expected_a == c.side_a
    assert [
        ("fields", 8, 7, 1),
        ("schema", 8, 8, 8),
        ("tool_calls", 8, 8, 8),
        ("no_denied_calls", 8, 8, 8),
    ] == [(d.scorer, d.scored, d.passed_a, d.passed_b) for d in c.scorers]
    assert -0.75 == c.scorers[0].delta
    assert (c.caveat or "").startswith("only 8 discordant pair(s): the exact binomial p is used")


def test_compare_gives_no_caveat_from_ten_discordant_pairs_and_one_for_none(
    tmp_path: Path,
) -> None:
    """12 regressions: no small-sample caveat; two identical runs: the test has nothing to weigh."""
    run_eval(dataset(12), factory(), tmp_path / "a", clock=CLOCK)
    run_eval(dataset(12, wrong=tuple(range(12))), factory(), tmp_path / "b", clock=CLOCK)
    run_eval(dataset(12), factory(), tmp_path / "c", clock=CLOCK)
    assert None is compare_runs(tmp_path / "a", tmp_path / "b").caveat
    same = compare_runs(tmp_path / "a", tmp_path / "c")
    assert ((), "no discordant pairs:") == (same.differs, (same.caveat or "")[:20])


def test_compare_reports_a_case_still_failing_for_another_reason(tmp_path: Path) -> None:
    """c1 fails in both runs, first with a wrong answer, then with no valid one: reported."""
    run_eval(dataset(3, wrong=(1,)), factory(), tmp_path / "a", clock=CLOCK)
    run_eval(dataset(3, bad=(1,)), factory(), tmp_path / "b", clock=CLOCK)
    comparison = compare_runs(tmp_path / "a", tmp_path / "b")
    expected = ((), (), ("c1@1",), ("c1@1",))
    actual = (
        comparison.regressions,
        comparison.improvements,
        comparison.reasons_changed,
        comparison.outputs_changed,
    )
    assert expected == actual


def test_load_run_reports_a_foreign_directory(tmp_path: Path) -> None:
    """A directory that is not a run directory is named in the error."""
    with pytest.raises(RunDirError, match=r"run\.json: no such file"):
        load_run(tmp_path)


def test_an_interrupted_case_resumes_from_its_trace(tmp_path: Path) -> None:
    """A case whose trace stops after its tool returned goes on from there: no step is redone."""
    run_dir = tmp_path / "run"
    whole = run_eval(dataset(2), factory(), tmp_path / "whole", clock=CLOCK)
    lines = (tmp_path / "whole" / whole.cases[1].trace).read_bytes().splitlines(keepends=True)
    cut = 1 + max(i for i, line in enumerate(lines) if b'"kind":"tool_returned"' in line)
    (run_dir / "traces").mkdir(parents=True)
    (run_dir / "traces" / "c1@1.jsonl").write_bytes(b"".join(lines[:cut]))
    asked: list[str] = []

    def counting(case: Case, sink: TraceSink, seed: int) -> Agent[Any]:
        agent = factory()(case, sink, seed)
        model = agent.model
        agent.model = FunctionModel(
            lambda request: (asked.append(case.id), model.request(request).message)[1]
        )
        return agent

    results = run_eval(dataset(2), counting, run_dir, clock=CLOCK)
    # c0 runs from the start (a tool call, an answer); c1 only asks for its answer.
    assert (2, ["c0", "c0", "c1"]) == (results.summary.passed, asked)
    kinds = [e.body.kind for e in Trace.load(run_dir / "traces" / "c1@1.jsonl").events]
    assert ("run_resumed", "run_finished") == (kinds[cut], kinds[-1])
    assert not (run_dir / "traces" / "c1@1.interrupted.jsonl").exists()


def test_a_case_stopped_inside_a_tool_call_is_not_run_again(tmp_path: Path) -> None:
    """Its trace ends at a `tool_called` with no result: resuming the eval names the call and
    stops, running neither that case nor its tool again; the other finished case is kept."""
    run_dir = tmp_path / "run"
    whole = run_eval(dataset(2), factory(), tmp_path / "whole", clock=CLOCK)
    lines = (tmp_path / "whole" / whole.cases[1].trace).read_bytes().splitlines(keepends=True)
    cut = 1 + max(i for i, line in enumerate(lines) if b'"kind":"tool_called"' in line)
    (run_dir / "traces").mkdir(parents=True)
    kept = b"".join(lines[:cut])
    (run_dir / "traces" / "c1@1.jsonl").write_bytes(kept)
    built: list[str] = []
    with pytest.raises(RunDirError) as refused:
        run_eval(dataset(2), factory(built), run_dir, clock=CLOCK)
    # c1's agent is built once, for the resume that refuses; never again for a fresh run.
    expected = (True, True, kept, ["c1"])
    actual = (
        "case c1@1" in str(refused.value),
        "would repeat that call" in str(refused.value),
        (run_dir / "traces" / "c1@1.jsonl").read_bytes(),
        [case for case in built if case == "c1"],
    )
    assert expected == actual
