"""Lab Notes: ``lab-notes.html``, and the writer of both reports into a run directory.

The HTML has no external assets: CSS and SVG charts are inline, so the file can be mailed,
archived or attached to a CI run and still render. A few lines of inline script check the
charts laid out and record it on the root element (``data-charts="rendered:N"``), which the
headless-browser test reads. Both reports are pure functions of the results: no clock.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from twinflow._base._files import write_replace
from twinflow.eval._details import (
    CaseDetail,
    RunFacts,
    ScoredTrace,
    _judgements,
    _page_of,
    read_details,
)
from twinflow.eval._report import (
    _by_scorer,
    _by_tag,
    _cost,
    _environment_rows,
    _header,
    _json,
    _latency_bins,
    _pct,
    _plan_lines,
    _quantile,
    _rate,
    _title,
    _trials,
    _why,
    render_markdown,
)
from twinflow.eval._results import CaseResult, EvalResults
from twinflow.eval._stats import wilson_interval

__all__ = ["render_html", "write_reports"]


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


def _html_rates(results: EvalResults) -> list[str]:
    """The HTML report's pass rates by tag (with its chart) and by scorer."""
    e = html.escape
    body: list[str] = []
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
    return body


def _html_charts(results: EvalResults) -> list[str]:
    """The HTML report's histograms: structured-output attempts and latency per case."""
    body: list[str] = []
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
    return body


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
    if results.stopped is not None:
        body.append(f"<p><strong>Stopped at its budget</strong>: {e(results.stopped)}.</p>")
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
    body += _html_rates(results)
    if facts.environments:
        body.append("<h2>Environment</h2><ul>")
        body += [f"<li>{e(row)}</li>" for row in _environment_rows(facts.environments)]
        body.append("</ul>")
    body += _html_charts(results)
    cost = _cost(results)
    if cost is not None:
        body.append(f"<h2>Cost</h2><p>{e(cost[0])}</p><table><tr><th>case</th>")
        body.append('<th class="n">US dollars</th></tr>')
        body += [f'<tr><td>{e(key)}</td><td class="n">{e(usd)}</td></tr>' for key, usd in cost[1]]
        body.append("</table>")
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
