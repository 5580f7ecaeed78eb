"""Lab Notes worth sharing: the run's facts, every case with its output, calls and trace page."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from eval_testkit import START, dataset, factory

from twinflow.agent import Trace
from twinflow.eval import CaseResult, EvalResults, Summary, run_eval
from twinflow.eval._details import ScoredTrace, read_details
from twinflow.eval._lab_notes import render_html, write_reports
from twinflow.eval._observe import observe
from twinflow.eval._results import RunIdentity
from twinflow.kernel import SteppingClock
from twinflow.views import render_trace_page

IDENTITY = RunIdentity(
    spec_digest="5" * 64, model="openai-compatible llama-cpp-python embedded model.gguf sha256:ab"
)


def run(tmp_path: Path) -> Path:
    """A six-case run, case c1 failing, on the scripted agent."""
    run_dir = tmp_path / "run"
    clock = SteppingClock(START)
    run_eval(dataset(6, wrong=(1,)), factory(), run_dir, clock=clock, identity=IDENTITY)
    return run_dir


def test_the_header_names_model_spec_digest_dataset_and_date(tmp_path: Path) -> None:
    """The Markdown header has the model and spec digest of run.json, the agent configuration
    digest, the dataset, the date and the environment (none recorded by these agents)."""
    text = (run(tmp_path) / "lab-notes.md").read_text()
    header = dict(re.findall(r"^- \*\*([a-z ]+)\*\*: (.*)$", text, flags=re.MULTILINE))
    expected = [
        "agent configuration digest",
        "dataset",
        "date",
        "environment",
        "model",
        "spec digest",
    ]
    assert expected == sorted(header)
    assert "not recorded" == header["environment"]
    assert f"{IDENTITY.model} (replies name: " == header["model"][: len(IDENTITY.model or "") + 16]
    assert IDENTITY.spec_digest == header["spec digest"]
    assert re.match(r"[0-9a-f]{64} ", header["agent configuration digest"])
    assert header["date"].startswith("2026-01-01T")


def test_a_table_per_scorer_and_each_case_input_and_expected_beside_its_output(
    tmp_path: Path,
) -> None:
    """Lab Notes count each scorer's outcomes and show a case's input and expected value."""
    run_dir = run(tmp_path)
    text = (run_dir / "lab-notes.md").read_text()
    assert "| fields | 5 | 1 | 0 | 83.3% | 43.6% to 97.0% |" in text
    assert "| schema | 6 | 0 | 0 | 100.0% | 61.0% to 100.0% |" in text
    row = next(line for line in text.splitlines() if line.startswith("| c1@1 |"))
    assert '| wrong 11.0 EUR | {"total_eur": 11} | {"total_eur": 0} |' in row
    page = (run_dir / "lab-notes.html").read_text()
    assert "<p>input: <code>wrong 11.0 EUR</code></p>" in page
    assert "<p>expected: <code>{&quot;total_eur&quot;: 11}</code></p>" in page
    assert "<th>scorer</th>" in page


def test_a_hostile_input_is_escaped_in_both_reports(tmp_path: Path) -> None:
    """A case input holding HTML and a pipe cannot add markup or a table column to Lab Notes."""
    hostile = dataset(1).model_dump()
    hostile["cases"][0]["input"] = "10.0 USD <img src=x onerror=alert(1)> | col"
    run_dir = tmp_path / "run"
    data = type(dataset(1)).model_validate(hostile)
    run_eval(data, factory(), run_dir, clock=SteppingClock(START))
    text = (run_dir / "lab-notes.md").read_text()
    page = (run_dir / "lab-notes.html").read_text()
    assert "<img" not in text and "<img" not in page
    assert "10.0 USD &lt;img src=x onerror=alert(1)&gt; \\| col" in text
    assert "10.0 USD &lt;img src=x onerror=alert(1)&gt; | col" in page


def test_every_case_is_listed_with_output_calls_and_trace_page(tmp_path: Path) -> None:
    """Passed cases are listed too (folded in HTML); each links a trace page that exists."""
    run_dir = run(tmp_path)
    page = (run_dir / "lab-notes.html").read_text()
    cases = re.findall(r'<details class="case"( open)?><summary><strong>(c\d)@1</strong>', page)
    assert [(" open", "c1")] == [c for c in cases if c[0]]
    assert ["c0", "c1", "c2", "c3", "c4", "c5"] == sorted(c[1] for c in cases)
    links = re.findall(r'<a href="([^"]+\.html)">trace page', page)
    assert 6 == len(links)
    assert all((run_dir / link).is_file() for link in links)
    assert (
        "<code>convert({&quot;amount&quot;: 10, &quot;currency&quot;: &quot;USD&quot;})</code>"
        in page
    )
    assert "output: <code>{&quot;total_eur&quot;: 5}</code>" in page


def test_a_histogram_of_one_value_is_one_bar_of_bounded_width() -> None:
    """Every case taking the same time: one latency bar, at most 60 px wide, with axis titles."""
    from twinflow.trace import Checkpoint

    cases = tuple(
        CaseResult(
            key=f"c{i}@1", case_id=f"c{i}", repeat=1, tags=(), status="passed", scores=(),
            trace=f"traces/c{i}@1.jsonl", checkpoint=Checkpoint(size=1, root="0" * 64, head="0" * 64),
            run_status="finished", attempts=1, steps=1, latency_s=0.5,
        )
        for i in range(4)
    )  # fmt: skip
    results = EvalResults(
        dataset="d", dataset_digest="0" * 64, shard=None, complete=True,
        summary=Summary(total=4, passed=4, failed=0, errored=0, flagged=0), cases=cases,
    )  # fmt: skip
    page = render_html(results)
    latency = page.split('id="chart-latency"', 1)[1].split("</svg>", 1)[0]
    widths = [float(w) for w in re.findall(r'<rect x="[^"]+" y="[^"]+" width="([^"]+)"', latency)]
    assert 1 == len(widths) and widths[0] <= 60
    assert ("latency (seconds" in latency, ">cases<" in latency) == (True, True)


def test_a_hostile_trace_path_is_neither_written_beside_nor_linked(tmp_path: Path) -> None:
    """A results file naming `../escape.jsonl` gets no page outside the run and no link."""
    from twinflow.eval._lab_notes import write_reports
    from twinflow.eval._rescore import load_run

    run_dir = run(tmp_path)
    _, results = load_run(run_dir)
    (tmp_path / "escape.jsonl").write_bytes((run_dir / results.cases[0].trace).read_bytes())
    hostile = results.cases[0].model_copy(update={"trace": "../escape.jsonl"})
    write_reports(results.model_copy(update={"cases": (hostile, *results.cases[1:])}), run_dir)
    page = (run_dir / "lab-notes.html").read_text()
    expected = (False, False, True)
    actual = (
        (tmp_path / "escape.html").exists(),
        'href="../escape' in page,
        "trace ../escape.jsonl" in page,
    )
    assert expected == actual


def test_reports_from_the_scoring_pass_are_the_reports_read_afresh(tmp_path: Path) -> None:
    """Lab Notes written by the run (from what scoring read) equal those regenerated from disk."""
    run_dir = run(tmp_path)
    written = [(run_dir / name).read_bytes() for name in ("lab-notes.md", "lab-notes.html")]
    results = EvalResults.model_validate_json((run_dir / "results.json").read_bytes())
    write_reports(results, run_dir)
    assert written == [(run_dir / name).read_bytes() for name in ("lab-notes.md", "lab-notes.html")]


def test_a_runs_pages_and_notes_show_the_bytes_it_scored(tmp_path: Path) -> None:
    """A trace changed after its case was scored changes neither its page nor the notes of the
    run: they show the bytes the result's checkpoint covers; regenerating them reads the file."""
    run_dir = tmp_path / "run"
    trace = run_dir / "traces" / "c0@1.jsonl"
    scored: list[bytes] = []

    def progress(done: int, total: int, summary: Summary) -> None:
        if done == 2:  # c0 is scored, its page written; another process swaps its trace
            scored.append(trace.read_bytes())
            trace.write_bytes((run_dir / "traces" / "c1@1.jsonl").read_bytes())

    clock = SteppingClock(START)
    run_eval(dataset(2, wrong=(1,)), factory(), run_dir, clock=clock, progress=progress)
    page = (run_dir / "traces" / "c0@1.html").read_bytes()
    notes = (run_dir / "lab-notes.md").read_text()
    assert render_trace_page(scored[0], "traces/c0@1.jsonl").encode() == page
    row = notes.split("\n| c0@1 |")[1].split("\n")[0]
    assert '| {"total_eur": 5} | {"total_eur": 5} |' in row  # expected, and the output scored
    results = EvalResults.model_validate_json((run_dir / "results.json").read_bytes())
    write_reports(results, run_dir)
    assert page != (run_dir / "traces" / "c0@1.html").read_bytes()


def test_results_json_holds_the_results_the_run_scored(tmp_path: Path) -> None:
    """A case file changed while the run goes on does not change results.json: it is made from
    the results the run wrote, not read back from the folder."""
    run_dir = tmp_path / "run"

    def progress(done: int, total: int, summary: Summary) -> None:
        if done == 1:
            path = run_dir / "cases" / "c0@1.json"
            path.write_bytes(path.read_bytes().replace(b'"passed"', b'"failed"'))

    run_eval(dataset(2), factory(), run_dir, clock=SteppingClock(START), progress=progress)
    results = EvalResults.model_validate_json((run_dir / "results.json").read_bytes())
    assert ["passed", "passed"] == [case.status for case in results.cases]


def test_what_scoring_read_stands_only_for_the_bytes_it_scored(tmp_path: Path) -> None:
    """A trace whose bytes are those scored is not read again; any other bytes are."""
    run_dir = run(tmp_path)
    results = EvalResults.model_validate_json((run_dir / "results.json").read_bytes())
    result = results.cases[0]
    data = (run_dir / result.trace).read_bytes()
    other = observe(Trace.load((run_dir / results.cases[1].trace).read_bytes()))
    assert other.output != observe(Trace.load(data)).output
    for sha, expected in [
        (hashlib.sha256(data).digest(), other.output),
        (hashlib.sha256(data + b"\n").digest(), observe(Trace.load(data)).output),
    ]:
        scored = {result.trace: ScoredTrace(sha, other, ())}
        _, details = read_details(results, run_dir, scored)
        assert expected == details[result.key].output
