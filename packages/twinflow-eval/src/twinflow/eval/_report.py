"""Lab Notes: ``lab-notes.md`` and a self-contained ``lab-notes.html`` for a run's results.

The HTML has no external assets: CSS and SVG charts are inline, so the file can be mailed,
archived or attached to a CI run and still render. A few lines of inline script check the
charts laid out and record it on the root element (``data-charts="rendered:N"``), which the
headless-browser test reads. Both reports are pure functions of the results: no clock.
"""

from __future__ import annotations

import functools
import hashlib
import html
import json
from collections import Counter
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from pydantic import JsonValue

from twinflow._base._files import read_inside, write_replace
from twinflow.agent import (
    Environment,
    ModelResponded,
    RunStarted,
    TraceEvent,
    render_trace_page,
    typed_event,
)
from twinflow.eval._errors import PlanError, RunDirError
from twinflow.eval._frozen import EvalValue
from twinflow.eval._observe import Observation, ToolCallRecord, observe
from twinflow.eval._plan import Plan, judge_plan, read_plan
from twinflow.eval._results import CaseResult, EvalResults, RunManifest, read_json_model
from twinflow.eval._stats import wilson_interval
from twinflow.eval._trials import TrialStats
from twinflow.trace import TraceCorruptError, walk_trace

__all__ = [
    "CaseDetail",
    "RunFacts",
    "read_details",
    "render_html",
    "render_markdown",
    "write_page",
    "write_reports",
]


class ScoredTrace(NamedTuple):
    """What the reports read from a case's trace, kept by the pass that scored it (ADR 0139)."""

    sha256: bytes | None
    """The digest of the trace file's bytes as scored: the rest stands for those bytes only.
    None: the scoring pass wrote the trace's page from the very bytes it scored
    (`write_page`), so the reports take the page and the rest as they are and do not read the
    file again (ADR 0146)."""
    observation: Observation
    """The observation scoring read."""
    kept: tuple[TraceEvent, ...]
    """The run's facts' events (`keeps_fact`), in order."""


_FACT_BODIES = (RunStarted, ModelResponded)
"""The bodies of the events the run's facts come from (a tuple: `isinstance` with a union
built at each call costs twice as much, once an event)."""


def keeps_fact(event: TraceEvent) -> bool:
    """Whether the run's facts (`RunFacts`) come from ``event``: its run_started and replies."""
    return isinstance(event.body, _FACT_BODIES)


class CaseDetail(EvalValue):
    """What one case's trace shows, for Lab Notes (read from the trace, never from the model)."""

    output: JsonValue = None
    """The accepted output (JSON), if any."""
    tool_calls: tuple[ToolCallRecord, ...] = ()
    """The tool calls, with decisions and results."""
    page: str | None = None
    """The trace page's path, relative to the run directory."""
    input: str | None = None
    """The case's input, from the run's dataset (None when ``run.json`` is not at hand)."""
    expected: JsonValue = None
    """The case's expected value, from the run's dataset."""


class RunFacts(EvalValue):
    """What the run's traces say about the run as a whole (Lab Notes' header)."""

    model: str | None = None
    """The model the run was configured with, from ``run.json`` (`RunIdentity.model`: the
    embedded model's file name and sha256, or a server's endpoint and model name)."""
    spec_digest: str | None = None
    """The run spec's digest from ``run.json`` (`RunIdentity.spec_digest`): the value a resume
    with another spec is refused for."""
    models: tuple[str, ...] = ()
    """The model ids the servers reported in their replies, sorted (the client types when no
    server reported one)."""
    config_digests: tuple[str, ...] = ()
    """Digests of the agent configurations the cases ran with (one, normally)."""
    first: str | None = None
    """The earliest run start, as recorded (ISO 8601)."""
    last: str | None = None
    """The latest run start, as recorded (ISO 8601)."""
    plan: Plan | None = None
    """The plan the run was registered under (``plan.note``), if any."""
    plan_signers: tuple[str, ...] = ()
    """The names on the plan's signature lines (verified when the run started with it)."""
    plan_problem: str | None = None
    """Why ``plan.note`` could not be read, when it could not."""
    environments: tuple[Environment, ...] = ()
    """The distinct environments the cases ran in (``run_started``), in the order first met:
    one, normally; several when workers differ."""


# Asked four times a case (the page written, the notes' details, both reports' links); parsing
# the name is pathlib's slow part, and the answer depends on the name alone: parsed once each.
@functools.lru_cache(maxsize=4096)
def _page_of(trace: str) -> PurePosixPath | None:
    """``traces/<name>.html`` for a trace the runner names ``traces/<name>.jsonl``, else None.

    A run directory read back (resume, merge) is outside input: a case file naming
    ``../../x.jsonl`` must not make Lab Notes write a page, or link one, outside it.
    """
    path = PurePosixPath(trace)
    if path.parent != PurePosixPath("traces") or path.suffix != ".jsonl" or "\\" in trace:
        return None
    if path.name.startswith("."):
        return None
    return path.with_suffix(".html")


def write_page(run_dir: Path, trace: str, data: bytes) -> PurePosixPath | None:
    """Write the page of the trace a result names (``traces/<name>.html``) from its bytes.

    Returns:
        The page's path, relative to the run directory; None, writing nothing, for a name the
        runner does not write (`_page_of`).
    """
    page = _page_of(trace)
    if page is not None:
        # Not synced: a page is regenerated from its trace whenever the reports are written.
        write_replace(run_dir / page, render_trace_page(data, trace).encode(), durable=False)
    return page


def _judgements(result: CaseResult) -> list[tuple[str, str]]:
    """(scorer, path) of each judgement a case's scores link, for paths of the form the judge
    writes (``judgements/`` or ``rejudged/``, ``<key>.<n>.jsonl``): no other is linked."""
    found = []
    for score in result.scores:
        link = score.judgement
        if link is None:
            continue
        path = PurePosixPath(link.trace)
        folder_ok = str(path.parent) in {"judgements", "rejudged"}
        name_ok = path.name.startswith(f"{result.key}.") and path.suffix == ".jsonl"
        if folder_ok and name_ok and "\\" not in link.trace:
            found.append((score.scorer, str(path)))
    return found


def read_details(
    results: EvalResults, run_dir: Path, scored: Mapping[str, ScoredTrace] | None = None
) -> tuple[RunFacts, dict[str, CaseDetail]]:
    """Read every case's trace for Lab Notes, and write its trace page beside it.

    Each page (``traces/<key>.html``) is `twinflow.agent.render_trace_page`'s: it verifies the
    trace in the reader's browser. A trace that does not verify still gets its page (which
    says where it breaks) but no output or tool calls.

    Args:
        results: The run's results.
        run_dir: The run directory.
        scored: What the scoring pass read from traces, by path: a trace whose bytes are those
            it scored is not verified and typed a second time (ADR 0139); one whose page it
            wrote (no digest) is not read again (ADR 0146).
    """
    details: dict[str, CaseDetail] = {}
    reported: set[str] = set()
    clients: set[str] = set()
    digests: set[str] = set()
    starts: list[str] = []
    environments: list[Environment] = []
    manifest = _manifest(run_dir)
    identity = manifest.identity if manifest is not None else None
    cases = {c.id: c for c in manifest.dataset.cases} if manifest is not None else {}
    for result in results.cases:
        case = cases.get(result.case_id)
        given = {} if case is None else {"input": case.input, "expected": case.expected}
        page = _page_of(result.trace)
        if page is None:  # not a path the runner writes: neither read nor written beside
            details[result.key] = CaseDetail(**given)
            continue
        known = None if scored is None else scored.get(result.trace)
        if known is None or known.sha256 is not None:
            try:
                data = read_inside(run_dir, result.trace, what="results.json")
            except OSError:  # missing or unreadable; a link or a non-file: UnsafePathError
                details[result.key] = CaseDetail(**given)
                continue
            write_page(run_dir, result.trace, data)
            if known is not None and known.sha256 != hashlib.sha256(data).digest():
                known = None  # other bytes than those scored: read afresh
        if known is not None:
            # The very bytes the scoring pass verified, typed and observed; with no digest, the
            # pass also wrote their page, so the page, the result and these notes show one set
            # of bytes and the file is not read again (ADR 0146).
            seen, kept = known.observation, known.kept
        else:
            # One streaming pass verifies, types and observes the trace and keeps the two kinds
            # of event the run's facts come from (its typed events are not held whole).
            try:
                seen, kept = _observe_afresh(data)
            except TraceCorruptError:
                details[result.key] = CaseDetail(page=str(page), **given)
                continue
        details[result.key] = CaseDetail(
            output=seen.output, tool_calls=seen.tool_calls, page=str(page), **given
        )
        for event in kept:
            body = event.body
            if isinstance(body, RunStarted):
                digests.add(body.config_digest)
                clients.add(body.config.model)
                starts.append(event.at.isoformat())
                if body.environment is not None and body.environment not in environments:
                    environments.append(body.environment)
            elif isinstance(body, ModelResponded) and body.response.model_name:
                reported.add(body.response.model_name)
    plan, signers, problem = _plan_of(run_dir)
    facts = RunFacts(
        plan=plan,
        plan_signers=signers,
        plan_problem=problem,
        model=None if identity is None else identity.model,
        spec_digest=None if identity is None else identity.spec_digest,
        models=tuple(sorted(reported or clients)),
        config_digests=tuple(sorted(digests)),
        first=min(starts, default=None),
        last=max(starts, default=None),
        environments=tuple(environments),
    )
    return facts, details


def _observe_afresh(data: bytes) -> tuple[Observation, tuple[TraceEvent, ...]]:
    """Verify, type and observe a trace's bytes in one streaming pass, keeping the events the
    run's facts come from (`keeps_fact`); its typed events are not held whole.

    Raises:
        TraceCorruptError: The trace does not verify.
    """
    held: list[TraceEvent] = []

    def events() -> Iterator[TraceEvent]:
        for item in walk_trace(data, check=typed_event):
            event: TraceEvent = item.value
            if keeps_fact(event):
                held.append(event)
            yield event

    seen = observe(events())
    return seen, tuple(held)


def _plan_of(run_dir: Path) -> tuple[Plan | None, tuple[str, ...], str | None]:
    """The run's ``plan.note`` (plan, signature names, problem); all empty when there is none."""
    try:
        data = read_inside(run_dir, "plan.note", what="plan.note")
    except FileNotFoundError:
        return None, (), None
    except OSError as exc:
        return None, (), f"plan.note cannot be read: {exc}"
    try:
        read = read_plan(data, check_signature=False)
    except PlanError as exc:
        return None, (), f"plan.note: {exc}"
    return read.plan, read.signers, None


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


def _manifest(run_dir: Path) -> RunManifest | None:
    """The run's ``run.json``, or None where there is none (or it cannot be read)."""
    path = run_dir / "run.json"
    if not path.is_file():
        return None
    try:
        return read_json_model(path, RunManifest)
    except RunDirError:
        return None


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
        ("spec digest", facts.spec_digest or "not recorded"),
        ("agent configuration digest", f"{digests} (every case's run_started)"),
        (
            "dataset",
            f"{results.dataset} ({len(results.cases)} case runs), digest {results.dataset_digest}",
        ),
        ("date", f"{dates} (run starts, as the traces record them)"),
        ("environment", _environment_line(facts.environments)),
    ]


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
    """Text for one Markdown table cell: one line, cut, HTML-escaped (Markdown passes raw HTML
    through to the page), and its pipes escaped."""
    line = " ".join(text.split())
    if len(line) > limit:
        line = line[:limit] + "..."
    return html.escape(line, quote=False).replace("|", "\\|")


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
    out = [f"# {_title(results)}", ""]
    out += [f"- **{label}**: {_cell(value, 1000)}" for label, value in _header(results, facts)]
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
    if facts.environments:
        out += ["", "## Environment", ""]
        out += [f"- {_cell(row, 1000)}" for row in _environment_rows(facts.environments)]
    attempts = Counter(r.attempts for r in results.cases)
    out += ["", "## Structured-output attempts per case", "", "| attempts | cases |", "|---:|---:|"]
    out += [f"| {a} | {attempts[a]} |" for a in sorted(attempts)]
    latencies = [r.latency_s for r in results.cases]
    out += [
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


_CSS = """
body{font:15px/1.5 system-ui,sans-serif;margin:2rem auto;max-width:62rem;padding:0 1rem;color:#1d232a}
h1{font-size:1.6rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #d5dbe1}
table{border-collapse:collapse;width:100%;font-size:13px}td,th{border-bottom:1px solid #e6e9ed;padding:3px 6px;text-align:left}
td.n,th.n{text-align:right}table.meta{width:auto}table.meta th{padding-right:1rem}
details.case{border-bottom:1px solid #e6e9ed;padding:.3rem 0}details.case p,details.case ul{margin:.2rem 0 .2rem 1rem}code{font-size:12px;word-break:break-all}.headline{font-size:1.2rem}
.failed{color:#a61b1b}.errored{color:#8a5a00}.flagged{color:#6b2a9b}svg{display:block;margin:.5rem 0}
svg text{font:11px system-ui,sans-serif;fill:#1d232a}
"""

_SCRIPT = """
(function(){var n=0;document.querySelectorAll('svg.chart').forEach(function(s){
var b=s.getBBox();if(b.width>0&&b.height>0&&s.querySelectorAll('rect').length>0){n++;}});
document.documentElement.setAttribute('data-charts','rendered:'+n);})();
"""


def _svg_rates(rows: list[tuple[str, list[CaseResult]]]) -> str:
    width, bar_h, left = 600, 18, 140
    height = len(rows) * (bar_h + 8) + 34
    parts = [
        f'<svg class="chart" id="chart-tags" width="{width}" height="{height}" role="img" aria-label="pass rate by tag">'
    ]
    scale = width - left - 60
    for i, (tag, results) in enumerate(rows):
        _, t, rate, low, high = _rate(results)
        y = 10 + i * (bar_h + 8)
        parts.append(f'<text x="0" y="{y + 13}">{html.escape(tag)} (n={t})</text>')
        parts.append(f'<rect x="{left}" y="{y}" width="{scale}" height="{bar_h}" fill="#eef1f4"/>')
        parts.append(
            f'<rect x="{left}" y="{y}" width="{max(rate * scale, 1):.1f}" height="{bar_h}" fill="#3b7dd8"/>'
        )
        x1, x2, mid = left + low * scale, left + high * scale, y + bar_h / 2
        parts.append(
            f'<line x1="{x1:.1f}" x2="{x2:.1f}" y1="{mid}" y2="{mid}" stroke="#1d232a" stroke-width="1.5"/>'
        )
        parts.append(f'<text x="{left + scale + 6}" y="{y + 13}">{_pct(rate)}</text>')
    parts.append(
        f'<text x="{left + scale / 2:.1f}" y="{height - 2}" text-anchor="middle">'
        "pass rate (%), line: 95% Wilson interval</text>"
    )
    parts.append("</svg>")
    return "".join(parts)


def _svg_bars(
    chart_id: str, label: str, bars: list[tuple[str, int]], x_title: str, y_title: str = "cases"
) -> str:
    width, height, left, bottom, top_pad = 600, 200, 48, 44, 16
    top = max((n for _, n in bars), default=0) or 1
    plot_w, plot_h = width - left - 10, height - bottom - top_pad
    slot = plot_w / max(len(bars), 1)
    # A bar is at most 60 px wide: a histogram of one value stays a bar, not a wall.
    bar_w = max(min(slot - 4, 60.0), 1.0)
    base = height - bottom
    parts = [
        f'<svg class="chart" id="{chart_id}" width="{width}" height="{height}" role="img" aria-label="{html.escape(label)}">',
        f'<line x1="{left}" x2="{left}" y1="{top_pad}" y2="{base}" stroke="#1d232a"/>',
        f'<line x1="{left}" x2="{width - 8}" y1="{base}" y2="{base}" stroke="#1d232a"/>',
        f'<text x="{left - 4}" y="{base}" text-anchor="end">0</text>',
        f'<text x="{left - 4}" y="{top_pad + 8}" text-anchor="end">{top}</text>',
        f'<text transform="rotate(-90)" x="{-(top_pad + plot_h / 2):.1f}" y="12" text-anchor="middle">{html.escape(y_title)}</text>',
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 4}" text-anchor="middle">{html.escape(x_title)}</text>',
    ]
    for i, (name, n) in enumerate(bars):
        h = plot_h * n / top
        centre = left + i * slot + slot / 2
        y = base - h
        parts.append(
            f'<rect x="{centre - bar_w / 2:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{max(h, 0.5):.1f}" fill="#3b7dd8"><title>{html.escape(name)}: {n}</title></rect>'
        )
        parts.append(f'<text x="{centre:.1f}" y="{y - 3:.1f}" text-anchor="middle">{n}</text>')
        parts.append(
            f'<text x="{centre:.1f}" y="{base + 14}" text-anchor="middle">{html.escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _case_html(r: CaseResult, detail: CaseDetail) -> str:
    e = html.escape
    # Passed cases are folded; the others open, so the reader starts with what went wrong.
    state = "" if r.status == "passed" else " open"
    parts = [
        f'<details class="case"{state}><summary><strong>{e(r.key)}</strong> '
        f'<span class="{r.status}">{r.status}</span>'
    ]
    if r.status != "passed":
        parts.append(f" · {e(_why(r))}")
    parts.append("</summary>")
    if detail.input is not None:
        parts.append(f"<p>input: <code>{e(detail.input)}</code></p>")
        parts.append(f"<p>expected: <code>{e(_json(detail.expected))}</code></p>")
    parts.append(f"<p>output: <code>{e(_json(detail.output))}</code></p>")
    if detail.tool_calls:
        parts.append("<ul>")
        for c in detail.tool_calls:
            result = "" if c.result is None else f" → <code>{e(c.result[:500])}</code>"
            parts.append(
                f"<li><code>{e(c.tool)}({e(_json(c.arguments))})</code> "
                f"{e(c.decision or 'undecided')}: {e(c.reason)}{result}</li>"
            )
        parts.append("</ul>")
    else:
        parts.append("<p>no tool calls</p>")
    links = [f'<a href="{e(r.trace)}">trace</a>' if _page_of(r.trace) else f"trace {e(r.trace)}"]
    if detail.page:
        links.insert(0, f'<a href="{e(detail.page)}">trace page (verifies in the browser)</a>')
    links += [
        f'<a href="{e(path)}">{e(scorer)}\'s judgement</a>' for scorer, path in _judgements(r)
    ]
    parts.append(f"<p>{' · '.join(links)} · {r.checkpoint.size} events</p></details>")
    return "".join(parts)


def render_html(
    results: EvalResults,
    facts: RunFacts | None = None,
    details: Mapping[str, CaseDetail] | None = None,
) -> str:
    """The self-contained HTML report (``facts`` and ``details`` from `read_details`)."""
    e = html.escape
    s = results.summary
    facts = facts or RunFacts()
    details = details or {}
    passed, total, rate, low, high = _rate(list(results.cases))
    body = [f"<h1>{e(_title(results))}</h1>", '<table class="meta">']
    body += [f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in _header(results, facts)]
    body.append("</table>")
    if not results.complete:
        body.append("<p><strong>This run is incomplete</strong>: run it again to finish it.</p>")
    body.append(
        f'<p class="headline"><strong>Pass rate {_pct(rate)}</strong> ({passed}/{total}; 95% Wilson interval '
        f"{_pct(low)} to {_pct(high)}). Passed {s.passed}, failed {s.failed}, errored {s.errored}, flagged {s.flagged}.</p>"
    )
    plan = _plan_lines(results, facts)
    if plan:
        body.append("<h2>Pre-registered plan</h2><ul>")
        body += [f"<li>{e(line)}</li>" for line in plan]
        body.append("</ul>")
    if results.trials is not None:
        headline, header, cells = _trials(results.trials)
        body.append(f"<h2>Trials</h2><p>{e(headline)}</p><table><tr>")
        body += [f"<th>{e(h)}</th>" for h in header]
        body.append("</tr>")
        body += ["<tr>" + "".join(f"<td>{e(cell)}</td>" for cell in row) + "</tr>" for row in cells]
        body.append("</table>")
    rows = _by_tag(results)
    body.append("<h2>Pass rate by tag</h2>")
    body.append(_svg_rates(rows))
    body.append(
        '<table><tr><th>tag</th><th class="n">passed</th><th class="n">total</th><th class="n">rate</th><th>95% CI</th></tr>'
    )
    for tag, group in rows:
        p, t, share, lo, hi = _rate(group)
        body.append(
            f'<tr><td>{e(tag)}</td><td class="n">{p}</td><td class="n">{t}</td><td class="n">{_pct(share)}</td><td>{_pct(lo)} to {_pct(hi)}</td></tr>'
        )
    body.append("</table>")
    body.append("<h2>Pass rate by scorer</h2>")
    body.append(
        '<table><tr><th>scorer</th><th class="n">passed</th><th class="n">failed</th>'
        '<th class="n">errored</th><th class="n">rate</th><th>95% CI</th></tr>'
    )
    for name, p, f, err in _by_scorer(results):
        lo, hi = wilson_interval(p, p + f + err)
        body.append(
            f'<tr><td>{e(name)}</td><td class="n">{p}</td><td class="n">{f}</td>'
            f'<td class="n">{err}</td><td class="n">{_pct(p / (p + f + err))}</td>'
            f"<td>{_pct(lo)} to {_pct(hi)}</td></tr>"
        )
    body.append("</table>")
    if facts.environments:
        body.append("<h2>Environment</h2><ul>")
        body += [f"<li>{e(row)}</li>" for row in _environment_rows(facts.environments)]
        body.append("</ul>")
    attempts = Counter(r.attempts for r in results.cases)
    body.append("<h2>Structured-output attempts per case</h2>")
    body.append(
        _svg_bars(
            "chart-attempts",
            "attempts histogram",
            [(str(a), attempts[a]) for a in sorted(attempts)],
            "structured-output attempts per case",
        )
    )
    latencies = [r.latency_s for r in results.cases]
    body.append("<h2>Latency</h2>")
    body.append(
        f"<p>p50 {_quantile(latencies, 0.5):.3f} s, p90 {_quantile(latencies, 0.9):.3f} s, "
        f"max {max(latencies, default=0.0):.3f} s, total {sum(latencies):.3f} s.</p>"
    )
    bins = [(f"{lo:.2f}", n) for lo, _, n in _latency_bins(latencies)]
    body.append(
        _svg_bars(
            "chart-latency", "latency histogram", bins, "latency (seconds, start of each bin)"
        )
    )
    failing = [r for r in results.cases if r.status != "passed"]
    body.append(
        f"<h2>Cases ({len(failing)} not passed, {len(results.cases) - len(failing)} passed)</h2>"
    )
    for r in [*failing, *(r for r in results.cases if r.status == "passed")]:
        body.append(_case_html(r, details.get(r.key, CaseDetail())))
    body.append(
        '<h2>Checkpoint roots</h2><table><tr><th>case</th><th class="n">events</th><th>Merkle root (hex)</th></tr>'
    )
    for r in results.cases:
        body.append(
            f'<tr><td>{e(r.key)}</td><td class="n">{r.checkpoint.size}</td><td><code>{r.checkpoint.root}</code></td></tr>'
        )
    body.append("</table>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{e(_title(results))}</title><style>{_CSS}</style></head><body>\n"
        + "\n".join(body)
        + f"\n<script>{_SCRIPT}</script>\n</body></html>\n"
    )


def write_reports(
    results: EvalResults, run_dir: Path, scored: Mapping[str, ScoredTrace] | None = None
) -> None:
    """Write ``lab-notes.md``, ``lab-notes.html`` and each case's trace page into the run directory.

    ``scored``: as `read_details`'s.
    """
    facts, details = read_details(results, run_dir, scored)
    write_replace(run_dir / "lab-notes.md", render_markdown(results, facts, details).encode())
    write_replace(run_dir / "lab-notes.html", render_html(results, facts, details).encode())
