"""The runner: every trial of every case through an agent, one trace each; rescoring; merging shards.

Trials: a run of ``trials`` K runs each case K times (at least its ``repeats``), trial ``r``
under the key ``<case id>@<r>`` and with the sampling seed `trial_seed` (r), which the agent
records in its ``run_started`` and the result reads back from the trace. Every mechanism below
(resume, shards, Ray, rescore, merge) works per trial: a trial is a key like any other.

Every score is computed from a verified trace (`score_trace`), in the runner as in
`rescore` and `merge`, so a run directory can be scored again by anyone, without a model.

Resuming: a case repeat whose result file exists is done and is not run again. A trace
without a result file belongs to a case the previous run was killed in; it is moved aside
(``<key>.interrupted.jsonl``, never deleted) and the case runs again.

Where cases run: with an in-process executor each case streams its trace into the run
directory as it goes. With an executor whose calls run elsewhere (``shares_filesystem =
False``: `twinflow.kernel.RayExecutor`), a case writes nothing; it returns its trace bytes, and
the driver verifies them before it writes the trace and the result (docs/adr/0041).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from twinflow._base._code import importing_from, split_dotted
from twinflow._base._files import (
    WRITER_LOCK,
    create_exclusive,
    hold_directory,
    make_directory,
    open_inside,
    read_inside,
    write_replace,
)
from twinflow.agent import Agent, CannotResume, ModelResponded, RunError, TraceEvent
from twinflow.eval._dataset import Case, Dataset
from twinflow.eval._errors import RunAborted, RunDirError, ScorerError, ShardError
from twinflow.eval._judge import JUDGEMENTS, REJUDGED, JudgeWiring, Judging
from twinflow.eval._observe import Observation, observe_verified
from twinflow.eval._report import ScoredTrace, keeps_fact, write_page, write_reports
from twinflow.eval._results import (
    CaseResult,
    CaseStatus,
    EvalResults,
    RunIdentity,
    RunManifest,
    Shard,
    Summary,
    case_key,
    read_json_model,
    refuse_planted_links,
    select_keys,
    set_aside,
    trial_seed,
)
from twinflow.eval._scorers import Custom, Judge, SchemaValid, ScorerSpec, score_all
from twinflow.eval._trials import trial_stats
from twinflow.kernel import (
    Clock,
    ClusterError,
    Executor,
    ReplayDivergenceError,
    SerialExecutor,
    TransportError,
)
from twinflow.trace import (
    GENESIS,
    Checkpoint,
    FileTraceSink,
    MemoryTraceSink,
    MerkleTree,
    TraceCorruptError,
    TraceSink,
)
from twinflow.vocab import value_bytes as canonical_bytes

__all__ = [
    "AgentFactory",
    "Progress",
    "check_plan_slot",
    "code_modules",
    "load_run",
    "merge_runs",
    "pending_keys",
    "rescore",
    "run_eval",
    "score_trace",
]

_Item = tuple[Case, int, str]
"""(case, repeat, key): one case repeat to run."""

AgentFactory = Callable[[Case, TraceSink, int], Agent[Any]]
"""Builds a fresh agent for one trial of a case, writing its trace to the given sink and
sampling with the given seed (`trial_seed`: the agent's settings carry it into the trace)."""

Progress = Callable[[int, int, Summary], None]
"""Called after each case repeat with (done, total, counts so far)."""


def _encode(value: Any) -> bytes:
    return canonical_bytes(value) + b"\n"


_NO_CASES = b'{"cases":[],'


def _encode_results(results: EvalResults, encoded: Mapping[str, bytes]) -> bytes:
    """`_encode` (results), taking each case's encoding from ``encoded`` (its cases file's
    bytes, by key) where it is there, instead of encoding every result a second time.

    RFC 8785 writes an object as its members in key order, each member's value encoded on its
    own; ``cases`` sorts first of the results' members, so the results are the encoding
    without cases with the cases' encodings spliced into its empty list.
    """
    rest = canonical_bytes(results.model_copy(update={"cases": ()}))
    if not rest.startswith(_NO_CASES):  # not the shape spliced into (a member before cases)
        return _encode(results)
    cases = b",".join(
        encoded[r.key][:-1] if r.key in encoded else canonical_bytes(r) for r in results.cases
    )
    return b'{"cases":[' + cases + b"]," + rest[len(_NO_CASES) :] + b"\n"


def _status(scores: Sequence[Any], run_status: str) -> CaseStatus:
    if any(s.outcome == "errored" for s in scores):
        return "errored"
    # A run that did not finish never passes, whatever scorers that look at part of its trace
    # (no denied calls, say) conclude; its error is on the result as the reason.
    if run_status != "finished":
        return "failed"
    return "passed" if all(s.outcome == "passed" for s in scores) else "failed"


def score_trace(
    run_dir: Path,
    case: Case,
    repeat: int,
    key: str,
    scorers: Sequence[ScorerSpec],
    latency_s: float | None,
    judging: Judging | None = None,
) -> CaseResult:
    """Verify a case's trace and score it from the trace alone.

    Args:
        run_dir: The run directory.
        case: The case.
        repeat: The repeat number.
        key: The case key (names the trace file).
        scorers: The scorers to apply.
        latency_s: The measured latency; None takes the span of the trace's clock readings.
        judging: How judge scorers are scored (live or replayed); None errors them.

    Returns:
        The result; ``flagged`` (and unscored) when the trace is missing or does not verify.
    """
    return _score_read(run_dir, case, repeat, key, scorers, latency_s, judging)[0]


class _Reading:
    """What the reports take from a trace, gathered while it is scored (ADR 0139)."""

    def __init__(self) -> None:
        self.kept: list[TraceEvent] = []
        self.models: set[str] = set()
        self.observation: Observation | None = None

    def keep(self, event: TraceEvent) -> None:
        """Keep a fact's event: every run_started, a reply only when it names a new model."""
        body = event.body
        if isinstance(body, ModelResponded):
            if body.response.model_name in self.models:
                return
            self.models.add(body.response.model_name)
        if keeps_fact(event):
            self.kept.append(event)


def _score_read(
    run_dir: Path,
    case: Case,
    repeat: int,
    key: str,
    scorers: Sequence[ScorerSpec],
    latency_s: float | None,
    judging: Judging | None,
) -> tuple[CaseResult, tuple[bytes, ScoredTrace] | None]:
    """`score_trace`, and when the trace verified, the bytes scored and what the reports take
    from them.

    The file is read whole once `open_inside` has checked the name (no link at any component,
    a regular file: a FIFO or device is refused unread); a read that fails is scored from the
    path, which flags it as before.
    """
    relative = f"traces/{key}.jsonl"
    try:
        with open_inside(run_dir, relative, what="the case's trace") as file:
            try:
                data = file.read()
            except OSError:
                data = None
    except FileNotFoundError:
        return _score_bytes(
            b"", relative, case, repeat, key, scorers, latency_s, judging=judging
        ), None
    if data is None:
        source = run_dir / relative
        return _score_bytes(
            source, relative, case, repeat, key, scorers, latency_s, judging=judging
        ), None
    reading = _Reading()
    result = _score_bytes(
        data, relative, case, repeat, key, scorers, latency_s, judging=judging, reading=reading
    )
    if reading.observation is None:
        return result, None
    # No digest: the runner writes the page from these very bytes (ADR 0146).
    return result, (data, ScoredTrace(None, reading.observation, tuple(reading.kept)))


def _flagged(
    common: dict[str, Any], problem: str, checkpoint: Checkpoint, latency_s: float | None
) -> CaseResult:
    return CaseResult(
        **common,
        status="flagged",
        scores=(),
        checkpoint=checkpoint,
        run_status="incomplete",
        attempts=0,
        steps=0,
        latency_s=latency_s or 0.0,
        problem=problem,
    )


def _score_bytes(
    data: bytes | Path,
    relative: str,
    case: Case,
    repeat: int,
    key: str,
    scorers: Sequence[ScorerSpec],
    latency_s: float | None,
    prompt: str | None = None,
    judging: Judging | None = None,
    reading: _Reading | None = None,
) -> CaseResult:
    """`score_trace` on the trace's bytes or file (``relative`` is where the run directory
    keeps them), verified and observed in one streaming pass (`observe_verified`).

    With ``prompt``, a trace whose run started from another prompt is flagged too: it verifies,
    but it is not this case's. With ``reading``, what the reports take from the trace is kept
    there (its observation once the trace verified).
    """
    common = {
        "key": key,
        "case_id": case.id,
        "repeat": repeat,
        "tags": case.tags,
        "trace": relative,
    }
    try:
        keep = None if reading is None else reading.keep
        obs, checkpoint = observe_verified(data, require_complete=True, keep=keep)
    except TraceCorruptError as exc:
        problem = f"{relative} is missing" if not data else f"{relative}: {exc.report.problem}"
        return _flagged(common, problem, exc.report.checkpoint, latency_s)
    except OSError as exc:
        unread = Checkpoint(size=0, root=MerkleTree().root().hex(), head=GENESIS)
        return _flagged(common, f"{relative}: {exc}", unread, latency_s)
    if prompt is not None and obs.prompt != prompt:
        problem = f"{relative}: its run started from another prompt than this case's"
        return _flagged(common, problem, checkpoint, latency_s)
    if reading is not None:
        reading.observation = obs
    hook = None if judging is None else judging.hook(key)
    scores = score_all(scorers, case.expected, obs, hook)
    return CaseResult(
        **common,
        status=_status(scores, obs.status),
        scores=scores,
        checkpoint=checkpoint,
        run_status=obs.status,
        attempts=obs.attempts,
        steps=obs.steps,
        latency_s=obs.duration_s if latency_s is None else latency_s,
        error=None if obs.error_type is None else f"{obs.error_type}: {obs.error}",
        seed=obs.seed,
    )


def code_modules(dataset: Dataset) -> tuple[str, ...]:
    """The modules scoring ``dataset`` would import (custom scorers, schema models), unimported.

    Raises:
        ScorerError: a scorer names something that is not a dotted path.
    """
    paths = []
    for case in dataset.cases:
        for scorer in dataset.scorers_for(case):
            if isinstance(scorer, Custom):
                paths.append(scorer.path)
            elif isinstance(scorer, SchemaValid) and scorer.model is not None:
                paths.append(scorer.model)
            elif isinstance(scorer, Judge) and scorer.verdict is not None:
                paths.append(scorer.verdict)
    return tuple(dict.fromkeys(split_dotted(path, ScorerError)[0] for path in paths))


def _refuse_untrusted_code(where: Path, dataset: Dataset, trust_code: bool) -> None:
    """A run directory is a file like any other: scoring it imports code only when told to."""
    modules = code_modules(dataset)
    if modules and not trust_code:
        raise RunDirError(
            f"{where}/run.json names scorer code to import ({', '.join(modules)}): scoring a run "
            "directory you received would run it. Pass trust_code=True (`--trust-code`) only "
            "for a run you made or trust; nothing was imported or written"
        )


def _prepare(out: Path, manifest: RunManifest) -> None:
    refuse_planted_links(out)
    make_directory(out / "traces", what="the traces folder")
    make_directory(out / "cases", what="the cases folder")
    path = out / "run.json"
    if path.exists():
        read_json_model(path, RunManifest).check_resume(manifest, out)
        return
    write_replace(path, _encode(manifest))


def check_plan_slot(run_dir: str | Path, plan: bytes) -> None:
    """Refuse to register a run directory under ``plan`` when it holds another plan.

    Raises:
        RunDirError: ``plan.note`` in the directory is another plan's.
    """
    try:
        kept = read_inside(Path(run_dir), "plan.note", what="plan.note")
    except FileNotFoundError:
        return
    if kept != plan:
        raise RunDirError(
            f"{run_dir} holds a run registered under another plan (its plan.note); one run "
            "directory has one plan: pick a new --out directory"
        )


def _collect(manifest: RunManifest, finished: Iterable[CaseResult]) -> EvalResults:
    """The run's results: those of ``finished`` the manifest lists, in its order.

    Each was written to its ``cases/<key>.json`` before it got here (or read from it, for a
    case a previous run finished), so these are the files' values without reading them back.
    """
    by_key = {result.key: result for result in finished}
    results = [by_key[key] for key in manifest.keys if key in by_key]
    return EvalResults(
        dataset=manifest.dataset.name,
        dataset_digest=manifest.dataset_digest,
        shard=manifest.shard,
        complete=len(results) == len(manifest.keys),
        summary=Summary.of(results),
        cases=tuple(results),
        trials=trial_stats(results, manifest.trials),
    )


def _run_detached(
    factory: AgentFactory, render: Callable[[Case], str], clock: Clock, item: _Item
) -> tuple[bytes, float]:
    """Run one case repeat where the run directory is not (a cluster worker): write nothing.

    Returns the trace bytes and the latency; the driver verifies them before it keeps them.
    """
    case, repeat, key = item
    sink = MemoryTraceSink()
    started = clock.monotonic()
    try:
        factory(case, sink, trial_seed(repeat)).run(render(case))
    except TransportError as exc:
        raise RunAborted(
            f"case {key}: the model could not be reached ({type(exc).__name__}: {exc}); "
            "finished cases are kept: run the same command again to resume"
        ) from exc
    except Exception:  # the trace records the failure (run_failed); scoring reads it there
        pass
    finally:
        sink.close()
    return sink.data, clock.monotonic() - started


def _keep(
    run_dir: Path,
    dataset: Dataset,
    render: Callable[[Case], str],
    item: _Item,
    data: bytes,
    latency: float,
    judging: Judging | None = None,
) -> CaseResult:
    """Verify and score a trace a worker returned, then write it and its result (driver side).

    Verified means whole, hash-chained and complete, and of this case: its run started from
    the case's prompt (a worker returning another case's good trace is caught here).

    A trace that verifies is written to ``traces/<key>.jsonl``; one that does not is kept as
    ``traces/<key>.rejected.jsonl`` (for a person to read) and its case is flagged, so what
    sits under the case's trace name is always a verified trace, written whole (atomically).
    """
    case, repeat, key = item
    relative = f"traces/{key}.jsonl"
    scorers = dataset.scorers_for(case)
    result = _score_bytes(
        data, relative, case, repeat, key, scorers, latency, render(case), judging=judging
    )
    if result.status == "flagged":
        result = result.model_copy(
            update={"problem": f"the trace a worker returned did not verify: {result.problem}"}
        )
        write_replace(run_dir / "traces" / f"{key}.rejected.jsonl", data, durable=False)
    else:
        write_replace(run_dir / relative, data, durable=False)
    write_replace(run_dir / "cases" / f"{key}.json", _encode(result), durable=False)
    return result


F = TypeVar("F", bound=Callable[..., Any])


def _one_writer(parameter: str) -> Callable[[F], F]:
    """Run the function holding the writer lock of the directory its ``parameter`` names.

    Two evals writing one run directory would set aside and rename each other's traces: the
    second is refused at once (`FileWriteError`, reason ``busy``, exit 2) instead (`hold_directory`).
    """

    def wrap(function: F) -> F:
        signature = inspect.signature(function)

        @functools.wraps(function)
        def held(*args: Any, **kwargs: Any) -> Any:
            directory = signature.bind(*args, **kwargs).arguments[parameter]
            with hold_directory(directory):
                return function(*args, **kwargs)

        return cast(F, held)

    return wrap


@_one_writer("out")
def run_eval(
    dataset: Dataset,
    factory: AgentFactory,
    out: str | Path,
    *,
    clock: Clock,
    executor: Executor | None = None,
    concurrency: int = 1,
    shard: Shard | None = None,
    prompt: Callable[[Case], str] | None = None,
    progress: Progress | None = None,
    code_dirs: Sequence[str | Path] = (),
    identity: RunIdentity | None = None,
    judges: JudgeWiring | None = None,
    plan: bytes | None = None,
    trials: int | None = None,
) -> EvalResults:
    """Run every trial of every case (of a shard) through a fresh agent; score it from its trace.

    Args:
        dataset: The dataset.
        factory: Builds the agent for each trial, given the trace sink and the trial's seed.
        out: The run directory (created; an existing one for the same dataset and shard is resumed).
        clock: Measures each case's latency (``monotonic()``).
        executor: Runs cases concurrently (default: one after another, in order).
        concurrency: Cases in flight at once.
        shard: Run only this slice of the cases.
        prompt: Turns a case into the agent's prompt (default: its ``input``).
        progress: Called after each case repeat.
        code_dirs: Directories user code is imported from (recorded for rescoring).
        identity: The spec and model, recorded in ``run.json``; a resume must match them.
        judges: The judge scorers' model and settings (judgements are traced runs of their
            own, under ``judgements/``); without it a judge scorer's score is errored.
        plan: The plan file the run is registered under (read and checked against the
            dataset and spec by the caller: `read_plan`, `check_plan`), kept as ``plan.note``;
            Lab Notes report its rule.
        trials: Trials of each case (default: the dataset's ``trials``); a resume must match.

    Returns:
        The results, also written to ``results.json`` with the Lab Notes.

    Raises:
        RunDirError: ``out`` holds a run of another dataset, shard, trial count, spec or model.
        RunAborted: The model could not be reached; finished cases are kept for a resume.
    """
    run_dir = Path(out)
    count = dataset.trials if trials is None else trials
    items = select_keys(dataset, shard, count)
    manifest = _manifest(dataset, items, code_dirs, shard, identity, count)
    if plan is not None:
        check_plan_slot(run_dir, plan)
    _prepare(run_dir, manifest)
    if plan is not None:
        write_replace(run_dir / "plan.note", plan)
    render = prompt or (lambda case: case.input)
    runner = executor or SerialExecutor()
    local = getattr(runner, "shares_filesystem", True)
    judging = Judging(run_dir, judges, mode="live")
    done: list[CaseResult] = []
    todo: list[_Item] = []
    unfinished: set[str] = set()
    for case, repeat, key in items:
        result_path = run_dir / "cases" / f"{key}.json"
        if result_path.is_file():
            done.append(read_json_model(result_path, CaseResult))
            continue
        trace = run_dir / "traces" / f"{key}.jsonl"
        if trace.exists():
            if local:
                unfinished.add(key)  # resumed from its trace in run_one, or set aside there
            else:
                set_aside(trace)
        todo.append((case, repeat, key))

    def resumed(case: Case, repeat: int, key: str) -> bool:
        """Continue a case's interrupted run from its trace; False if it cannot be (set aside)."""
        trace = run_dir / "traces" / f"{key}.jsonl"
        with trace.open("rb") as f:
            started = b"\n" in f.read(1 << 16)
        if not started:  # not one whole event: there is no run to continue
            set_aside(trace)
            return False
        agent = factory(case, MemoryTraceSink(), trial_seed(repeat))
        try:
            agent.resume(trace)
        except (CannotResume, ReplayDivergenceError, TraceCorruptError):
            # Not a run this code can continue (torn at its start, another spec, finished
            # without a result file): kept aside, and the case runs again from the start.
            set_aside(trace)
            return False
        except RunError:  # recorded in the trace (run_failed); scoring reads it there
            pass
        finally:
            agent.close()
        return True

    # What the reports take from each trace scored and paged here, by path (ADRs 0139, 0146),
    # and each result's encoding as its cases file holds it, by key (results.json reuses it).
    scored: dict[str, ScoredTrace] = {}
    encoded: dict[str, bytes] = {}

    def run_one(item: _Item) -> CaseResult:
        case, repeat, key = item
        started = clock.monotonic()
        try:
            if key not in unfinished or not resumed(case, repeat, key):
                sink = FileTraceSink(run_dir / "traces" / f"{key}.jsonl")
                try:
                    factory(case, sink, trial_seed(repeat)).run(render(case))
                finally:
                    sink.close()
        except TransportError as exc:
            raise RunAborted(
                f"case {key}: the model could not be reached ({type(exc).__name__}: {exc}); "
                f"{len(done)} finished cases are kept: run the same command again to resume"
            ) from exc
        except Exception:  # the trace records the failure (run_failed); scoring reads it there
            pass
        latency = clock.monotonic() - started
        scorers = dataset.scorers_for(case)
        result, read = _score_read(run_dir, case, repeat, key, scorers, latency, judging)
        # Written here, by the worker, not by the loop below: when another case aborts the run,
        # cases still in flight finish and are kept, so a resume does not run them again.
        encoded[key] = _encode(result)
        write_replace(run_dir / "cases" / f"{key}.json", encoded[key], durable=False)
        if read is not None:
            # The page of a verified trace, from the bytes just scored: the reports neither
            # read the file again nor write its page (ADR 0146).
            data, scored[result.trace] = read
            write_page(run_dir, result.trace, data)
        return result

    finished: Iterator[CaseResult]
    if local:
        finished = (result for _, result in runner.map_bounded(run_one, todo, concurrency))
    else:
        # The cases run elsewhere (a cluster): each returns its trace, kept here once verified.
        task = functools.partial(_run_detached, factory, render, clock)
        finished = (
            _keep(run_dir, dataset, render, todo[index], data, latency, judging)
            for index, (data, latency) in runner.map_bounded(task, todo, concurrency)
        )
    total = len(items)
    counts = Counter(result.status for result in done)  # progress's summary, kept as they come
    if progress is not None:
        progress(len(done), total, Summary.tally(counts))
    # Scorers import from the run's code directories; set once here, so a case's thread that
    # resolves one changes nothing.
    with importing_from(manifest.code_dirs):
        try:
            for result in finished:
                done.append(result)
                counts[result.status] += 1
                if progress is not None:
                    progress(len(done), total, Summary.tally(counts))
        except ClusterError as exc:
            if exc.index is None:
                raise
            raise RunAborted(
                f"case {todo[exc.index][2]}: {exc}; {len(done)} finished cases are kept: "
                "run the same command again to resume"
            ) from exc
    results = _collect(manifest, done)
    write_replace(run_dir / "results.json", _encode_results(results, encoded))
    write_reports(results, run_dir, scored)
    return results


def _manifest(
    dataset: Dataset,
    items: Sequence[_Item],
    code_dirs: Sequence[str | Path],
    shard: Shard | None,
    identity: RunIdentity | None,
    trials: int,
) -> RunManifest:
    return RunManifest(
        dataset=dataset,
        dataset_digest=dataset.digest,
        shard=shard,
        keys=tuple(k for _, _, k in items),
        code_dirs=tuple(str(Path(d).resolve()) for d in code_dirs),
        identity=identity,
        trials=trials,
    )


def pending_keys(
    dataset: Dataset,
    out: str | Path,
    *,
    shard: Shard | None = None,
    code_dirs: Sequence[str | Path] = (),
    identity: RunIdentity | None = None,
    trials: int | None = None,
) -> tuple[str, ...]:
    """The case keys `run_eval` with these arguments would still run, decided before anything
    runs or is written: a caller starts a model server only if some are left.

    Raises:
        RunDirError: ``out`` holds a run of another dataset, shard, spec or model (the same
            refusal `run_eval` makes, made here before any model loads).
    """
    run_dir = Path(out)
    count = dataset.trials if trials is None else trials
    items = select_keys(dataset, shard, count)
    path = run_dir / "run.json"
    if path.exists():
        recorded = read_json_model(path, RunManifest)
        resumed = _manifest(dataset, items, code_dirs, shard, identity, count)
        recorded.check_resume(resumed, run_dir)
    return tuple(k for _, _, k in items if not (run_dir / "cases" / f"{k}.json").is_file())


def load_run(run_dir: str | Path) -> tuple[RunManifest, EvalResults]:
    """Read a run directory's manifest and ``results.json``.

    Raises:
        RunDirError: A file is missing or invalid.
    """
    path = Path(run_dir)
    if not path.is_dir():
        raise RunDirError(f"{path}: no such run directory")
    return read_json_model(path / "run.json", RunManifest), read_json_model(
        path / "results.json", EvalResults
    )


def _rescore_dir(
    run_dir: Path, manifest: RunManifest, recorded: EvalResults, judging: Judging
) -> EvalResults:
    cases = {case.id: case for case in manifest.dataset.cases}
    latency = {r.key: r.latency_s for r in recorded.cases}
    results = []
    for result in recorded.cases:
        case = cases.get(result.case_id)
        if case is None:
            raise RunDirError(
                f"{run_dir}/results.json: case {result.case_id!r} is not in the run's dataset"
            )
        _check_key(run_dir, result)
        scorers = manifest.dataset.scorers_for(case)
        results.append(
            score_trace(
                run_dir, case, result.repeat, result.key, scorers, latency[result.key], judging
            )
        )
    return EvalResults(
        dataset=manifest.dataset.name,
        dataset_digest=manifest.dataset_digest,
        shard=manifest.shard,
        complete=recorded.complete,
        summary=Summary.of(results),
        cases=tuple(results),
        trials=trial_stats(results, manifest.trials),
    )


def _judgement_number(trace: str, key: str) -> int | None:
    """The judge's number in a judgement trace's name (``<folder>/<key>.<n>.jsonl``), or None."""
    folder, _, name = trace.partition("/")
    number = name.removeprefix(f"{key}.").removesuffix(".jsonl")
    if (
        folder not in {JUDGEMENTS, REJUDGED}
        or not number.isdigit()
        or name != f"{key}.{number}.jsonl"
    ):
        return None
    return int(number)


def _check_key(run_dir: Path, result: CaseResult) -> None:
    """A recorded key names the case's files: it must be the one its case and repeat make."""
    if result.key != case_key(result.case_id, result.repeat):
        raise RunDirError(
            f"{run_dir}/results.json: case {result.case_id!r} repeat {result.repeat} is recorded "
            f"under the key {result.key!r:.100}, not {case_key(result.case_id, result.repeat)!r}; "
            "the file was edited"
        )


def _trace_sources(by_key: dict[str, tuple[Path, CaseResult]]) -> None:
    """Check every trace a shard's ``results.json`` names before anything is written.

    Each must be a regular file inside its shard directory (`open_inside`): a path that is
    absolute, climbs out or passes through a link is refused here, so the merged directory is
    not even created.
    """
    for source_dir, recorded in by_key.values():
        with (
            contextlib.suppress(FileNotFoundError),
            open_inside(source_dir, recorded.trace, what="results.json"),
        ):
            pass


@_one_writer("run_dir")
def rescore(
    run_dir: str | Path,
    *,
    trust_code: bool = False,
    judges: JudgeWiring | None = None,
    rejudge: bool = False,
) -> EvalResults:
    """Verify every trace of a run and score it again from the traces alone (no model).

    A trace that is missing or fails verification flags its case (status ``flagged``, the
    problem named); it is never scored. The result is written to ``rescore.json``;
    ``results.json`` is left as the run wrote it.

    Args:
        run_dir: A run directory written by `run_eval` or `merge_runs`.
        trust_code: Import the scorer modules the run's dataset names (custom scorers, schema
            models), from the directories ``run.json`` records. Without it, a run whose
            scoring needs code is refused before anything is imported.
        judges: The judge scorers' settings (and, with ``rejudge``, their model): each
            recorded judgement is verified and replayed against them, calling no model.
        rejudge: Call each judge again, live; the new judgements go under ``rejudged/``.

    Returns:
        The new results.

    Raises:
        RunDirError: The directory is not a run directory, or it names code and
            ``trust_code`` is not set.
    """
    path = Path(run_dir)
    manifest, recorded = load_run(path)
    if manifest.dataset.digest != manifest.dataset_digest:
        raise RunDirError(f"{path}/run.json: the dataset does not match its digest; it was edited")
    _refuse_untrusted_code(path, manifest.dataset, trust_code)
    judging = Judging(
        path,
        judges,
        mode="live" if rejudge else "replay",
        folder=REJUDGED if rejudge else JUDGEMENTS,
    )
    with importing_from(manifest.code_dirs):
        results = _rescore_dir(path, manifest, recorded, judging)
    write_replace(path / "rescore.json", _encode(results))
    return results


@_one_writer("out")
def merge_runs(
    shard_dirs: Sequence[str | Path],
    out: str | Path,
    *,
    trust_code: bool = False,
    judges: JudgeWiring | None = None,
) -> EvalResults:
    """Combine the run directories of every shard of one dataset into one run directory.

    Every trace is copied, verified and scored again (a bad one flags its case); the merged
    results list the cases in dataset order, as an unsharded run would.

    Args:
        shard_dirs: One complete run directory per shard ``1/n`` .. ``n/n``.
        out: The new run directory (must not exist or be empty).
        trust_code: Import the scorer modules the dataset names, as `rescore`.
        judges: The judge scorers' settings: each shard's judgements are copied and
            replayed, as `rescore` does.

    Returns:
        The merged results (also written with the Lab Notes).

    Raises:
        ShardError: The directories are not the complete shards of one dataset.
        RunDirError: A directory is not a run directory, ``out`` is not empty, or the
            dataset names code and ``trust_code`` is not set.
    """
    loaded = [(Path(d), *load_run(d)) for d in shard_dirs]
    if not loaded:
        raise ShardError("merge needs at least one shard directory")
    for path, manifest, _ in loaded:
        _refuse_untrusted_code(path, manifest.dataset, trust_code)
    digests = {manifest.dataset_digest for _, manifest, _ in loaded}
    if len(digests) != 1:
        raise ShardError(
            "the shard directories are runs of different datasets; merge shards of one dataset"
        )
    counts = sorted({manifest.trials for _, manifest, _ in loaded})
    if len(counts) != 1:
        raise ShardError(
            f"the shard directories ran different numbers of trials ({', '.join(map(str, counts))}); "
            "merge shards run with one --trials"
        )
    shards = sorted(
        (manifest.shard.index, manifest.shard.count) if manifest.shard else (1, 1)
        for _, manifest, _ in loaded
    )
    count = shards[0][1]
    if shards != [(i, count) for i in range(1, count + 1)]:
        named = ", ".join(f"{i}/{n}" for i, n in shards)
        raise ShardError(
            f"the shards given are {named}; merge needs each of 1/{count} .. {count}/{count} once"
        )
    for path, _, results in loaded:
        if not results.complete:
            raise ShardError(
                f"{path} is an unfinished run; run it again to complete it, then merge"
            )
    target = Path(out)
    if target.exists() and any(p.name != WRITER_LOCK for p in target.iterdir()):
        raise RunDirError(f"{target} is not empty; merge into a new directory")
    dataset = loaded[0][1].dataset
    items = select_keys(dataset, None, counts[0])
    by_key = {r.key: (path, r) for path, _, results in loaded for r in results.cases}
    for _, _, key in items:
        if key not in by_key:
            raise ShardError(f"case {key} is in no shard's results")
    _trace_sources(by_key)
    code_dirs = tuple(dict.fromkeys(d for _, m, _ in loaded for d in m.code_dirs))
    identities = {m.identity for _, m, _ in loaded}
    manifest = RunManifest(
        dataset=dataset,
        dataset_digest=dataset.digest,
        shard=None,
        keys=tuple(k for _, _, k in items),
        code_dirs=code_dirs,
        # The shards' spec and model, when they agree (Lab Notes name them from here).
        identity=identities.pop() if len(identities) == 1 else None,
        trials=counts[0],
    )
    _prepare(target, manifest)
    judging = Judging(target, judges, mode="replay")
    merged = []
    for case, repeat, key in items:
        source_dir, recorded = by_key[key]
        copies = [(recorded.trace, f"traces/{key}.jsonl")]
        # A judgement keeps its number; its name in the merged directory is made here, never
        # taken from the shard's results.json.
        copies += [
            (link.trace, f"{JUDGEMENTS}/{key}.{number}.jsonl")
            for link in (s.judgement for s in recorded.scores)
            if link is not None and (number := _judgement_number(link.trace, key)) is not None
        ]
        for source_name, target_name in copies:
            make_directory((target / target_name).parent)
            with (
                contextlib.suppress(FileNotFoundError),
                open_inside(source_dir, source_name, what="results.json") as source,
                os.fdopen(create_exclusive(target / target_name, "trace copy"), "wb") as copy,
            ):
                shutil.copyfileobj(source, copy)
        with importing_from(code_dirs):
            result = score_trace(
                target, case, repeat, key, dataset.scorers_for(case), recorded.latency_s, judging
            )
        write_replace(target / "cases" / f"{key}.json", _encode(result))
        merged.append(result)
    results = _collect(manifest, merged)
    write_replace(target / "results.json", _encode(results))
    write_reports(results, target)
    return results
