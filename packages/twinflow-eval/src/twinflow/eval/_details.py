"""What Lab Notes read of a run: each case's trace read once (`read_details`), its page.

Both reports (`twinflow.eval._report`'s Markdown, `twinflow.eval._lab_notes`' HTML) show what
is read here; the runner hands over what it read while scoring (`ScoredTrace`), so a trace
is not read twice.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from pydantic import JsonValue

from twinflow._base._files import read_inside, write_replace
from twinflow.agent import ModelResponded, RunStarted, TraceEvent, typed_event
from twinflow.agent._events import Environment
from twinflow.eval._errors import PlanError, RunDirError
from twinflow.eval._frozen import EvalValue
from twinflow.eval._observe import Observation, ToolCallRecord, observe
from twinflow.eval._plan import Plan, read_plan
from twinflow.eval._results import CaseResult, EvalResults, RunManifest, read_json_model
from twinflow.eval._simulated import user_trace
from twinflow.trace import TraceCorruptError, walk_trace
from twinflow.views import render_trace_page

__all__ = [
    "CaseDetail",
    "RunFacts",
    "ScoredTrace",
    "keeps_fact",
    "read_details",
    "write_page",
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
        children = None
        user = user_trace(run_dir / trace)
        if b'"simulator":{' in data and user.is_file() and not user.is_symlink():
            # The simulated user's trace is shown, verified against each turn, in the page.
            children = {user.name: read_inside(run_dir, f"traces/{user.name}", what="trace")}
        page_text = render_trace_page(data, trace, None, children)
        # Not synced: a page is regenerated from its trace whenever the reports are written.
        write_replace(run_dir / page, page_text.encode(), durable=False)
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

    Each page (``traces/<key>.html``) is `twinflow.views.render_trace_page`'s: it verifies the
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


def _manifest(run_dir: Path) -> RunManifest | None:
    """The run's ``run.json``, or None where there is none (or it cannot be read)."""
    path = run_dir / "run.json"
    if not path.is_file():
        return None
    try:
        return read_json_model(path, RunManifest)
    except RunDirError:
        return None
