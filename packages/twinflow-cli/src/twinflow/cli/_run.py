"""``twinflow run``, ``twinflow replay`` and ``twinflow demo``: agents on real adapters.

A run writes three files into its directory: ``trace.jsonl`` (the run, as a verifiable value),
``spec.yaml`` (what it was run with, so ``replay`` can rebuild the same agent) and ``code.json``
(the directory the spec's modules were imported from and each module's sha256). A later run
into the same directory, or one running at the same time, takes the next free set
``trace.N.jsonl``/``spec.N.yaml``/``code.N.json``: each set is claimed by creating its spec
exclusively, so no file is ever renamed or shared. A run that is refused (a bad spec, a tool
that does not import, an unset API key) writes nothing.

``replay`` never imports code because a trace came with it: it rebuilds the agent from the spec
the user names (``--spec``), or from the spec beside the trace only with ``--trust-spec``, after
printing the modules that spec will import; those are then imported from the directory the code
record names only if each file still has the digest the run recorded.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from twinflow._base._code import importing_from
from twinflow._base._files import write_new
from twinflow.agent import (
    REPLAY_KINDS,
    CallSummary,
    Decision,
    RunError,
    RunPaused,
    RunStarted,
    ToolCalled,
    Trace,
    replay,
    summarize_trace,
    verify_agent_trace,
)
from twinflow.cli import _demo
from twinflow.cli._output import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_PAUSED,
    CheckFailed,
    Command,
    Output,
    invocation,
    say,
)
from twinflow.cli._show import _clean
from twinflow.cli._spec import (
    CodeChangedError,
    RunSpec,
    check_code,
    load_spec,
    load_tools,
    parse_spec,
    read_code_record,
    read_spec_text,
    record_code,
    spec_directories,
    spec_modules,
)
from twinflow.cli._traces import parse_trace, read_trace_bytes
from twinflow.cli._watch import TextPrinter
from twinflow.cli._wiring import (
    EMBEDDED,
    build_agent,
    build_model,
    build_transport,
    check_agent,
    mcp_servers,
    model_base_url,
    numbered,
    replay_builder,
    run_environment,
)
from twinflow.kernel import NondeterminismError, ReplayDivergenceError, SystemClock, SystemIds
from twinflow.trace import (
    FileTraceSink,
    FileWriteError,
    MemoryTraceSink,
    TargetExistsError,
    TraceError,
    UserError,
)

__all__ = [
    "COMMANDS",
    "DEMO_SPEC",
    "add_spec_arguments",
    "claim_run_files",
    "code_beside",
    "configure_demo",
    "configure_replay",
    "configure_run",
    "demo",
    "divergence_failed",
    "replay_command",
    "replay_spec",
    "report_outcome",
    "run",
    "spec_beside",
]

SPEC_NAME = "spec.yaml"


class _Phases:
    """Times each phase of a command with the kernel's clock."""

    def __init__(self) -> None:
        self._clock = SystemClock()
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = self._clock.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = self._clock.monotonic() - start


_MAX_RUNS_PER_DIRECTORY = 100_000


def _pair(directory: Path, n: int) -> tuple[Path, Path]:
    return numbered(directory / "trace.jsonl", n), numbered(directory / SPEC_NAME, n)


def claim_run_files(
    directory: Path, spec_text: str, code_record: bytes | None = None
) -> tuple[Path, Path]:
    """Claim the first free ``(trace, spec)`` pair in ``directory`` and write the spec there.

    The claim is the spec's exclusive creation (`write_new`): of runs racing for one pair,
    one gets it and the others move on to the next, so each run's trace and spec are its own.
    The trace path is returned unwritten; the trace sink creates it exclusively. A
    ``code_record`` is written beside the spec as its ``code.N.json`` (`code_beside`).

    Raises:
        FileWriteError (``link``): the directory, or a name in it, is a symbolic link.
        UserError: the directory holds an absurd number of runs.
    """
    if directory.is_symlink():
        raise FileWriteError(
            f"{directory} is a symbolic link; a run is not written through it: remove the link, "
            "or name the real directory with --out",
            path=directory,
            reason="link",
        )
    directory.mkdir(parents=True, exist_ok=True)
    for n in itertools.count():
        if n >= _MAX_RUNS_PER_DIRECTORY:
            raise UserError(f"{directory} holds {n} runs already: pick a new --out directory")
        trace, spec = _pair(directory, n)
        if os.path.lexists(trace) or os.path.lexists(code_beside(trace)):
            continue
        try:
            write_new(spec, spec_text.encode("utf-8"))
        except TargetExistsError:
            continue
        if code_record is not None:
            write_new(code_beside(trace), code_record)
        return trace, spec
    raise AssertionError("unreachable")


def spec_beside(trace_path: Path) -> Path:
    """The spec a run wrote with ``trace_path``: ``trace.N.jsonl`` pairs with ``spec.N.yaml``."""
    name = trace_path.name
    if name.startswith("trace") and name.endswith(".jsonl"):
        return trace_path.with_name(f"spec{name[len('trace') : -len('.jsonl')]}.yaml")
    return trace_path.with_name(SPEC_NAME)


def code_beside(trace_path: Path) -> Path:
    """The code record a run wrote with ``trace_path``: ``trace.N.jsonl`` pairs with ``code.N.json``."""
    spec = spec_beside(trace_path).name
    return trace_path.with_name(f"code{spec[len('spec') : -len('.yaml')]}.json")


class RunOutcome(BaseModel):
    """What a run produced."""

    prompt: str = ""
    """The prompt the run started from."""
    trace: str
    """The trace file."""
    events: int
    """Events in the trace."""
    root: str
    """The trace's Merkle root."""
    output: Any = None
    """The run's output (JSON), if it finished."""
    error: str | None = None
    """Why the run failed, if it did."""
    steps: int = 0
    """Model requests."""
    tool_calls: list[str] = []
    """Tools that ran, in order."""
    decisions: dict[str, int] = {}
    """Policy decisions by verdict."""
    tool_errors: list[str] = []
    """Tools that raised, as ``name: ErrorType``, in order (the model saw an error result)."""
    calls: list[CallSummary] = []
    """Each tool call the model asked for, in order: its arguments, the policy's decision and
    the result the model saw."""
    rejected: int = 0
    """Replies refused (invalid actions or outputs), each recorded in the trace."""
    paused: list[dict[str, Any]] = []
    """The calls the run waits on a person for (``approval_requested`` events), if it paused."""


def _execute(
    spec: RunSpec,
    spec_text: str,
    out_dir: Path,
    out: Output,
    phases: _Phases,
    *,
    watch: bool,
    command: str = "run",
    resume_from: Path | None = None,
    decisions: Sequence[Decision] = (),
    fork_from: tuple[Path, int] | None = None,
) -> RunOutcome:
    """Run the agent ``spec`` describes into a new trace in ``out_dir``, continue the run in
    ``resume_from`` (`Agent.resume`, with ``decisions`` on calls waiting for approval), or
    fork the run ``fork_from`` names at its step into a new trace (`Agent.fork`)."""
    # Build the agent once before touching the run directory, so a usage error in the spec
    # (a tool that does not import, a policy naming an unknown tool, an unset API key)
    # changes no file.
    callables = load_tools(spec)
    transport = build_transport(spec.model)
    if spec.model.url != EMBEDDED:
        build_model(spec.model, transport, SystemIds())  # checks URL and dialect
    paused: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        stack.callback(transport.close)
        # A continued run takes its tool lists from its trace: the prefix starts no server.
        continued = resume_from if resume_from is not None else fork_from and fork_from[0]
        recorded = _recorded_or_none(continued) if continued else None
        log_dir = out_dir if resume_from is None else resume_from.parent
        servers = stack.enter_context(mcp_servers(spec, log_dir, recorded=recorded))
        check_agent(spec, callables, command, servers)
        environment = run_environment(spec)
        if resume_from is None:
            code = record_code(spec).model_dump_json(indent=2).encode("utf-8")
            trace_path, _spec_path = claim_run_files(out_dir, spec_text, code)
        else:
            trace_path = resume_from
        loading = spec.model.url == EMBEDDED
        with phases.phase("model load") if loading else contextlib.nullcontext():
            url = stack.enter_context(model_base_url(spec.model.url, out_dir, out.line))
        model_spec = spec.model.model_copy(update={"url": url})
        ids = SystemIds()
        model = build_model(model_spec, transport, ids)
        agent = build_agent(
            spec,
            model=model,
            clock=SystemClock(),
            ids=ids,
            trace=MemoryTraceSink() if resume_from is not None else FileTraceSink(trace_path),
            tools=callables,
            observer=TextPrinter(sys.stdout) if watch and resume_from is None else None,
            environment=environment,
            servers=servers,
        )
        doing = (
            "forking" if fork_from is not None else "running" if resume_from is None else "resuming"
        )
        out.line(f"{doing} the agent ({spec.model.mode} mode, up to {spec.max_steps} steps) ...")
        output: Any = None
        error: str | None = None
        with phases.phase("run"):
            try:
                if fork_from is not None:
                    result = agent.fork(fork_from[0], at_step=fork_from[1])
                elif resume_from is None:
                    result = agent.run(spec.prompt)
                else:
                    result = agent.resume(resume_from, decisions=decisions)
                output = result.output
            except RunPaused as exc:
                paused = [p.model_dump(mode="json") for p in exc.paused.pending]
            except RunError as exc:
                error = f"{type(exc).__name__}: {exc}"
            finally:
                agent.writer.close()
        # A new run's root and size come from its own writer, never from re-reading a path.
        checkpoint = agent.writer.checkpoint() if resume_from is None else None
    trace = Trace.load(trace_path)
    if checkpoint is None:
        checkpoint = trace.checkpoint()
    summary = summarize_trace(trace.events)
    if isinstance(output, BaseModel):
        output = output.model_dump(mode="json")
    return RunOutcome(
        prompt=summary.prompt,
        trace=str(trace_path),
        events=checkpoint.size,
        root=checkpoint.root,
        output=output,
        error=error,
        steps=summary.replies,
        tool_calls=summary.tools_run,
        decisions=summary.decisions,
        paused=paused,
        tool_errors=summary.tool_errors,
        calls=list(summary.tool_calls),
        rejected=summary.rejected,
    )


def _recorded_or_none(path: Path) -> Trace | None:
    """The trace a continued run starts from, or None if it does not load as it is (a torn
    last line, which `Agent.resume` repairs first): its servers then start for the prefix."""
    try:
        return Trace.load(path)
    except TraceError:
        return None


def replay_spec(trace_path: Path, spec_path: Path | None, trust_spec: bool, out: Output) -> RunSpec:
    """The spec to rebuild the agent from: the one named, or the trace's own only if trusted."""
    if spec_path is not None:
        return load_spec(spec_path)
    beside = spec_beside(trace_path)
    if not trust_spec:
        hint = ""
        if beside.is_file():
            with contextlib.suppress(UserError):
                modules = spec_modules(parse_spec(read_spec_text(beside), str(beside)))
                hint = f" ({beside} would import: {_names(modules)})"
        raise UserError(
            f"{trace_path}: name the spec to rebuild the agent from with --spec PATH (one you "
            f"trust: replay imports the tools and output model it names), or pass --trust-spec "
            f"to use the spec beside the trace{hint}"
        )
    if not beside.is_file():
        raise UserError(f"{beside}: no spec beside the trace; pass --spec PATH")
    record = read_code_record(code_beside(trace_path))
    # The run's own code directory if it recorded one that is still there (a run written to
    # another directory than its spec's); else the run directory (a bundle with its modules).
    code_dir = beside.resolve().parent
    if record is not None and record.code_dir is not None and Path(record.code_dir).is_dir():
        code_dir = Path(record.code_dir)
    spec = parse_spec(read_spec_text(beside), str(beside), code_dir=code_dir)
    modules = spec_modules(spec)
    out.line(
        f"--trust-spec: rebuilding from {beside}, importing {_names(modules)} "
        f"(from {_clean(str(code_dir))} first)"
    )
    if out.as_json:
        say(f"twinflow replay: importing {_names(modules)}")
    if record is not None:
        try:
            check_code(spec, record)
        except CodeChangedError as exc:
            raise CheckFailed(
                f"{trace_path}: {exc}", {"trace": str(trace_path), "module": exc.module}
            ) from None
    return spec


_SHOWN_CALLS = 20


def _announce_live_calls(trace: Trace) -> None:
    """Say, before any tool runs, which tools live replay runs and with which arguments.

    The arguments are the trace's, and the tools the spec's: replaying a received trace live
    runs the user's own tools on what the trace's author chose. The line goes to stderr (also
    under ``--json``), escaped, so it is read before the first call (docs/adr/0093).
    """
    calls = [e.body for e in trace.events if isinstance(e.body, ToolCalled)]
    shown = [
        f"{call.tool}({json.dumps(call.arguments, sort_keys=True)[:200]})"
        for call in calls[:_SHOWN_CALLS]
    ]
    more = f"; and {len(calls) - _SHOWN_CALLS} more" if len(calls) > _SHOWN_CALLS else ""
    say(
        f"twinflow replay: --mode live runs the spec's tools on the trace's recorded arguments, "
        f"{len(calls)} call(s): {'; '.join(shown) or 'none'}{more}"
    )


def _names(modules: tuple[str, ...]) -> str:
    """Module names as they may be shown on a terminal (a hostile name is shown escaped)."""
    shown = [m if all(p.isidentifier() for p in m.split(".")) else ascii(m) for m in modules]
    return ", ".join(shown) or "nothing"


def divergence_failed(
    trace_path: Path, what: str, exc: ReplayDivergenceError, **extra: str
) -> CheckFailed:
    """The failed check a divergence is reported as (exit 1): where, both events, the difference."""
    return CheckFailed(
        f"{trace_path}: {what} diverged: {exc}",
        {
            "trace": str(trace_path),
            **extra,
            "seq": exc.seq,
            "expected": exc.expected,
            "actual": exc.actual,
            "pointer": None if exc.difference is None else exc.difference.pointer,
            "difference": None if exc.difference is None else str(exc.difference),
        },
    )


def _replay_file(trace_path: Path, spec_of: Callable[[], RunSpec], mode: str) -> dict[str, Any]:
    # The trace is read and checked before the spec: an unreadable trace imports nothing.
    data = read_trace_bytes(trace_path)
    trace = parse_trace(trace_path, data, keep=REPLAY_KINDS)
    spec = spec_of()
    if mode == "live":
        _announce_live_calls(trace)
    try:
        # Recorded mode starts no MCP server: the tool lists are the trace's own.
        with (
            importing_from(spec_directories(spec)),
            mcp_servers(
                spec,
                trace_path.parent,
                recorded=None if mode == "live" else trace,
                live=False,
            ) as servers,
        ):
            result = replay(
                trace,
                replay_builder(spec, servers=servers),
                mode="live" if mode == "live" else "recorded",
            )
    except ReplayDivergenceError as exc:
        raise divergence_failed(trace_path, f"replay ({mode})", exc, mode=mode) from None
    except NondeterminismError as exc:
        raise CheckFailed(
            f"{trace_path}: replay ({mode}) reached nondeterminism: {exc}",
            {
                "trace": str(trace_path),
                "mode": mode,
                "entry_point": exc.entry_point,
                "caller": exc.caller,
            },
        ) from None
    # The replay re-ran the recorded fingerprint (docs/adr/0122); how this machine differs
    # from the recording one is said, never held against the replay.
    started = next(iter(trace.events)).body
    recorded = started.environment if isinstance(started, RunStarted) else None
    differences = (
        [] if recorded is None else list(recorded.differences(run_environment(spec), imports=False))
    )
    return {
        "trace": str(trace_path),
        "mode": mode,
        "events": result.events,
        "root": result.root,
        "environment_differences": differences,
    }


# -- run ------------------------------------------------------------------------------------


def configure_run(p: argparse.ArgumentParser) -> None:
    """Arguments of ``twinflow run``."""
    p.add_argument(
        "spec", type=Path, help="the run spec (YAML): model endpoint, tools, policy, output"
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("twinflow-run"),
        help="directory for trace.jsonl and spec.yaml (default: twinflow-run)",
    )
    _add_quiet(p)


def _add_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--quiet",
        action="store_true",
        help="do not print the model's text as it streams (it is never printed with --json)",
    )


def run(args: argparse.Namespace, out: Output) -> int:
    """``twinflow run SPEC``."""
    text = read_spec_text(args.spec)
    spec = parse_spec(text, str(args.spec), code_dir=args.spec.resolve().parent)
    phases = _Phases()
    # For the whole run, not only while the tools are imported: a tool may import its siblings
    # when it is called.
    with importing_from(spec_directories(spec)):
        outcome = _execute(spec, text, args.out, out, phases, watch=not (args.quiet or args.json))
    return report_outcome(outcome, out, "run")


def report_outcome(outcome: RunOutcome, out: Output, command: str) -> int:
    """Print a run's outcome and return its exit code: 0 done, 1 failed, 3 waiting for a person."""
    payload = {"ok": outcome.error is None and not outcome.paused, **outcome.model_dump()}
    out.document(payload)
    _print_outcome(outcome, out)
    if outcome.error is not None:
        say(f"twinflow {command}: the run failed: {outcome.error}")
        return EXIT_FAILED
    if outcome.paused:
        tf = invocation()
        say(
            f"twinflow {command}: the run waits for a decision on {len(outcome.paused)} call(s); "
            f"decide with: {tf} approve {outcome.trace} --call ID [--deny] --spec SPEC"
        )
        return EXIT_PAUSED
    return EXIT_OK


def _one_line(value: object) -> str:
    """A value from the run (the model's, a tool's) as one printable line."""
    text = (
        value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    )
    return _clean(text.replace("\n", "\\n"))


def _print_outcome(outcome: RunOutcome, out: Output) -> None:
    allow, deny = outcome.decisions.get("allow", 0), outcome.decisions.get("deny", 0)
    tools = ", ".join(outcome.tool_calls) or "none"
    out.line(f"  prompt    {_one_line(outcome.prompt)}")
    out.line(f"  steps     {outcome.steps} model requests")
    out.line(f"  tools     {len(outcome.tool_calls)} call(s): {tools}")
    for call in outcome.calls:
        shown = f"{_one_line(call.tool)} {_one_line(call.arguments)}"
        if call.decision is None:
            came_back = "not decided (the run ended first)"
        elif call.decision == "deny":
            came_back = f"denied: {_one_line(call.reason)}"
        elif call.error_type is not None:
            came_back = f"raised {_one_line(call.error_type)}: {_one_line(call.result)}"
        else:
            came_back = _one_line(call.result)
        out.line(f"    call    {shown} -> {came_back}")
    if outcome.tool_errors:
        out.line(f"  raised    {len(outcome.tool_errors)}: {', '.join(outcome.tool_errors)}")
    if outcome.rejected:
        out.line(f"  refused   {outcome.rejected} reply(ies) (output_rejected events in the trace)")
    out.line(f"  policy    {allow + deny} decision(s): {allow} allowed, {deny} denied")
    for waiting in outcome.paused:
        arguments = json.dumps(waiting["arguments"], sort_keys=True, ensure_ascii=True)
        out.line(f"  waiting   {waiting['call_id']!a} {waiting['tool']!a} {arguments}")
    if outcome.paused:
        out.line(
            f"  decide    {invocation()} approve {outcome.trace} (--call ID ... | --all) [--deny]"
        )
    elif outcome.error is None:
        out.line(f"  answer    {_one_line(outcome.output)}")
    else:
        out.line(f"  failed    {_one_line(outcome.error)}")
    out.line(f"  trace     {outcome.trace} ({outcome.events} events)")
    out.line(f"  root      (hex) {outcome.root}")


# -- replay ---------------------------------------------------------------------------------


def add_spec_arguments(p: argparse.ArgumentParser) -> None:
    """``--spec`` and ``--trust-spec``: where a command that rebuilds a recorded agent reads it."""
    p.add_argument(
        "--spec",
        type=Path,
        help="the run spec to rebuild the agent from; its tool and output modules are imported "
        "from its own directory",
    )
    p.add_argument(
        "--trust-spec",
        action="store_true",
        help="use the spec beside the trace instead (it names code that will be imported: only "
        "for traces you made or trust); the modules are printed first",
    )


def configure_replay(p: argparse.ArgumentParser) -> None:
    """Arguments of ``twinflow replay``."""
    p.add_argument("trace", type=Path, help="the recorded trace (JSONL)")
    add_spec_arguments(p)
    p.add_argument(
        "--mode",
        choices=("recorded", "live"),
        default="recorded",
        help="recorded: tool results from the trace; live: run the tools again (default: recorded)",
    )


def replay_command(args: argparse.Namespace, out: Output) -> int:
    """``twinflow replay TRACE``."""
    payload = _replay_file(
        args.trace, lambda: replay_spec(args.trace, args.spec, args.trust_spec, out), args.mode
    )
    out.document({"ok": True, **payload})
    out.line(f"ok: {args.trace}: replay ({args.mode}) matched all {payload['events']} events")
    out.line(f"root (hex) {payload['root']}")
    differences = payload["environment_differences"]
    if differences:
        # The trace is received input: what it recorded is escaped for the terminal.
        shown = "; ".join(_clean(line) for line in differences[:5])
        more = f" (and {len(differences) - 5} more)" if len(differences) > 5 else ""
        out.line(
            f"note: recorded in another environment than this one ({len(differences)} "
            f"difference(s)): {shown}{more}"
        )
    return EXIT_OK


# -- demo -----------------------------------------------------------------------------------

DEMO_SPEC = """\
# The demo's run spec: `twinflow replay` rebuilds the agent from this file.
prompt: {prompt}
system: {system}
model:
  kind: {kind}
  url: {url}
  dialect: {dialect}
  name: {name}
  mode: structured-action
  temperature: 0
  max_tokens: 128
tools:
  - twinflow.cli._demo:convert_currency
policy:
  allow: [convert_currency]
  max_tool_calls: 1
output: twinflow.cli._demo:Conversion
max_steps: 4
"""


def configure_demo(p: argparse.ArgumentParser) -> None:
    """Arguments of ``twinflow demo``."""
    p.add_argument(
        "--out",
        type=Path,
        default=Path("twinflow-demo"),
        help="directory for the demo's files (default: twinflow-demo)",
    )
    p.add_argument(
        "--model-url", help="use this running server instead of starting the embedded SmolLM2-135M"
    )
    p.add_argument(
        "--kind",
        choices=("openai-compatible", "ollama"),
        default="openai-compatible",
        help="the --model-url server's API (default: openai-compatible)",
    )
    p.add_argument(
        "--dialect",
        choices=("llama-cpp-python", "llama.cpp", "vllm", "lmstudio"),
        default="llama-cpp-python",
        help="how the OpenAI-compatible server takes a JSON schema (default: llama-cpp-python)",
    )
    p.add_argument(
        "--model-name", default="local", help="the model name sent to the server (default: local)"
    )
    _add_quiet(p)


def demo(args: argparse.Namespace, out: Output) -> int:
    """``twinflow demo``: run, verify and replay a small agent task on a local model."""
    spec_text = DEMO_SPEC.format(
        prompt=json.dumps(_demo.PROMPT),
        system=json.dumps(_demo.SYSTEM),
        kind=args.kind,
        url=args.model_url or EMBEDDED,
        dialect=args.dialect,
        name=args.model_name,
    )
    spec = parse_spec(spec_text, "<demo spec>")
    phases = _Phases()
    out.line("twinflow demo: one agent run on a local model, then verify and replay its trace")
    outcome = _execute(
        spec, spec_text, args.out, out, phases, watch=not (args.quiet or args.json), command="demo"
    )
    trace_path = Path(outcome.trace)
    with phases.phase("verify"):
        report = verify_agent_trace(trace_path)
    if report.problem is not None:
        raise CheckFailed(f"{trace_path}: the demo's own trace does not verify: {report.problem}")
    with phases.phase("replay"):
        replayed = _replay_file(trace_path, lambda: spec, "recorded")
    correct, verdict = _demo.judge(outcome.output)
    payload = {
        "ok": outcome.error is None,
        **outcome.model_dump(),
        "correct": correct,
        "verdict": verdict,
        "verified": True,
        "replayed": replayed,
        "seconds": {k: round(v, 3) for k, v in phases.seconds.items()},
    }
    out.document(payload)
    _print_outcome(outcome, out)
    out.line(f"  correct?  {verdict}")
    out.line(f"  verify    ok: {report.events} events, hash chain and Merkle root check out")
    out.line(f"  replay    ok: recorded mode matched all {replayed['events']} events")
    timing = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in phases.seconds.items())
    out.line(f"  time      {timing}")
    out.line("")
    spec_path = spec_beside(trace_path)
    tf = invocation()
    out.line(f"next: {tf} show {trace_path}   |   {tf} verify {trace_path}")
    out.line(f"      {tf} replay {trace_path} --spec {spec_path} --mode live")
    out.line(f"      {tf} prove {trace_path} --seq 0   |   {tf} checkpoint {trace_path}")
    auditor = invocation("twinflow-trace", "twinflow.trace")
    out.line(f"      an auditor, with only twinflow-trace installed: {auditor} verify {trace_path}")
    if outcome.error is not None:
        say(f"twinflow demo: the agent run failed: {outcome.error}")
        return EXIT_FAILED
    return EXIT_OK


COMMANDS: dict[str, Command] = {
    "demo": (configure_demo, demo),
    "run": (configure_run, run),
    "replay": (configure_replay, replay_command),
}
"""The commands that run agents (the trace commands are in `twinflow.cli._commands`)."""
