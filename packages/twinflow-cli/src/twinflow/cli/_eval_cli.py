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
- ``eval attest DIR --key SKEY``: sign an in-toto attestation of the run (``--check``: hold
  one against the directory; ``--case KEY``: one case's inclusion proof)
- ``eval reproduce DIR --spec SPEC --out DIR2``: replay every case trace; write which cases
  reproduced (``eval attest DIR2`` signs it; ``eval compare DIR DIR2`` reads both)
- ``eval plan DATASET --spec SPEC --metric M --rule R --out FILE [--sign KEY]``: pre-register
  a run (``eval run --plan FILE [--plan-key PUB]`` refuses any other, and Lab Notes say
  whether the rule was met)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from twinflow._base._code import importing_from
from twinflow._base._files import write_new
from twinflow.agent import load_spec
from twinflow.agent._spec import BudgetSpec
from twinflow.cli._continue import _signer
from twinflow.cli._eval_agents import (
    LocalAgents,
    cases_where,
    judge_models,
    model_url,
    no_case_left,
    no_judge_left,
    render,
    simulated_users,
)
from twinflow.cli._eval_args import configure_eval
from twinflow.cli._eval_compare import eval_compare
from twinflow.cli._eval_cost import check_priced, cost_payload
from twinflow.cli._eval_evidence import (
    eval_attest,
    eval_reproduce,
)
from twinflow.cli._output import EXIT_OK, CheckFailed, Command, Output, say
from twinflow.cli._show import _clean
from twinflow.cli._traces import read_small_file
from twinflow.cli._wiring import (
    JudgeModels,
    check_agent,
    judge_model_spec,
    judges_of,
    run_identity,
)
from twinflow.eval import (
    AgentFactory,
    CaseResult,
    Dataset,
    EvalResults,
    Summary,
    load_dataset,
    run_eval,
)
from twinflow.eval._dataset import MAX_TRIALS
from twinflow.eval._errors import PlanError
from twinflow.eval._limiter import EvalBudget
from twinflow.eval._plan import ReadPlan, check_plan, judge_plan, make_plan, read_plan, write_plan
from twinflow.eval._rescore import load_run, merge_runs, rescore
from twinflow.eval._runner import check_plan_slot, code_modules, pending_keys
from twinflow.eval._simulated import user_specs
from twinflow.eval._trials import TrialStats
from twinflow.kernel import Executor, SerialExecutor, SystemClock, SystemIds
from twinflow.kernel._credentials import redact_url
from twinflow.trace import SignatureError, UserError
from twinflow.trace._keys import parse_verifier_key

__all__ = ["COMMANDS"]


def _stderr(text: str) -> None:
    say(text)


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
        "cost": cost_payload(results),
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


def _run(args: argparse.Namespace, out: Output) -> int:
    """Run every case of a dataset (or of one shard) through the agent a run spec describes.

    Each case repeat gets its own trace under DIR/traces; results.json records each case's
    verdict and checkpoint root; lab-notes.md and lab-notes.html are written at the end.
    Running the same command on an unfinished DIR resumes it.
    """
    _check_counts(args)
    dataset = load_dataset(args.dataset)
    spec = load_spec(args.spec)
    totals = dict(args.budget) if args.budget else dataset.budget  # the flag replaces the file's
    budget = EvalBudget(dict(totals)) if totals else None
    check_priced(spec, dataset, totals, args.case_budget)
    users = user_specs(dataset, args.dataset.resolve().parent, args.spec)
    if args.case_budget:
        # Each case's budget: the flags replace the spec's (and count in its digest).
        items = {
            k: int(v) if v == int(v) and k != "wall_seconds" else v for k, v in args.case_budget
        }
        spec = spec.model_copy(update={"budget": BudgetSpec(**items)})
    # Tools, output models and custom scorers may live next to the spec or the dataset (as in
    # examples/); the run records these directories so rescore and merge import from them too.
    code_dirs = tuple(dict.fromkeys(p.resolve().parent for p in (args.spec, args.dataset)))
    with contextlib.ExitStack() as stack:
        # For the whole run: tools may import their siblings when called, scorers are resolved
        # as cases finish.
        stack.enter_context(importing_from(code_dirs))
        tools = spec.load_tools()
        check_agent(spec, tools, "eval run")
        JudgeModels.check(dataset)
        identity = run_identity(spec, users)
        plan = None if args.plan is None else _read_plan(args.plan, args.plan_key)
        if plan is not None:
            check_plan(plan.plan, dataset, identity.spec_digest, args.trials)
            check_plan_slot(args.out, plan.data)
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
        # One connection kept per case in flight: --concurrency N reuses N connections.
        transport = spec.model.transport(connections=args.concurrency)
        clock, ids = SystemClock(), SystemIds()
        progress = _ProgressLine()
        stack.callback(transport.close)
        executor: Executor = SerialExecutor()
        factory: AgentFactory = no_case_left
        judges = JudgeModels(no_judge_left, ids)
        wired = spec
        simulators = None
        if not pending:
            out.line(f"{args.out}: every case has a result already; no model is started")
        else:
            # However the run ends (an abort, ^C), the progress line is finished first, so the
            # message that follows is on its own line.
            stack.callback(progress.end)
            wired = stack.enter_context(model_url(spec, args.out, progress.message))
            judges = judge_models(stack, dataset, args.out, wired.model.url, spec, progress.message)
            local = LocalAgents(
                wired,
                transport,
                clock,
                ids,
                tools,
                spec.environment(identity.model, identity.spec_digest),
                case_budgets=not args.case_budget,
            )
            factory, executor = cases_where(stack, args, code_dirs, local, identity)
            simulators = stack.enter_context(
                simulated_users(users, spec, local, args, progress.message)
            )
        results = run_eval(
            dataset,
            factory,
            args.out,
            clock=clock,
            executor=executor,
            concurrency=args.concurrency,
            shard=args.shard,
            prompt=render(wired),
            progress=progress,
            code_dirs=code_dirs,
            identity=identity,
            judges=judges.wiring(clock),
            plan=None if plan is None else plan.data,
            trials=args.trials,
            budget=budget,
            users=simulators,
        )
    return _report_run(args, out, results, plan)


def _check_counts(args: argparse.Namespace) -> None:
    """Refuse a ``--concurrency`` or ``--trials`` out of range (exit 2)."""
    if args.concurrency < 1:
        raise UserError(f"--concurrency {args.concurrency}: must be at least 1")
    if args.trials is not None and not 1 <= args.trials <= MAX_TRIALS:
        raise UserError(f"--trials {args.trials}: must be from 1 to {MAX_TRIALS}")


def _report_run(
    args: argparse.Namespace, out: Output, results: EvalResults, plan: ReadPlan | None
) -> int:
    """Print an eval run's outcome; exit 1 if a trace is flagged or the pass rate is too low."""
    payload = _summary_payload(results, args.out)
    if plan is not None:
        outcome = judge_plan(plan.plan, results, None)
        payload["plan"] = {"rule": plan.plan.rule, "met": outcome.met, "values": outcome.values}
    s = results.summary
    rate = payload["pass_rate"]
    if results.stopped is not None:
        payload["stopped"] = results.stopped
        out.line(f"{results.dataset}: {results.stopped}")
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
    if plan is not None:
        values = ", ".join(f"{k} = {v:.4g}" for k, v in payload["plan"]["values"].items())
        met = "met" if payload["plan"]["met"] else "NOT met"
        out.line(f"plan: rule {_clean(plan.plan.rule)!r} {met} ({values})")
    if results.trials is not None:
        out.line(_trials_line(results.trials))
    out.line(f"results: {args.out / 'results.json'}")
    out.line(f"lab notes: {args.out / 'lab-notes.md'}, {args.out / 'lab-notes.html'}")
    return EXIT_OK


def _read_plan(path: Path, key: Path | None) -> ReadPlan:
    """The plan file at ``path``, its signature verified by the key file ``key``.

    Raises:
        PlanError: unreadable, malformed, or (signed) not verifying by ``key``.
    """
    try:
        data = read_small_file(path, "plan")
        keys = () if key is None else (parse_verifier_key(read_small_file(key, "key")),)
    except OSError as exc:
        raise PlanError(f"cannot read {exc.filename or path}: {exc.strerror or exc}") from None
    except SignatureError as exc:
        raise PlanError(f"{key}: not a verifier key ({exc})") from None
    try:
        return read_plan(data, keys)
    except PlanError as exc:
        raise PlanError(f"{path}: {exc}") from None


def _plan(args: argparse.Namespace, out: Output) -> int:
    """Write a plan for a run before it is made: the dataset's, spec's and scorers' digests,
    the metric reported and the rule that decides the outcome, and the time, optionally signed.

    `eval run --plan FILE` then refuses a run of anything else, and its Lab Notes say whether
    the rule was met, and whether the plan was made before the run's first trace.
    """
    dataset = load_dataset(args.dataset)
    spec = load_spec(args.spec)
    spec_digest = run_identity(spec).spec_digest
    assert spec_digest is not None  # run_identity always digests the spec
    if args.trials is not None and not 1 <= args.trials <= MAX_TRIALS:
        raise UserError(f"--trials {args.trials}: must be from 1 to {MAX_TRIALS}")
    made = make_plan(
        dataset,
        spec_digest,
        metric=args.metric,
        rule=args.rule,
        made_at=SystemClock().now(),
        trials=args.trials,
    )
    signer = _signer(args.sign)
    if os.path.lexists(args.out):
        raise UserError(f"{args.out} already exists; a plan is never overwritten")
    write_new(args.out, write_plan(made, signer))
    out.document({"ok": True, "plan": str(args.out), **made.model_dump(mode="json")})
    signed = "signed" if signer is not None else "not signed"
    out.line(
        f"plan {args.out} ({signed}): {dataset.name} {made.dataset_digest[:12]}, spec "
        f"{spec_digest[:12]}, scorers {made.scorers_digest[:12]}, {made.trials} trial(s); "
        f"metric {made.metric}; "
        f"rule {made.rule}"
    )
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
    manifest, recorded = load_run(args.run_dir)
    _announce_code([args.run_dir], args.trust_code)
    with contextlib.ExitStack() as stack:
        JudgeModels.check(manifest.dataset, verdicts=False)
        if args.rejudge:
            _announce_judges(manifest.dataset, args.send_key)
            judges = judge_models(stack, manifest.dataset, args.run_dir, "", None, _stderr)
        else:
            judges = JudgeModels(no_judge_left, SystemIds())  # replay: settings only
        results = rescore(
            args.run_dir,
            trust_code=args.trust_code,
            judges=judges.wiring(SystemClock()),
            rejudge=args.rejudge,
        )
    flagged = [c for c in results.cases if c.status == "flagged"]
    if args.rejudge:
        return _rejudged(args, out, recorded, results, flagged)
    before = {c.key: (c.status, c.scores) for c in recorded.cases}
    changed = [c.key for c in results.cases if before.get(c.key) != (c.status, c.scores)]
    judged = sum(1 for c in results.cases for s in c.scores if s.judgement is not None)
    payload = {
        **_summary_payload(results, args.run_dir),
        "rescore": str(args.run_dir / "rescore.json"),
        "changed": changed,
        "judgements_replayed": judged,
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
        + (f"; {judged} judgement(s) replayed, no judge called" if judged else "")
    )
    return EXIT_OK


def _announce_judges(dataset: Dataset, keys: Sequence[str]) -> None:
    """Before ``--rejudge`` calls anything: name each judge's endpoint, and refuse to send a
    key the user did not name (the endpoints come from the run directory, which may be a
    received one).

    Raises:
        UserError: a judge names ``api_key_env`` and ``--send-key`` does not name it.
    """
    for judge in judges_of(dataset):
        spec = judge_model_spec(judge)
        if spec.api_key_env is not None and spec.api_key_env not in keys:
            raise UserError(
                f"judge {_clean(judge.name or judge.kind)!r} would send the key in "
                f"${spec.api_key_env} to {_clean(redact_url(spec.url))}, as the run's dataset "
                f"names it: pass --send-key {spec.api_key_env} if you trust that endpoint; "
                "nothing was called"
            )
        say(
            f"twinflow eval: --rejudge: judge {_clean(judge.name or judge.kind)!r} calls "
            f"{_clean(redact_url(spec.url))} (model {_clean(spec.name)})"
        )


def _rejudged(
    args: argparse.Namespace,
    out: Output,
    recorded: EvalResults,
    results: EvalResults,
    flagged: Sequence[CaseResult],
) -> int:
    """Report ``rescore --rejudge``: each judge verdict that differs from the recorded one."""
    before = {(c.key, s.scorer): s for c in recorded.cases for s in c.scores if s.judgement}
    changed = [
        {"key": c.key, "scorer": s.scorer, "before": old.outcome, "after": s.outcome}
        for c in results.cases
        for s in c.scores
        if (old := before.get((c.key, s.scorer))) is not None and old.outcome != s.outcome
    ]
    judged = sum(1 for c in results.cases for s in c.scores if s.judgement)
    payload = {
        **_summary_payload(results, args.run_dir),
        "rescore": str(args.run_dir / "rescore.json"),
        "judged": judged,
        "changed_verdicts": changed,
        "flagged": [{"key": c.key, "problem": c.problem} for c in flagged],
    }
    lines = [
        f"{_clean(v['key'])} {_clean(v['scorer'])}: {v['before']} -> {v['after']}" for v in changed
    ]
    if flagged or changed:
        raise CheckFailed(
            f"{len(changed)} of {judged} judge verdict(s) changed when judged again, "
            f"{len(flagged)} case(s) flagged" + (f" ({'; '.join(lines[:5])})" if lines else ""),
            payload,
        )
    out.document(payload)
    out.line(f"ok: {judged} judgement(s) made again; every verdict is the one recorded")
    return EXIT_OK


def _merge(args: argparse.Namespace, out: Output) -> int:
    """Combine the run directories of shards 1/n .. n/n into one, verifying every trace."""
    _announce_code(args.shards, args.trust_code)
    dataset = load_run(args.shards[0])[0].dataset
    JudgeModels.check(dataset, verdicts=False)
    # Judgements are replayed, never made again: the judges' settings only, no model.
    judges = JudgeModels(no_judge_left, SystemIds()).wiring(SystemClock())
    results = merge_runs(args.shards, args.out, trust_code=args.trust_code, judges=judges)
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


_HANDLERS = {
    "run": _run,
    "rescore": _rescore,
    "compare": eval_compare,
    "merge": _merge,
    "plan": _plan,
    "attest": eval_attest,
    "reproduce": eval_reproduce,
}


def _handle(args: argparse.Namespace, out: Output) -> int:
    if args.eval_command is None:
        raise UserError(
            f"name a subcommand: {', '.join(_HANDLERS)} (`eval SUBCOMMAND --help` for its "
            "arguments)"
        )
    return _HANDLERS[args.eval_command](args, out)


def _configure(p: argparse.ArgumentParser) -> None:
    configure_eval(p, _HANDLERS)


COMMANDS: dict[str, Command] = {"eval": (_configure, _handle)}
"""The command this module defines, as `twinflow.cli._main.COMMAND_TABLE` looks it up."""
