"""``twinflow eval``: run a dataset through an agent, rescore, compare and merge run directories.

The composition root for `twinflow.eval`: here the real model client, transport, clock, ids
and thread pool are wired into the eval runner, which only knows the ports.

- ``eval run DATASET --spec SPEC --out DIR [--trials K] [--concurrency N] [--shard i/n]
  [--min-pass-rate R] [--ray [ADDRESS]]``: ``--trials`` runs each case K times with distinct
  recorded seeds (default: the dataset's ``trials``, else 1); with ``--ray`` each case runs as a Ray task on a local Ray (no address)
  or on a cluster; every worker builds its own model and returns its trace, which is verified
  here before it is written
- ``eval rescore DIR``: verify every trace, score again without a model; exit 1 if a trace is
  flagged or a score differs from ``results.json``
- ``eval compare A B [--seed N]``: regressions and improvements per case, exact McNemar
  p-value, a paired bootstrap interval on the rate difference (resampling cases, seeded)
- ``eval merge DIR... --out DIR``: combine the shard directories of one dataset
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from twinflow.agent import Agent, Environment
from twinflow.cli._output import EXIT_OK, CheckFailed, Command, Output, say
from twinflow.cli._show import _clean
from twinflow.cli._spec import RunSpec, load_spec, load_tools
from twinflow.cli._wiring import (
    build_agent,
    build_model,
    build_transport,
    check_agent,
    model_base_url,
    run_environment,
    run_identity,
)
from twinflow.eval import (
    MAX_TRIALS,
    AgentFactory,
    Case,
    EvalResults,
    RunIdentity,
    Shard,
    ShardError,
    Summary,
    TraceMismatchError,
    TrialStats,
    code_modules,
    compare_runs,
    importing_from,
    load_dataset,
    load_run,
    merge_runs,
    pending_keys,
    rescore,
    run_eval,
)
from twinflow.kernel import (
    Clock,
    Executor,
    Ids,
    RayExecutor,
    SerialExecutor,
    SystemClock,
    SystemIds,
    ThreadExecutor,
    Transport,
)
from twinflow.trace import TraceSink
from twinflow.vocab import UserError

__all__ = ["COMMANDS"]


def _stderr(text: str) -> None:
    say(text)


def _add_json(p: argparse.ArgumentParser) -> None:
    # The parent `eval` parser has --json; repeating it here lets it follow the subcommand too.
    p.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print one JSON document on stdout",
    )


def _shard(text: str) -> Shard:
    try:
        return Shard.parse(text)
    except ShardError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _configure(p: argparse.ArgumentParser) -> None:
    # Not required by argparse: `twinflow eval` alone is refused by `_handle`, as one line (or,
    # with --json, one JSON document) like every other usage error.
    sub = p.add_subparsers(dest="eval_command", metavar="SUBCOMMAND")
    run = sub.add_parser(
        "run", help="run a dataset through the agent a spec describes", description=_run.__doc__
    )
    run.add_argument("dataset", type=Path, help="the dataset (.yaml, .yml or .jsonl)")
    run.add_argument(
        "--spec",
        type=Path,
        required=True,
        help="the run spec (model, tools, policy, output); prompt may hold {input}",
    )
    run.add_argument(
        "--out", type=Path, required=True, help="the run directory (an unfinished one is resumed)"
    )
    run.add_argument(
        "--concurrency",
        type=int,
        default=1,
        help=(
            "cases in flight at once (default 1; with --ray, raise it to what the model "
            "server can serve at once)"
        ),
    )
    run.add_argument(
        "--trials",
        type=int,
        help=(
            "run each case K times, trial r with sampling seed (r-1)*1000 (default: the "
            "dataset's trials, else 1); Lab Notes show pass@K, pass^K and a case-clustered "
            "interval"
        ),
    )
    run.add_argument("--shard", type=_shard, help="run only slice i of n (1-based), e.g. 2/4")
    run.add_argument(
        "--min-pass-rate", type=float, help="exit 1 if the pass rate is below this fraction"
    )
    run.add_argument(
        "--ray",
        nargs="?",
        const=_LOCAL_RAY,
        metavar="ADDRESS",
        help=(
            "run each case as a Ray task (the ray extra): on a new local Ray without ADDRESS, "
            "else on that cluster (auto, host:6379 or ray://host:10001); twinflow and the "
            "spec's code must be importable on every node. Put --ray last, or write "
            "--ray=ADDRESS, so it does not take the next argument"
        ),
    )
    _add_json(run)
    re = sub.add_parser(
        "rescore",
        help="verify every trace of a run and score it again, without a model",
        description=_rescore.__doc__,
    )
    re.add_argument("run_dir", type=Path, help="a run directory")
    _add_trust_code(re)
    _add_json(re)
    cmp = sub.add_parser(
        "compare",
        help="regressions and improvements from run A to run B",
        description=_compare.__doc__,
    )
    cmp.add_argument("a", type=Path, help="the baseline run directory")
    cmp.add_argument("b", type=Path, help="the new run directory")
    cmp.add_argument(
        "--seed",
        type=int,
        default=0,
        help="the paired bootstrap's seed (default 0; printed, so the interval can be redrawn)",
    )
    _add_json(cmp)
    merge = sub.add_parser(
        "merge", help="combine the shard directories of one dataset", description=_merge.__doc__
    )
    merge.add_argument(
        "shards", type=Path, nargs="+", help="one run directory per shard 1/n .. n/n"
    )
    merge.add_argument(
        "--out", type=Path, required=True, help="the merged run directory (new or empty)"
    )
    _add_trust_code(merge)
    _add_json(merge)


def _summary_payload(results: EvalResults, run_dir: Path) -> dict[str, Any]:
    s = results.summary
    return {
        "ok": True,
        "run_dir": str(run_dir),
        "dataset": results.dataset,
        "complete": results.complete,
        "summary": s.model_dump(),
        "pass_rate": s.passed / s.total if s.total else 0.0,
        "trials": None if results.trials is None else results.trials.model_dump(),
        "results": str(run_dir / "results.json"),
        "lab_notes": [str(run_dir / "lab-notes.md"), str(run_dir / "lab-notes.html")],
    }


class _ProgressLine:
    """The eval's progress on one redrawn stderr line; any other message starts a new line.

    ``[#####...] 6/6 cases done: 5 passed, 1 failed, 0 errored, 0 flagged``: the count of
    cases done comes apart from the verdicts, so it cannot be read as "6 passed".
    """

    def __init__(self) -> None:
        self._open = False

    def __call__(self, done: int, total: int, counts: Summary) -> None:
        width = 24
        filled = width * done // total if total else width
        bar = "#" * filled + "." * (width - filled)
        print(
            f"\r[{bar}] {done}/{total} cases done: {counts.passed} passed, "
            f"{counts.failed} failed, {counts.errored} errored, {counts.flagged} flagged",
            end="",
            file=sys.stderr,
            flush=True,
        )
        self._open = True
        if done == total:
            self.end()

    def end(self) -> None:
        """Finish the progress line, so what is printed next has a line of its own."""
        if self._open:
            print(file=sys.stderr, flush=True)
            self._open = False

    def message(self, text: str) -> None:
        """Print ``text`` on its own line (ending the progress line first)."""
        self.end()
        _stderr(text)


@contextlib.contextmanager
def _model_url(
    spec: RunSpec, out_dir: Path, on_progress: Callable[[str], None] = _stderr
) -> Iterator[RunSpec]:
    """``spec`` with its model URL resolved (`model_base_url`) while the block runs."""
    with model_base_url(spec.model.url, out_dir, on_progress) as base:
        yield spec.model_copy(update={"model": spec.model.model_copy(update={"url": base})})


_LOCAL_RAY = "local"
"""``--ray`` without an address: start a local Ray for the run."""


@dataclasses.dataclass(frozen=True)
class _WorkerAgents:
    """Builds each case's agent where the case runs (a Ray worker), from the spec alone.

    It holds nothing but the spec, so it pickles; the transport, clock and ids are the
    kernel's, made in the worker, and the tools are imported there.
    """

    spec: RunSpec
    identity: RunIdentity

    def __call__(self, case: Case, sink: TraceSink, seed: int) -> Agent[Any]:
        """A fresh agent for one trial, writing its trace to ``sink``, sampling with ``seed``."""
        ids = SystemIds()
        tools = load_tools(self.spec)
        # One transport per case: its connections go with the agent when the case ends.
        model = build_model(self.spec.model, build_transport(self.spec.model), ids)
        return build_agent(
            self.spec,
            model=model,
            clock=SystemClock(),
            ids=ids,
            trace=sink,
            tools=tools,
            seed=seed,
            # The worker's own interpreter and packages: the case ran here, not on the driver.
            environment=run_environment(self.spec, self.identity),
        )


@dataclasses.dataclass(frozen=True)
class _LocalAgents:
    """Builds each case's agent in this process, on one transport, clock and ids."""

    spec: RunSpec
    transport: Transport
    clock: Clock
    ids: Ids
    tools: list[Callable[..., Any]]
    environment: Environment

    def __call__(self, case: Case, sink: TraceSink, seed: int) -> Agent[Any]:
        """A fresh agent for one trial, writing its trace to ``sink``, sampling with ``seed``."""
        model = build_model(self.spec.model, self.transport, self.ids)
        return build_agent(
            self.spec,
            model=model,
            clock=self.clock,
            ids=self.ids,
            trace=sink,
            tools=self.tools,
            seed=seed,
            environment=self.environment,
        )


def _no_case_left(case: Case, sink: TraceSink, seed: int) -> Agent[Any]:
    raise AssertionError(f"case {case.id}: a finished run asked for an agent")


def _render(spec: RunSpec) -> Callable[[Case], str]:
    def render(case: Case) -> str:
        if "{input}" in spec.prompt:
            return spec.prompt.replace("{input}", case.input)
        return f"{spec.prompt}\n\n{case.input}"

    return render


def _run(args: argparse.Namespace, out: Output) -> int:
    """Run every case of a dataset (or of one shard) through the agent a run spec describes.

    Each case repeat gets its own trace under DIR/traces; results.json records each case's
    verdict and checkpoint root; lab-notes.md and lab-notes.html are written at the end.
    Running the same command on an unfinished DIR resumes it.
    """
    if args.concurrency < 1:
        raise UserError(f"--concurrency {args.concurrency}: must be at least 1")
    if args.trials is not None and not 1 <= args.trials <= MAX_TRIALS:
        raise UserError(f"--trials {args.trials}: must be from 1 to {MAX_TRIALS}")
    dataset = load_dataset(args.dataset)
    spec = load_spec(args.spec)
    # Tools, output models and custom scorers may live next to the spec or the dataset (as in
    # examples/); the run records these directories so rescore and merge import from them too.
    code_dirs = tuple(dict.fromkeys(p.resolve().parent for p in (args.spec, args.dataset)))
    with contextlib.ExitStack() as stack:
        # For the whole run: tools may import their siblings when called, scorers are resolved
        # as cases finish.
        stack.enter_context(importing_from(code_dirs))
        tools = load_tools(spec)
        check_agent(spec, tools, "eval run")
        identity = run_identity(spec)
        # A resume is decided here, before any model server or Ray starts: one refused for
        # another spec is refused before a model loads, and a finished run needs no model.
        pending = pending_keys(
            dataset,
            args.out,
            shard=args.shard,
            code_dirs=code_dirs,
            identity=identity,
            trials=args.trials,
        )
        transport = build_transport(spec.model)
        clock, ids = SystemClock(), SystemIds()
        progress = _ProgressLine()
        stack.callback(transport.close)
        executor: Executor = SerialExecutor()
        factory: AgentFactory = _no_case_left
        wired = spec
        if not pending:
            out.line(f"{args.out}: every case has a result already; no model is started")
        else:
            ray: RayExecutor | None = None
            if args.ray is not None:
                address = None if args.ray == _LOCAL_RAY else args.ray
                ray = RayExecutor(address, code_dirs=[str(d) for d in code_dirs]).start()
                stack.callback(ray.close)
            # However the run ends (an abort, ^C), the progress line is finished first, so the
            # message that follows is on its own line.
            stack.callback(progress.end)
            wired = stack.enter_context(_model_url(spec, args.out, progress.message))
            if ray is not None:
                factory, executor = _WorkerAgents(wired, identity), ray
            else:
                environment = run_environment(spec, identity)
                factory = _LocalAgents(wired, transport, clock, ids, tools, environment)
                if args.concurrency > 1:
                    executor = ThreadExecutor()
        results = run_eval(
            dataset,
            factory,
            args.out,
            clock=clock,
            executor=executor,
            concurrency=args.concurrency,
            shard=args.shard,
            prompt=_render(wired),
            progress=progress,
            code_dirs=code_dirs,
            identity=identity,
            trials=args.trials,
        )
    payload = _summary_payload(results, args.out)
    s = results.summary
    rate = payload["pass_rate"]
    if s.flagged:
        raise CheckFailed(
            f"{s.flagged} case(s) have traces that do not verify; see {args.out}/lab-notes.md",
            payload,
        )
    if args.min_pass_rate is not None and rate < args.min_pass_rate:
        raise CheckFailed(
            f"pass rate {rate:.1%} is below --min-pass-rate {args.min_pass_rate:.1%}", payload
        )
    out.document(payload)
    out.line(
        f"{results.dataset}: {s.passed}/{s.total} passed ({rate:.1%}), {s.failed} failed, {s.errored} errored"
    )
    if results.trials is not None:
        out.line(_trials_line(results.trials))
    out.line(f"results: {args.out / 'results.json'}")
    out.line(f"lab notes: {args.out / 'lab-notes.md'}, {args.out / 'lab-notes.html'}")
    return EXIT_OK


def _trials_line(stats: TrialStats) -> str:
    k = stats.k
    interval = (
        "no interval (fewer than two cases)"
        if stats.interval is None
        else f"95% CI {stats.interval[0]:.1%} to {stats.interval[1]:.1%}, clustered by case"
    )
    at_k = "n/a" if stats.pass_at_k is None else f"{stats.pass_at_k:.1%}"
    hat_k = "n/a" if stats.pass_hat_k is None else f"{stats.pass_hat_k:.1%}"
    return f"{k} trials per case: rate {stats.rate:.1%} ({interval}); pass@{k} {at_k}, pass^{k} {hat_k}"


def _add_trust_code(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--trust-code",
        action="store_true",
        help=(
            "import the scorer modules the run's dataset names (custom scorers, schema models); "
            "without it a run that needs code is refused, since a received run directory could "
            "bring any. The modules are printed first"
        ),
    )


def _announce_code(run_dirs: Sequence[Path], trust_code: bool) -> None:
    """With --trust-code, say which modules scoring will import before it does."""
    if not trust_code:
        return
    for run_dir in run_dirs:
        modules = code_modules(load_run(run_dir)[0].dataset)
        if modules:
            say(
                f"twinflow eval: --trust-code: importing {', '.join(map(repr, modules))} "
                f"as {run_dir}/run.json names them"
            )


def _rescore(args: argparse.Namespace, out: Output) -> int:
    """Verify every trace of a run directory and score it again from the traces alone.

    No model is contacted. A trace that is missing or fails verification flags its case. The
    new scores go to DIR/rescore.json; exit 1 if a case is flagged or any verdict differs
    from results.json.
    """
    _, recorded = load_run(args.run_dir)
    _announce_code([args.run_dir], args.trust_code)
    results = rescore(args.run_dir, trust_code=args.trust_code)
    before = {c.key: (c.status, c.scores) for c in recorded.cases}
    changed = [c.key for c in results.cases if before.get(c.key) != (c.status, c.scores)]
    flagged = [c for c in results.cases if c.status == "flagged"]
    payload = {
        **_summary_payload(results, args.run_dir),
        "rescore": str(args.run_dir / "rescore.json"),
        "changed": changed,
        "flagged": [{"key": c.key, "problem": c.problem} for c in flagged],
    }
    if flagged or changed:
        detail = "; ".join(f"{c.key}: {c.problem}" for c in flagged[:5])
        raise CheckFailed(
            f"{len(flagged)} case(s) flagged, {len(changed)} verdict(s) differ from results.json"
            + (f" ({detail})" if detail else ""),
            payload,
        )
    s = results.summary
    out.document(payload)
    out.line(
        f"ok: {s.total} traces verify; scores identical to results.json ({s.passed}/{s.total} passed)"
    )
    return EXIT_OK


def _compare(args: argparse.Namespace, out: Output) -> int:
    """List the cases that regressed and improved from run A to run B, with an exact McNemar test
    and a paired bootstrap interval on the pass-rate difference (cases resampled, seeded)."""
    if not 0 <= args.seed < 2**64:
        raise UserError(f"--seed {args.seed}: must be from 0 to 2**64 - 1")
    try:
        c = compare_runs(args.a, args.b, seed=args.seed)
    except TraceMismatchError as exc:
        raise CheckFailed(str(exc), {"ok": False, "problem": str(exc)}) from None
    scorers = [{**d.model_dump(), "delta": d.delta} for d in c.scorers]
    out.document({"ok": True, **c.model_dump(), "scorers": scorers})

    # Everything shown comes from two run directories, received input: escaped for the terminal.
    def keys(found: tuple[str, ...]) -> str:
        return ", ".join(_clean(k) for k in found) or "none"

    for label, side in (("A", c.side_a), ("B", c.side_b)):
        if side is not None:
            out.line(
                f"{label}: dataset {_clean(side.dataset)}, spec {_clean(side.spec)}, "
                f"model {_clean(side.model)}"
            )
    if c.environment_differences:
        shown = c.environment_differences
        out.line(f"environments differ ({len(shown)}):")
        for line in shown[:20]:
            out.line(f"  {_clean(line)}")
        if len(shown) > 20:
            out.line(f"  ... and {len(shown) - 20} more (--json lists all)")
    if c.differs:
        out.line(
            f"A and B differ in {', '.join(c.differs)}: the comparison is across those, not "
            "only the change you made"
        )
    out.line(
        f"pass rate {c.pass_rate_a:.1%} -> {c.pass_rate_b:.1%} over the paired cases "
        f"({c.rate_delta:+.1%})"
    )
    if c.bootstrap is not None:
        boot = c.bootstrap
        out.line(
            f"  95% interval on the difference {boot.low:+.1%} to {boot.high:+.1%} ({boot.method}; "
            f"{boot.cases} cases, {boot.resamples} resamples, --seed {boot.seed})"
        )
        if boot.caveat is not None:
            out.line(f"  caveat: {boot.caveat}")
    for d in c.scorers:
        out.line(
            f"  {_clean(d.scorer):<20} {d.passed_a}/{d.scored} -> {d.passed_b}/{d.scored} "
            f"({d.delta:+.1%})"
        )
    out.line(f"regressions ({len(c.regressions)}): {keys(c.regressions)}")
    out.line(f"improvements ({len(c.improvements)}): {keys(c.improvements)}")
    out.line(
        f"exact McNemar p = {c.p_value:.4g} (unchanged: {c.both_passed} passed, {c.both_not_passed} not)"
    )
    if c.caveat is not None:
        out.line(f"  caveat: {c.caveat}")
    out.line(f"same verdict, other reasons ({len(c.reasons_changed)}): {keys(c.reasons_changed)}")
    out.line(f"output changed ({len(c.outputs_changed)}): {keys(c.outputs_changed)}")
    if c.only_in_a or c.only_in_b:
        out.line(f"unpaired: {len(c.only_in_a)} only in A, {len(c.only_in_b)} only in B")
    return EXIT_OK


def _merge(args: argparse.Namespace, out: Output) -> int:
    """Combine the run directories of shards 1/n .. n/n into one, verifying every trace."""
    _announce_code(args.shards, args.trust_code)
    results = merge_runs(args.shards, args.out, trust_code=args.trust_code)
    payload = _summary_payload(results, args.out)
    if results.summary.flagged:
        raise CheckFailed(
            f"{results.summary.flagged} trace(s) do not verify; see {args.out}/lab-notes.md",
            payload,
        )
    s = results.summary
    out.document(payload)
    out.line(f"merged {len(args.shards)} shards: {s.passed}/{s.total} passed; every trace verifies")
    return EXIT_OK


_HANDLERS = {"run": _run, "rescore": _rescore, "compare": _compare, "merge": _merge}


def _handle(args: argparse.Namespace, out: Output) -> int:
    if args.eval_command is None:
        raise UserError(
            f"name a subcommand: {', '.join(_HANDLERS)} (`eval SUBCOMMAND --help` for its "
            "arguments)"
        )
    return _HANDLERS[args.eval_command](args, out)


COMMANDS: dict[str, Command] = {"eval": (_configure, _handle)}
"""The command this module defines, as `twinflow.cli._main.COMMAND_TABLE` looks it up."""
