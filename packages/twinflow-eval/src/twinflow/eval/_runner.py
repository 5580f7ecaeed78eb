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

import dataclasses
import functools
import inspect
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from twinflow._base._code import importing_from, split_dotted
from twinflow._base._files import (
    hold_directory,
    make_directory,
    read_inside,
    write_replace,
)
from twinflow.agent import (
    Agent,
)
from twinflow.eval._dataset import Case, Dataset
from twinflow.eval._details import ScoredTrace, write_page
from twinflow.eval._errors import RunAborted, RunDirError, scorer_error
from twinflow.eval._judge import JudgeWiring, Judging
from twinflow.eval._lab_notes import write_reports
from twinflow.eval._limiter import EvalBudget, SharedLimiter
from twinflow.eval._results import (
    CaseResult,
    EvalResults,
    RunIdentity,
    RunManifest,
    Shard,
    Summary,
    read_json_model,
    refuse_planted_links,
    select_keys,
    set_aside,
    trial_seed,
)
from twinflow.eval._resume import _resumed
from twinflow.eval._scorers import Custom, Judge, SchemaValid
from twinflow.eval._scoring import (
    _encode,
    _encode_results,
    _Reading,
    _score_bytes,
    _score_read,
)
from twinflow.eval._simulated import UserFactory, check_users, converse_with, user_trace
from twinflow.eval._trials import trial_stats
from twinflow.kernel import (
    Clock,
    ClusterError,
    Executor,
    SerialExecutor,
    TransportError,
)
from twinflow.trace import (
    FileTraceSink,
    MemoryTraceSink,
    TraceSink,
)

__all__ = [
    "AgentFactory",
    "Progress",
    "check_plan_slot",
    "code_modules",
    "pending_keys",
    "run_eval",
]

_Item = tuple[Case, int, str]
"""(case, repeat, key): one case repeat to run."""

AgentFactory = Callable[[Case, TraceSink, int], Agent[Any]]
"""Builds a fresh agent for one trial of a case, writing its trace to the given sink and
sampling with the given seed (`trial_seed`: the agent's settings carry it into the trace)."""

Progress = Callable[[int, int, Summary], None]
"""Called after each case repeat with (done, total, counts so far)."""


def code_modules(dataset: Dataset) -> tuple[str, ...]:
    """The modules scoring ``dataset`` would import (custom scorers, schema models), unimported.

    Raises:
        EvalValueError (``reason="scorer"``): a scorer names something that is not a dotted path.
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
    return tuple(dict.fromkeys(split_dotted(path, scorer_error)[0] for path in paths))


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


def _collect(
    manifest: RunManifest, finished: Iterable[CaseResult], stopped: str | None = None
) -> EvalResults:
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
        stopped=stopped,
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
        _converse(factory(case, sink, trial_seed(repeat)), render(case), case.turns)
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
    budget: EvalBudget | None = None,
) -> CaseResult:
    """Verify and score a trace a worker returned, then write it and its result (driver side);
    a verified trace's use is added to ``budget``.

    Verified means whole, hash-chained and complete, and of this case: its run started from
    the case's prompt (a worker returning another case's good trace is caught here).

    A trace that verifies is written to ``traces/<key>.jsonl``; one that does not is kept as
    ``traces/<key>.rejected.jsonl`` (for a person to read) and its case is flagged, so what
    sits under the case's trace name is always a verified trace, written whole (atomically).
    """
    case, repeat, key = item
    relative = f"traces/{key}.jsonl"
    scorers = dataset.scorers_for(case)
    reading = None if budget is None else _Reading()
    result = _score_bytes(
        data,
        relative,
        case,
        repeat,
        key,
        scorers,
        latency,
        render(case),
        judging=judging,
        reading=reading,
    )
    if reading is not None and reading.observation is not None and budget is not None:
        budget.note(reading.observation)
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
    budget: EvalBudget | None = None,
    users: UserFactory | None = None,
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
        budget: The run's total budget: once the cases that ran used more of it, no case
            starts (here or on a cluster); ``results.stopped`` says which and how many.
        users: Builds the simulated users' agents (needed when a case has one: the dataset's
            or its own ``user``); each writes ``traces/<key>.user.jsonl`` beside the case's.

    Returns:
        The results, also written to ``results.json`` with the Lab Notes.

    Raises:
        RunDirError: ``out`` holds a run of another dataset, shard, trial count, spec or model.
        RunAborted: The model could not be reached; finished cases are kept for a resume.
        EvalValueError: A case has a simulated user and no ``users`` is given, or the cases
            run where the run directory is not (a simulated user's trace is written beside
            the case's, in process).
    """
    run_dir = Path(out)
    count = dataset.trials if trials is None else trials
    items = select_keys(dataset, shard, count)
    runner = executor or SerialExecutor()
    local = getattr(runner, "shares_filesystem", True)
    written = {key for _, _, key in items if (run_dir / "cases" / f"{key}.json").is_file()}
    # Only the cases still to run need their simulated users (a finished run needs none).
    to_run = [case for case, _, key in items if key not in written]
    check_users(dataset, to_run, users is not None, local)
    manifest = _manifest(dataset, items, code_dirs, shard, identity, count)
    if plan is not None:
        check_plan_slot(run_dir, plan)
    _prepare(run_dir, manifest)
    if plan is not None:
        write_replace(run_dir / "plan.note", plan)
    render = prompt or (lambda case: case.input)
    judging = Judging(run_dir, judges, mode="live")
    done, todo, unfinished = _sort_items(run_dir, items, local, written)
    run_one = _LocalCase(run_dir, dataset, factory, render, clock, judging, unfinished, done)
    run_one.users = users
    sleep = getattr(clock, "sleep", None)
    if sleep is not None:
        # Cases in flight share what their servers say: most requests refused, all hold off.
        run_one.limiter = SharedLimiter(sleep)
    run_one.budget = budget
    finished: Iterator[CaseResult]
    # Taken one by one as slots free up: once the budget is spent, no more is taken.
    left = (item for item in todo if budget is None or budget.stopped is None)
    if local:
        finished = (result for _, result in runner.map_bounded(run_one, left, concurrency))
    else:
        # The cases run elsewhere (a cluster): each returns its trace, kept here once verified
        # (and its use added to the budget before the next case is taken).
        task = functools.partial(_run_detached, factory, render, clock)
        finished = (
            _keep(run_dir, dataset, render, todo[index], data, latency, judging, budget)
            for index, (data, latency) in runner.map_bounded(task, left, concurrency)
        )
    # Scorers import from the run's code directories; set once here, so a case's thread that
    # resolves one changes nothing.
    with importing_from(manifest.code_dirs):
        _collect_finished(finished, done, todo, len(items), progress)
    results = _collect(manifest, done, None if budget is None else budget.stopped)
    write_replace(run_dir / "results.json", _encode_results(results, run_one.encoded))
    write_reports(results, run_dir, run_one.scored)
    return results


def _sort_items(
    run_dir: Path, items: Sequence[_Item], local: bool, written: set[str]
) -> tuple[list[CaseResult], list[_Item], set[str]]:
    """The results already written (of the ``written`` keys), the items still to run, and
    those of them whose trace an interrupted run left (resumed from it in-process; set aside
    when cases run elsewhere)."""
    done: list[CaseResult] = []
    todo: list[_Item] = []
    unfinished: set[str] = set()
    for case, repeat, key in items:
        if key in written:
            done.append(read_json_model(run_dir / "cases" / f"{key}.json", CaseResult))
            continue
        trace = run_dir / "traces" / f"{key}.jsonl"
        if trace.exists():
            if local:
                unfinished.add(key)  # resumed from its trace in _LocalCase, or set aside there
            else:
                set_aside(trace)
        todo.append((case, repeat, key))
    return done, todo, unfinished


def _converse(agent: Agent[Any], prompt: str, turns: Sequence[str]) -> None:
    """Run a case: its prompt, then each further user turn, one conversation in one trace."""
    result = agent.run(prompt)
    for turn in turns:
        result = agent.run(turn, continue_from=result)


@dataclasses.dataclass
class _LocalCase:
    """Runs one case repeat in this process, its trace streamed into the run directory, and
    scores it; called by the executor, perhaps in several threads."""

    run_dir: Path
    dataset: Dataset
    factory: AgentFactory
    render: Callable[[Case], str]
    clock: Clock
    judging: Judging
    unfinished: set[str]
    done: list[CaseResult]
    """The results so far (for the count an aborted run reports)."""
    scored: dict[str, ScoredTrace] = dataclasses.field(default_factory=dict)
    """What the reports take from each trace scored and paged here, by path (ADRs 0139, 0146)."""
    encoded: dict[str, bytes] = dataclasses.field(default_factory=dict)
    """Each result's encoding as its cases file holds it, by key (results.json reuses it)."""
    limiter: SharedLimiter | None = None
    """Holds off starting cases while most requests are refused (the clock's ``sleep``)."""
    budget: EvalBudget | None = None
    """The run's total budget, each finished case's use added to it."""
    users: UserFactory | None = None
    """Builds the simulated users' agents."""

    def __call__(self, item: _Item) -> CaseResult:
        """Run (or resume) the case repeat, then score its trace and write its result."""
        case, repeat, key = item
        run_dir = self.run_dir
        if self.limiter is not None:
            self.limiter.hold()
        started = self.clock.monotonic()
        try:
            user = self.dataset.user_for(case)
            if key not in self.unfinished or not _resumed(
                run_dir, self.factory, case, repeat, key, user is not None
            ):
                path = run_dir / "traces" / f"{key}.jsonl"
                sink = FileTraceSink(path)
                try:
                    agent = self.factory(case, sink, trial_seed(repeat))
                    if user is None or self.users is None:
                        _converse(agent, self.render(case), case.turns)
                    else:
                        if user_trace(path).exists():  # a run killed before its case's trace
                            set_aside(user_trace(path))
                        build = functools.partial(
                            self.users, user, user_trace(path), trial_seed(repeat)
                        )
                        goal = case.goal or case.input
                        converse_with(agent, self.render(case), goal, user, build)
                finally:
                    sink.close()
        except RunDirError:
            raise  # a case that must not run again: the run stops, finished cases are kept
        except TransportError as exc:
            raise RunAborted(
                f"case {key}: the model could not be reached ({type(exc).__name__}: {exc}); "
                f"{len(self.done)} finished cases are kept: run the same command again to resume"
            ) from exc
        except Exception:  # the trace records the failure (run_failed); scoring reads it there
            pass
        latency = self.clock.monotonic() - started
        scorers = self.dataset.scorers_for(case)
        result, read = _score_read(run_dir, case, repeat, key, scorers, latency, self.judging)
        # Written here, by the worker, not by the caller's loop: when another case aborts the
        # run, cases still in flight finish and are kept, so a resume does not run them again.
        self.encoded[key] = _encode(result)
        write_replace(run_dir / "cases" / f"{key}.json", self.encoded[key], durable=False)
        if read is not None:
            # The page of a verified trace, from the bytes just scored: the reports neither
            # read the file again nor write its page (ADR 0146).
            data, self.scored[result.trace] = read
            write_page(run_dir, result.trace, data)
            if self.limiter is not None:
                self.limiter.note(data)
            if self.budget is not None:
                self.budget.note(self.scored[result.trace].observation)
        return result


def _collect_finished(
    finished: Iterator[CaseResult],
    done: list[CaseResult],
    todo: Sequence[_Item],
    total: int,
    progress: Progress | None,
) -> None:
    """Add each result to ``done`` as it comes, telling ``progress``.

    Raises:
        RunAborted: a case's task was lost (its worker died); finished cases are kept.
    """
    counts = Counter(result.status for result in done)  # progress's summary, kept as they come
    if progress is not None:
        progress(len(done), total, Summary.tally(counts))
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
