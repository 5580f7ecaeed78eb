"""Lab Notes' facts and ``lab-notes.md``: what the reports read of a run, and the Markdown.

`read_details` reads each case's trace once for what both reports show; `render_markdown` is
the Markdown report, `twinflow.eval._lab_notes` the HTML one and the writer of both. Both
reports are pure functions of the results: no clock.
"""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from collections.abc import Mapping
from datetime import datetime

from pydantic import JsonValue

from twinflow.agent._events import Environment
from twinflow.eval._details import CaseDetail, RunFacts, ScoredTrace, _judgements, _page_of
from twinflow.eval._plan import judge_plan
from twinflow.eval._results import CaseResult, EvalResults
from twinflow.eval._stats import wilson_interval
from twinflow.eval._trials import TrialStats

__all__ = ["ScoredTrace", "render_markdown"]


def _plan_lines(results: EvalResults, facts: RunFacts) -> list[str]:
    """The pre-registered plan's sentences for Lab Notes: the rule's outcome and which came
    first, the plan or the run (empty when the run had no plan)."""
    if facts.plan_problem is not None:
        return [facts.plan_problem]
    plan = facts.plan
    if plan is None:
        return []
    first = None if facts.first is None else datetime.fromisoformat(facts.first)
    outcome = judge_plan(plan, results, first)
    values = ", ".join(f"{name} = {value:.4g}" for name, value in outcome.values.items())
    signed = f"signed by {', '.join(facts.plan_signers)}" if facts.plan_signers else "not signed"
    made = plan.made_at.isoformat()
    if outcome.before_run is None:
        order = f"made at {made}; no trace was read to compare it with"
    elif outcome.before_run:
        order = (
            f"made at {made}, before the run's first trace started ({facts.first}): "
            "the plan came first"
        )
    else:
        order = (
            f"made at {made}, after the run's first trace started ({facts.first}): the run "
            "came first, so this plan is not a pre-registration"
        )
    return [
        f"metric {plan.metric}; decision rule: {plan.rule}",
        f"rule {'met' if outcome.met else 'NOT met'} ({values})",
        f"plan {order}",
        f"plan {signed}; dataset, spec and scorer digests matched when the run was started "
        f"with it (dataset {plan.dataset_digest[:12]}, spec {plan.spec_digest[:12]}, "
        f"scorers {plan.scorers_digest[:12]}, {plan.trials} trial(s) of each case)",
    ]


def _rate(results: list[CaseResult]) -> tuple[int, int, float, float, float]:
    passed = sum(1 for r in results if r.status == "passed")
    total = len(results)
    low, high = wilson_interval(passed, total)
    return passed, total, (passed / total if total else 0.0), low, high


def _by_tag(results: EvalResults) -> list[tuple[str, list[CaseResult]]]:
    tags = sorted({t for r in results.cases for t in r.tags})
    rows = [("(all)", list(results.cases))]
    rows += [(tag, [r for r in results.cases if tag in r.tags]) for tag in tags]
    return rows


def _latency_bins(values: list[float], bins: int = 10) -> list[tuple[float, float, int]]:
    if not values:
        return []
    low, high = min(values), max(values)
    if high == low:  # one value: one bin, not ten with nine empty
        return [(low, high, len(values))]
    width = (high - low) / bins
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - low) / width))] += 1
    return [(low + i * width, low + (i + 1) * width, counts[i]) for i in range(bins)]


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    position = q * (len(ordered) - 1)
    lower = int(position)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _title(results: EvalResults) -> str:
    shard = f" (shard {results.shard})" if results.shard else ""
    return f"Lab Notes: {results.dataset}{shard}"


def _header(results: EvalResults, facts: RunFacts) -> list[tuple[str, str]]:
    """(label, value) rows: model, agent configuration digest, dataset, date."""
    dates = "unknown (no trace read)"
    if facts.first is not None:
        dates = facts.first if facts.first == facts.last else f"{facts.first} to {facts.last}"
    digests = ", ".join(facts.config_digests) or "unknown"
    reported = ", ".join(facts.models) or "none"
    return [
        ("model", f"{facts.model or 'not recorded'} (replies name: {reported})"),
        ("spec digest", _spec_digest(facts)),
        ("agent configuration digest", f"{digests} (every case's run_started)"),
        (
            "dataset",
            f"{results.dataset} ({len(results.cases)} case runs), digest {results.dataset_digest}",
        ),
        ("date", f"{dates} (run starts, as the traces record them)"),
        ("environment", _environment_line(facts.environments)),
    ]


def _spec_digest(facts: RunFacts) -> str:
    """The run spec's digest, always stated: ``run.json``'s, else the one the traces record
    (each case's ``run_started``), else why there is none."""
    if facts.spec_digest is not None:
        return facts.spec_digest
    traced = list(dict.fromkeys(e.spec_digest for e in facts.environments if e.spec_digest))
    if len(traced) == 1:
        return f"{traced[0]} (from the traces)"
    if traced:
        return f"{', '.join(traced)} (the traces record {len(traced)} different specs)"
    return "not recorded (neither run.json nor any trace names one)"


def _environment_line(environments: tuple[Environment, ...]) -> str:
    if not environments:
        return "not recorded"
    first = environments[0]
    line = (
        f"Python {first.python} ({first.implementation}) on {first.platform}; "
        f"{len(first.distributions)} distributions imported, {len(first.modules)} spec modules"
    )
    if len(environments) > 1:
        line += f"; the cases ran in {len(environments)} environments, see below"
    return line


def _environment_rows(environments: tuple[Environment, ...]) -> list[str]:
    """The environment section's lines: the first environment whole, then each other one as
    its differences from the first (one line each)."""
    if not environments:
        return []
    first = environments[0]
    rows = [
        f"python {first.python} ({first.implementation}), platform {first.platform}",
        f"model {first.model or 'not recorded'}, spec digest {first.spec_digest or 'not recorded'}",
    ]
    rows += [f"module {name} sha256 {digest}" for name, digest in first.modules.items()]
    rows += [f"distribution {name} {version}" for name, version in first.distributions.items()]
    for index, other in enumerate(environments[1:], start=2):
        rows += [f"environment {index}: {line}" for line in first.differences(other)]
    return rows


def _opt_pct(x: float | None) -> str:
    return "n/a" if x is None else _pct(x)


def _trials(stats: TrialStats) -> tuple[str, list[str], list[list[str]]]:
    """The trials section of both reports: a headline, the table's header and its rows."""
    interval = (
        "no interval: fewer than two cases"
        if stats.interval is None or stats.stderr is None
        else f"95% interval {_pct(stats.interval[0])} to {_pct(stats.interval[1])}, "
        f"{stats.method}, standard error {stats.stderr:.4f}"
    )
    headline = (
        f"{stats.k} trial(s) per case: rate {_pct(stats.rate)} ({interval}); "
        f"pass@{stats.k} {_opt_pct(stats.pass_at_k)}, pass^{stats.k} {_opt_pct(stats.pass_hat_k)} "
        "(mean over cases; unbiased estimators)."
    )
    header = ["case", "passed", "trials", f"pass@{stats.k}", f"pass^{stats.k}"]
    rows = [
        [c.case_id, str(c.passed), str(c.trials), _opt_pct(c.pass_at_k), _opt_pct(c.pass_hat_k)]
        for c in stats.cases
    ]
    return headline, header, rows


def _json(value: JsonValue) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _cell(text: str, limit: int = 200) -> str:
    """Text for one Markdown table cell: one line, cut, made inert (`_inert`), and its pipes
    escaped."""
    line = " ".join(text.split())
    if len(line) > limit:
        line = line[:limit] + "..."
    return _inert(line).replace("|", "\\|")


# What a Markdown renderer (GitHub's among them) would turn into a link by itself: a URL or a
# ``www.`` address, and an e-mail address. Neither holds a character `_inert` escapes, nor a
# backtick, so one is shown as a code span as it is.
_AUTOLINK = re.compile(
    r"(?:[A-Za-z][A-Za-z0-9+.-]{1,31}://|www\.)[^\s`<>&\"'|\\\[\]()]+"
    r"|[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+"
)


def _inert(text: str) -> str:
    """Outside text (a model's answer, a dataset's, a server's) as Markdown that renders as the
    very text, as the HTML report shows it: HTML escaped (Markdown passes raw HTML through),
    ``[`` and ``]`` escaped so no image or link (inline, reference or its definition) is
    made (and a backslash or a backtick, so none undoes that), and a bare URL or address set
    in a code span so no renderer links it."""
    pieces = []
    start = 0
    for found in _AUTOLINK.finditer(text):
        pieces.append(_escaped(text[start : found.start()]))
        pieces.append(f"`{found.group(0)}`")
        start = found.end()
    pieces.append(_escaped(text[start:]))
    return "".join(pieces)


_MARKDOWN = re.compile(r"[\\`\[\]]")


def _escaped(text: str) -> str:
    # A backslash first (so none can undo an escape), a backtick (so none pairs with a code
    # span's), the brackets of every link and image.
    return _MARKDOWN.sub(lambda m: "\\" + m.group(0), html.escape(text, quote=False))


def _by_scorer(results: EvalResults) -> list[tuple[str, int, int, int]]:
    """(scorer, passed, failed, errored) for each scorer label, in the order first met."""
    rows: dict[str, list[int]] = {}
    for result in results.cases:
        for score in result.scores:
            row = rows.setdefault(score.scorer, [0, 0, 0])
            row[("passed", "failed", "errored").index(score.outcome)] += 1
    return [(name, c[0], c[1], c[2]) for name, c in rows.items()]


def _calls(detail: CaseDetail) -> str:
    return "; ".join(
        f"{c.tool}({_json(c.arguments)}) {c.decision or 'undecided'}"
        + ("" if c.result is None else f" -> {' '.join(c.result.split())[:120]}")
        for c in detail.tool_calls
    )


def _why(result: CaseResult) -> str:
    if result.problem:
        return result.problem
    reasons = [
        f"{s.scorer} {s.outcome}: {s.detail}" if s.detail else f"{s.scorer} {s.outcome}"
        for s in result.scores
        if s.outcome != "passed"
    ]
    if result.error:
        reasons.insert(0, result.error)
    text = "; ".join(reasons) or result.status
    return " ".join(text.split())[:300]


def _md_rates(results: EvalResults) -> list[str]:
    """The Markdown report's pass rates by tag and by scorer."""
    out: list[str] = []
    out += [
        "",
        "## Pass rate by tag",
        "",
        "| tag | passed | total | rate | 95% CI |",
        "|---|---:|---:|---:|---|",
    ]
    for tag, rows in _by_tag(results):
        p, t, share, lo, hi = _rate(rows)
        out.append(f"| {_cell(tag)} | {p} | {t} | {_pct(share)} | {_pct(lo)} to {_pct(hi)} |")
    out += [
        "",
        "## Pass rate by scorer",
        "",
        "| scorer | passed | failed | errored | rate | 95% CI |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, p, f, err in _by_scorer(results):
        lo, hi = wilson_interval(p, p + f + err)
        share = p / (p + f + err)
        out.append(
            f"| {_cell(name)} | {p} | {f} | {err} | {_pct(share)} | {_pct(lo)} to {_pct(hi)} |"
        )
    return out


def _md_cases(results: EvalResults, details: Mapping[str, CaseDetail]) -> list[str]:
    """The Markdown report's case table: the cases not passed first, each with why."""
    out: list[str] = []
    failing = [r for r in results.cases if r.status != "passed"]
    out += [
        "",
        f"## Cases ({len(failing)} not passed, {len(results.cases) - len(failing)} passed)",
        "",
    ]
    out += [
        "| case | status | why | input | expected | output | tool calls | trace |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in [*failing, *(r for r in results.cases if r.status == "passed")]:
        detail = details.get(r.key, CaseDetail())
        why = "" if r.status == "passed" else _why(r)
        given = "" if detail.input is None else detail.input
        cells = [why, given, _json(detail.expected), _json(detail.output), _calls(detail)]
        why, given, expected, output, calls = (_cell(c, 300) for c in cells)
        page = f" ([page]({detail.page}))" if detail.page else ""
        trace = f"[{r.trace}]({r.trace})" if _page_of(r.trace) else _cell(r.trace)
        trace += "".join(
            f" ([{_cell(scorer)}'s judgement]({path}))" for scorer, path in _judgements(r)
        )
        out.append(
            f"| {_cell(r.key)} | {r.status} | {why} | {given} | {expected} | {output} | {calls} "
            f"| {trace}{page} |"
        )
    return out


def _md_latency(results: EvalResults) -> list[str]:
    """The Markdown report's latency: its quantiles and a histogram of the cases."""
    latencies = [r.latency_s for r in results.cases]
    out = [
        "",
        "## Latency",
        "",
        f"p50 {_quantile(latencies, 0.5):.3f} s, p90 {_quantile(latencies, 0.9):.3f} s, "
        f"max {max(latencies, default=0.0):.3f} s, total {sum(latencies):.3f} s.",
        "",
        "| from (s) | to (s) | cases |",
        "|---:|---:|---:|",
    ]
    out += [f"| {lo:.3f} | {hi:.3f} | {n} |" for lo, hi, n in _latency_bins(latencies)]
    return out


def render_markdown(
    results: EvalResults,
    facts: RunFacts | None = None,
    details: Mapping[str, CaseDetail] | None = None,
) -> str:
    """The Markdown report (``facts`` and ``details`` from `read_details`, when the traces are at hand)."""
    s = results.summary
    facts = facts or RunFacts()
    details = details or {}
    passed, total, rate, low, high = _rate(list(results.cases))
    out = [f"# {_inert(_title(results))}", ""]
    out += [f"- **{label}**: {_cell(value, 1000)}" for label, value in _header(results, facts)]
    if results.stopped is not None:
        out.append(f"**Stopped at its budget**: {_inert(results.stopped)}.")
    if not results.complete:
        out.append("**This run is incomplete**: run it again to finish it.")
    out += [
        "",
        f"**Pass rate {_pct(rate)}** ({passed}/{total}; 95% Wilson interval {_pct(low)} to {_pct(high)}). "
        f"Passed {s.passed}, failed {s.failed}, errored {s.errored}, flagged {s.flagged}.",
    ]
    plan = _plan_lines(results, facts)
    if plan:
        out += ["", "## Pre-registered plan", ""]
        out += [f"- {_cell(line, 1000)}" for line in plan]
    if results.trials is not None:
        headline, header, table = _trials(results.trials)
        out += ["", "## Trials", "", headline, "", f"| {' | '.join(header)} |"]
        out.append("|---|" + "---:|" * (len(header) - 1))
        out += [f"| {_cell(row[0])} | {' | '.join(row[1:])} |" for row in table]
    out += _md_rates(results)
    if facts.environments:
        out += ["", "## Environment", ""]
        out += [f"- {_cell(row, 1000)}" for row in _environment_rows(facts.environments)]
    attempts = Counter(r.attempts for r in results.cases)
    out += ["", "## Structured-output attempts per case", "", "| attempts | cases |", "|---:|---:|"]
    out += [f"| {a} | {attempts[a]} |" for a in sorted(attempts)]
    out += _md_latency(results)
    out += _md_cases(results, details)
    out += [
        "",
        "## Checkpoint roots",
        "",
        "| case | events | Merkle root (hex) |",
        "|---|---:|---|",
    ]
    out += [
        f"| {_cell(r.key)} | {r.checkpoint.size} | `{r.checkpoint.root}` |" for r in results.cases
    ]
    return "\n".join(out) + "\n"
