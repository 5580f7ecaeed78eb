"""Lab Notes: ``lab-notes.md`` and a self-contained ``lab-notes.html`` for a run's results.

The HTML has no external assets: CSS and SVG charts are inline, so the file can be mailed,
archived or attached to a CI run and still render. A few lines of inline script check the
charts laid out and record it on the root element (``data-charts="rendered:N"``), which the
headless-browser test reads. Both reports are pure functions of the results: no clock.
"""

from __future__ import annotations

import html
from collections import Counter
from pathlib import Path

from twinflow.eval._results import CaseResult, EvalResults, write_atomic
from twinflow.eval._stats import wilson_interval

__all__ = ["render_html", "render_markdown", "write_reports"]


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
    width = (high - low) / bins or 1.0
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


def render_markdown(results: EvalResults) -> str:
    """The Markdown report."""
    s = results.summary
    passed, total, rate, low, high = _rate(list(results.cases))
    out = [f"# {_title(results)}", ""]
    out.append(f"Dataset digest `{results.dataset_digest}`.")
    if not results.complete:
        out.append("**This run is incomplete**: run it again to finish it.")
    out += [
        "",
        f"**Pass rate {_pct(rate)}** ({passed}/{total}; 95% Wilson interval {_pct(low)} to {_pct(high)}). "
        f"Passed {s.passed}, failed {s.failed}, errored {s.errored}, flagged {s.flagged}.",
        "",
        "## Pass rate by tag",
        "",
        "| tag | passed | total | rate | 95% CI |",
        "|---|---:|---:|---:|---|",
    ]
    for tag, rows in _by_tag(results):
        p, t, share, lo, hi = _rate(rows)
        out.append(f"| {tag} | {p} | {t} | {_pct(share)} | {_pct(lo)} to {_pct(hi)} |")
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
    out += ["", f"## Cases not passed ({len(failing)})", ""]
    if failing:
        out += ["| case | status | why | trace |", "|---|---|---|---|"]
        for r in failing:
            why = _why(r).replace("|", "\\|")
            out.append(f"| {r.key} | {r.status} | {why} | [{r.trace}]({r.trace}) |")
    else:
        out.append("None.")
    out += ["", "## Checkpoint roots", "", "| case | events | Merkle root |", "|---|---:|---|"]
    out += [f"| {r.key} | {r.checkpoint.size} | `{r.checkpoint.root}` |" for r in results.cases]
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
td.n,th.n{text-align:right}code{font-size:12px;word-break:break-all}.headline{font-size:1.2rem}
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
    height = len(rows) * (bar_h + 8) + 20
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
    parts.append("</svg>")
    return "".join(parts)


def _svg_bars(chart_id: str, label: str, bars: list[tuple[str, int]]) -> str:
    width, height, bottom = 600, 180, 30
    top = max((n for _, n in bars), default=0) or 1
    slot = (width - 20) / max(len(bars), 1)
    parts = [
        f'<svg class="chart" id="{chart_id}" width="{width}" height="{height}" role="img" aria-label="{html.escape(label)}">'
    ]
    for i, (name, n) in enumerate(bars):
        h = (height - bottom - 16) * n / top
        x = 10 + i * slot
        y = height - bottom - h
        parts.append(
            f'<rect x="{x + 2:.1f}" y="{y:.1f}" width="{max(slot - 4, 1):.1f}" height="{max(h, 0.5):.1f}" fill="#3b7dd8"><title>{html.escape(name)}: {n}</title></rect>'
        )
        parts.append(
            f'<text x="{x + slot / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle">{n}</text>'
        )
        parts.append(
            f'<text x="{x + slot / 2:.1f}" y="{height - bottom + 14}" text-anchor="middle">{html.escape(name)}</text>'
        )
    parts.append(
        f'<line x1="8" x2="{width - 8}" y1="{height - bottom}" y2="{height - bottom}" stroke="#1d232a"/>'
    )
    parts.append("</svg>")
    return "".join(parts)


def render_html(results: EvalResults) -> str:
    """The self-contained HTML report."""
    e = html.escape
    s = results.summary
    passed, total, rate, low, high = _rate(list(results.cases))
    body = [
        f"<h1>{e(_title(results))}</h1>",
        f"<p>Dataset digest <code>{e(results.dataset_digest)}</code>.</p>",
    ]
    if not results.complete:
        body.append("<p><strong>This run is incomplete</strong>: run it again to finish it.</p>")
    body.append(
        f'<p class="headline"><strong>Pass rate {_pct(rate)}</strong> ({passed}/{total}; 95% Wilson interval '
        f"{_pct(low)} to {_pct(high)}). Passed {s.passed}, failed {s.failed}, errored {s.errored}, flagged {s.flagged}.</p>"
    )
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
    attempts = Counter(r.attempts for r in results.cases)
    body.append("<h2>Structured-output attempts per case</h2>")
    body.append(
        _svg_bars(
            "chart-attempts",
            "attempts histogram",
            [(str(a), attempts[a]) for a in sorted(attempts)],
        )
    )
    latencies = [r.latency_s for r in results.cases]
    body.append("<h2>Latency</h2>")
    body.append(
        f"<p>p50 {_quantile(latencies, 0.5):.3f} s, p90 {_quantile(latencies, 0.9):.3f} s, "
        f"max {max(latencies, default=0.0):.3f} s, total {sum(latencies):.3f} s.</p>"
    )
    bins = [(f"{lo:.2f}", n) for lo, _, n in _latency_bins(latencies)]
    body.append(_svg_bars("chart-latency", "latency histogram (seconds, bin start)", bins))
    failing = [r for r in results.cases if r.status != "passed"]
    body.append(f"<h2>Cases not passed ({len(failing)})</h2>")
    if failing:
        body.append("<table><tr><th>case</th><th>status</th><th>why</th><th>trace</th></tr>")
        for r in failing:
            body.append(
                f'<tr><td>{e(r.key)}</td><td class="{r.status}">{r.status}</td><td>{e(_why(r))}</td>'
                f'<td><a href="{e(r.trace)}">{e(r.trace)}</a></td></tr>'
            )
        body.append("</table>")
    else:
        body.append("<p>None.</p>")
    body.append(
        '<h2>Checkpoint roots</h2><table><tr><th>case</th><th class="n">events</th><th>Merkle root</th></tr>'
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


def write_reports(results: EvalResults, run_dir: Path) -> None:
    """Write ``lab-notes.md`` and ``lab-notes.html`` into the run directory."""
    write_atomic(run_dir / "lab-notes.md", render_markdown(results).encode())
    write_atomic(run_dir / "lab-notes.html", render_html(results).encode())
