"""``twinflow eval compare A B``: regressions, improvements and the tests on them."""

from __future__ import annotations

import argparse

from twinflow.cli._eval_cost import print_costs
from twinflow.cli._eval_evidence import compare_reproduction, is_reproduction
from twinflow.cli._output import EXIT_OK, CheckFailed, Output
from twinflow.cli._show import _clean
from twinflow.eval._errors import TraceMismatchError
from twinflow.eval._stats import Comparison, compare_runs
from twinflow.trace import UserError

__all__ = ["eval_compare"]


def eval_compare(args: argparse.Namespace, out: Output) -> int:
    """List the cases that regressed and improved from run A to run B, with an exact McNemar test
    and a paired bootstrap interval on the pass-rate difference (cases resampled, seeded). When B
    is a reproduction of A (`eval reproduce`): which cases reproduced, once B is shown to be A's."""
    if not 0 <= args.seed < 2**64:
        raise UserError(f"--seed {args.seed}: must be from 0 to 2**64 - 1")
    if is_reproduction(args.b):
        return compare_reproduction(args.a, args.b, out)
    try:
        c = compare_runs(args.a, args.b, seed=args.seed)
    except TraceMismatchError as exc:
        raise CheckFailed(str(exc), {"ok": False, "problem": str(exc)}) from None
    scorers = [{**d.model_dump(), "delta": d.delta} for d in c.scorers]
    out.document({"ok": True, **c.model_dump(), "scorers": scorers})
    _print_sides(c, out)
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
    out.line(f"regressions ({len(c.regressions)}): {_keys(c.regressions)}")
    out.line(f"improvements ({len(c.improvements)}): {_keys(c.improvements)}")
    out.line(
        f"exact McNemar p = {c.p_value:.4g} (unchanged: {c.both_passed} passed, {c.both_not_passed} not)"
    )
    if c.caveat is not None:
        out.line(f"  caveat: {c.caveat}")
    out.line(f"same verdict, other reasons ({len(c.reasons_changed)}): {_keys(c.reasons_changed)}")
    out.line(f"output changed ({len(c.outputs_changed)}): {_keys(c.outputs_changed)}")
    if c.only_in_a or c.only_in_b:
        out.line(f"unpaired: {len(c.only_in_a)} only in A, {len(c.only_in_b)} only in B")
    print_costs(c, out)
    return EXIT_OK


def _keys(found: tuple[str, ...]) -> str:
    """Case keys from a run directory (received input), escaped for the terminal."""
    return ", ".join(_clean(k) for k in found) or "none"


def _print_sides(c: Comparison, out: Output) -> None:
    """What runs A and B were, and how their environments and settings differ (a
    comparison (`compare_runs`); every string escaped for the terminal)."""
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
