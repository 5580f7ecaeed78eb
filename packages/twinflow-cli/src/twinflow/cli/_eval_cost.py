"""What ``twinflow eval`` says of cost: a cost budget on an unpriced model refused before any
case, an unknown price said once, the run's total in ``--json``, and ``eval compare``'s costs
(docs/adr/0198).
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from twinflow.agent import RunSpec
from twinflow.agent._spec import unpriced
from twinflow.cli._output import Output, say
from twinflow.cli._show import _clean
from twinflow.eval import Dataset, EvalResults
from twinflow.eval._stats import Comparison
from twinflow.kernel._netpolicy import is_loopback
from twinflow.trace import UserError

__all__ = ["check_priced", "cost_payload", "note_unpriced", "print_costs"]


def cost_payload(results: EvalResults) -> dict[str, Any]:
    """The cases' cost at their recorded prices: the total of those known, and how many
    cases' cost is known and unknown (each case's is in ``results.json``)."""
    known = [c.cost_usd for c in results.cases if c.cost_usd is not None]
    return {
        "usd": round(sum(known), 10),
        "cases_priced": len(known),
        "cases_unknown": len(results.cases) - len(known),
    }


def check_priced(
    spec: RunSpec,
    dataset: Dataset,
    totals: dict[str, float] | None,
    case_budget: list[tuple[str, float]] | None,
) -> None:
    """Refuse a cost budget (the eval's, a case's, ``--case-budget``'s) on a model whose
    price is unknown, before any case starts; otherwise say once that costs are unknown."""
    problem = unpriced(spec.model)
    if problem is None:
        return
    wanted = [
        *(totals or {}),
        *(k for k, _ in case_budget or ()),
        *(k for case in dataset.cases if not case_budget for k in case.budget or {}),
    ]
    if "cost_usd" in wanted:
        raise UserError(f"eval run: budget cost_usd: {problem}")
    note_unpriced(spec, "each case's")


def note_unpriced(spec: RunSpec, whose: str = "the run's") -> None:
    """Say once, in one line, that a hosted model has no price (a model on this machine
    costs nothing to say): ``whose`` cost is recorded as unknown."""
    problem = unpriced(spec.model)
    host = urllib.parse.urlsplit(spec.model.url).hostname or ""
    local = spec.model.kind == "ollama" or spec.model.url == "embedded" or is_loopback(host)
    if problem is not None and not local:
        say(f"note: {problem.split(', so ')[0]}: {whose} cost is recorded as unknown")


def _dollars(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.8f}".rstrip("0").rstrip(".")


def print_costs(c: Comparison, out: Output) -> None:
    """Each run's total cost and each case's (the first 20; ``--json`` lists all), when
    either run has a known cost."""
    if c.cost_a is None and c.cost_b is None:
        return
    out.line(f"cost {_dollars(c.cost_a)} -> {_dollars(c.cost_b)} (cases whose cost is known)")
    rows = list(c.case_costs.items())
    for key, (a, b) in rows[:20]:
        out.line(f"  {_clean(key)}: {_dollars(a)} -> {_dollars(b)}")
    if len(rows) > 20:
        out.line(f"  ... and {len(rows) - 20} more (--json lists all)")
