"""The arguments of ``twinflow eval``'s subcommands (their handlers: `twinflow.cli._eval_cli`)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping
from pathlib import Path

from twinflow.cli._eval_evidence import configure_attest, configure_reproduce
from twinflow.eval import EvalValueError
from twinflow.eval._plan import METRICS
from twinflow.eval._results import Shard

__all__ = ["LOCAL_RAY", "add_trust_code", "configure_eval"]

LOCAL_RAY = "local"
"""``--ray`` without an address: start a local Ray for the run."""


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
    except EvalValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def configure_eval(p: argparse.ArgumentParser, handlers: Mapping[str, Callable[..., int]]) -> None:
    """The ``eval`` subcommands' arguments; each one's description is its handler's docstring."""
    # Not required by argparse: `twinflow eval` alone is refused by the handler, as one line
    # (or, with --json, one JSON document) like every other usage error.
    sub = p.add_subparsers(dest="eval_command", metavar="SUBCOMMAND")
    _configure_run(
        sub.add_parser(
            "run",
            help="run a dataset through the agent a spec describes",
            description=handlers["run"].__doc__,
        )
    )
    _configure_rescore(
        sub.add_parser(
            "rescore",
            help="verify every trace of a run and score it again, without a model",
            description=handlers["rescore"].__doc__,
        )
    )
    _configure_compare(
        sub.add_parser(
            "compare",
            help="regressions and improvements from run A to run B",
            description=handlers["compare"].__doc__,
        )
    )
    _configure_merge(
        sub.add_parser(
            "merge",
            help="combine the shard directories of one dataset",
            description=handlers["merge"].__doc__,
        )
    )
    _configure_plan(
        sub.add_parser(
            "plan",
            help="pre-register a run: the dataset, spec, scorers, metric and decision rule",
            description=handlers["plan"].__doc__,
        )
    )
    attest = sub.add_parser(
        "attest",
        help="sign an in-toto attestation of a run (--check: hold one against it)",
        description=handlers["attest"].__doc__,
    )
    configure_attest(attest)
    _add_json(attest)
    reproduce = sub.add_parser(
        "reproduce",
        help="re-run every case trace of an attested run; write what reproduced",
        description=handlers["reproduce"].__doc__,
    )
    configure_reproduce(reproduce)
    _add_json(reproduce)


def _configure_compare(cmp: argparse.ArgumentParser) -> None:
    """The ``eval compare`` arguments: two run directories and the bootstrap's seed."""
    cmp.add_argument("a", type=Path, help="the baseline run directory")
    cmp.add_argument("b", type=Path, help="the new run directory")
    cmp.add_argument(
        "--seed",
        type=int,
        default=0,
        help="the paired bootstrap's seed (default 0; printed, so the interval can be redrawn)",
    )
    _add_json(cmp)


def _configure_merge(merge: argparse.ArgumentParser) -> None:
    """The ``eval merge`` arguments: the shard directories and the merged one."""
    merge.add_argument(
        "shards", type=Path, nargs="+", help="one run directory per shard 1/n .. n/n"
    )
    merge.add_argument(
        "--out", type=Path, required=True, help="the merged run directory (new or empty)"
    )
    add_trust_code(merge)
    _add_json(merge)


def _budget_item(text: str) -> tuple[str, float]:
    """``KEY=N`` of a budget flag."""
    key, sep, value = text.partition("=")
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not sep or not key or not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"{text!r}: give KEY=N, for example tokens=200000")
    return key.strip(), number


def _configure_run(run: argparse.ArgumentParser) -> None:
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
    _add_plan_options(run)
    _add_budget_options(run)
    _add_ray_option(run)
    _add_json(run)


def _add_plan_options(run: argparse.ArgumentParser) -> None:
    """The ``eval run`` plan arguments: the plan file and the key it must verify by."""
    run.add_argument(
        "--plan",
        type=Path,
        metavar="FILE",
        help="the run's plan (`eval plan`): refuse to run anything it does not name; Lab Notes "
        "say whether its rule was met",
    )
    run.add_argument(
        "--plan-key",
        type=Path,
        metavar="PUB",
        help="the verifier key (`twinflow keygen`'s .pub) a signed plan must verify by",
    )


def _add_budget_options(run: argparse.ArgumentParser) -> None:
    """The ``eval run`` budget arguments: the whole eval's and each case's."""
    run.add_argument(
        "--budget",
        type=_budget_item,
        action="append",
        default=[],
        metavar="KEY=N",
        help=(
            "the whole eval's budget, repeatable: tokens, input_tokens, output_tokens, "
            "requests, tool_calls, wall_seconds or cost_usd, summed over the cases; once "
            "crossed no case starts, and the run says how many ran (replaces the dataset's "
            "budget:)"
        ),
    )
    run.add_argument(
        "--case-budget",
        type=_budget_item,
        action="append",
        default=[],
        metavar="KEY=N",
        help=(
            "each case's budget, repeatable (the spec's budget: keys; replaces the spec's "
            "and each case's budget:)"
        ),
    )


def _add_ray_option(run: argparse.ArgumentParser) -> None:
    """The ``eval run`` ``--ray`` argument: run each case as a Ray task."""
    run.add_argument(
        "--ray",
        nargs="?",
        const=LOCAL_RAY,
        metavar="ADDRESS",
        help=(
            "run each case as a Ray task (the ray extra): on a new local Ray without ADDRESS, "
            "else on that cluster (auto, host:6379 or ray://host:10001); twinflow and the "
            "spec's code must be importable on every node. Put --ray last, or write "
            "--ray=ADDRESS, so it does not take the next argument"
        ),
    )


def _configure_rescore(re: argparse.ArgumentParser) -> None:
    re.add_argument("run_dir", type=Path, help="a run directory")
    re.add_argument(
        "--rejudge",
        action="store_true",
        help=(
            "call each judge scorer's model again (live) instead of replaying its recorded "
            "judgement; the new judgements go under DIR/rejudged, and changed verdicts are listed. "
            "Each judge's endpoint is printed first"
        ),
    )
    re.add_argument(
        "--send-key",
        action="append",
        default=[],
        metavar="VAR",
        help=(
            "with --rejudge: send the API key in the environment variable VAR to the judge "
            "whose model names it (api_key_env); a run directory's dataset names its own "
            "endpoints, so no key is sent unless named here"
        ),
    )
    add_trust_code(re)
    _add_json(re)


def _configure_plan(plan: argparse.ArgumentParser) -> None:
    plan.add_argument("dataset", type=Path, help="the dataset (.yaml, .yml or .jsonl)")
    plan.add_argument("--spec", type=Path, required=True, help="the run spec the run will use")
    plan.add_argument(
        "--metric",
        required=True,
        help=f"the metric the run reports: one of {', '.join(METRICS)}",
    )
    plan.add_argument(
        "--rule",
        required=True,
        help="the decision rule, a comparison of metrics and numbers joined by and, or, not: "
        "'rate >= 0.8', 'rate_low > 0.5 and flagged == 0'",
    )
    plan.add_argument(
        "--trials",
        type=int,
        help="trials of each case the run will make (default: the dataset's trials, else 1)",
    )
    plan.add_argument("--out", type=Path, required=True, help="the plan file to write (new)")
    plan.add_argument(
        "--sign",
        type=Path,
        metavar="KEYFILE",
        help="sign the plan with this `twinflow keygen` signer key",
    )
    _add_json(plan)


def add_trust_code(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--trust-code",
        action="store_true",
        help=(
            "import the scorer modules the run's dataset names (custom scorers, schema models); "
            "without it a run that needs code is refused, since a received run directory could "
            "bring any. The modules are printed first"
        ),
    )
