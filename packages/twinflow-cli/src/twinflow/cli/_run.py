"""``twinflow run``, ``twinflow replay`` and ``twinflow demo``: agents on real adapters.

A run writes its ``trace``/``spec``/``code`` set into its directory (`_run_files`). A run that
is refused (a bad spec, a tool that does not import, an unset API key) writes nothing.

``replay`` never imports code because a trace came with it: it rebuilds the agent from the spec
the user names (``--spec``), or from the spec beside the trace only with ``--trust-spec``, after
printing the modules that spec will import; those are then imported from the directory the code
record names only if each file still has the digest the run recorded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel

from twinflow._base._code import importing_from
from twinflow.agent import (
    Agent,
    Decision,
    RunError,
    RunPaused,
    RunResult,
    RunSpec,
    Trace,
)
from twinflow.cli._errors import divergence_failed
from twinflow.cli._live_otel import LiveExport
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
from twinflow.cli._run_files import claim_run_files, code_beside, spec_beside
from twinflow.cli._show import _clean
from twinflow.cli._watch import ChatPrinter, TextPrinter
from twinflow.cli._wiring import chat_model
from twinflow.kernel import ReplayDivergenceError, SystemClock, SystemIds
from twinflow.models._providers import EMBEDDED
from twinflow.trace import (
    Checkpoint,
    FileTraceSink,
    MemoryTraceSink,
    TraceCorruptError,
    TraceError,
    TraceSink,
    UserError,
)
from twinflow.views import summarize_trace
from twinflow.views._summary import CallSummary

__all__ = [
    "COMMANDS",
    "claim_run_files",
    "code_beside",
    "configure_run",
    "report_outcome",
    "run",
    "spec_beside",
]


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run whose trace is on disk: the run is paused there, not lost."""

    def __init__(self, trace: Path) -> None:
        super().__init__(str(trace))
        self.trace = trace
        """The trace to resume."""


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
    next_turn: tuple[Path, str] | None = None,
    at_turn: bool = False,
    chat: Callable[[], str | None] | None = None,
    live: LiveExport | None = None,
) -> RunOutcome:
    """Run the agent ``spec`` describes into a new trace in ``out_dir``, continue the run in
    ``resume_from`` (`Agent.resume`, with ``decisions`` on calls waiting for approval), send
    the run in ``next_turn``'s trace its next user turn (`Agent.run` with ``continue_from``), or
    fork the run ``fork_from`` names at its step (its turn, with ``at_turn``) into a new trace
    (`Agent.fork`); or, with ``chat``, hold a conversation whose turns it reads (None: the end).
    ``live`` sends a new run's spans to a collector as it goes."""
    if next_turn is not None:
        resume_from = next_turn[0]
    # Build the agent once before touching the run directory, so a usage error in the spec
    # (a tool that does not import, a policy naming an unknown tool, an unset API key)
    # changes no file.
    resolved = spec.resolve()
    transport = spec.model.transport()
    if spec.model.url != EMBEDDED:
        chat_model(spec.model, transport, SystemIds())  # checks URL and dialect
    with contextlib.ExitStack() as stack:
        stack.callback(transport.close)
        # A continued run takes its tool lists from its trace: the prefix starts no server.
        continued = resume_from if resume_from is not None else fork_from and fork_from[0]
        recorded = _recorded_or_none(continued) if continued else None
        log_dir = out_dir if resume_from is None else resume_from.parent
        servers = stack.enter_context(spec.open_mcp_servers(log_dir, recorded=recorded))
        resolved.check(servers, command)
        environment = spec.environment()
        if resume_from is None:
            code = spec.code_record().model_dump_json(indent=2).encode("utf-8")
            trace_path, _spec_path = claim_run_files(out_dir, spec_text, code)
        else:
            trace_path = resume_from
        loading = spec.model.url == EMBEDDED
        with phases.phase("model load") if loading else contextlib.nullcontext():
            url = stack.enter_context(spec.model.serving(out_dir, out.line))
        model_spec = spec.model.model_copy(update={"url": url})
        ids = SystemIds()
        sink: TraceSink = (
            MemoryTraceSink() if resume_from is not None else FileTraceSink(trace_path)
        )
        if live is not None and resume_from is None:
            stack.callback(lambda: say(live.close()))
            sink = live.sink(sink)
        agent = resolved.agent(
            model=chat_model(model_spec, transport, ids),
            clock=SystemClock(),
            ids=ids,
            trace=sink,
            observer=(
                # Under --json stdout is the one document: the conversation is shown on stderr.
                ChatPrinter(sys.stderr if out.as_json else sys.stdout)
                if chat is not None
                else TextPrinter(sys.stdout)
                if watch and resume_from is None
                else None
            ),
            environment=environment,
            servers=servers,
        )
        doing = (
            "talking with"
            if chat is not None
            else "forking"
            if fork_from is not None
            else "running"
            if resume_from is None
            else "resuming"
            if next_turn is None
            else "continuing"
        )
        out.line(
            f"{doing} the agent ({spec.model.mode} mode, up to {spec.max_steps} steps"
            f"{' a turn; Ctrl-D ends' if chat is not None else ''}) ..."
        )
        with phases.phase("run"):
            try:
                output, error, paused = _drive(
                    agent, spec, resume_from, decisions, fork_from, next_turn, at_turn, chat
                )
            except KeyboardInterrupt as exc:
                # Ctrl-C pauses the run: its trace says where, and resume goes on from there.
                raise RunInterrupted(trace_path) from exc
        # A new run's root and size come from its own writer, never from re-reading a path.
        checkpoint = agent.writer.checkpoint() if resume_from is None else None
    return _outcome(trace_path, checkpoint, output, error, paused)


def _outcome(
    trace_path: Path,
    checkpoint: Checkpoint | None,
    output: Any,
    error: str | None,
    paused: list[dict[str, Any]],
) -> RunOutcome:
    """What a run did, from its trace (summarized once) and how its agent ended."""
    trace = Trace.load(trace_path)
    if checkpoint is None:
        checkpoint = trace.checkpoint()
    summary = summarize_trace(trace.events)
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


def _drive(
    agent: Agent[Any],
    spec: RunSpec,
    resume_from: Path | None,
    decisions: Sequence[Decision],
    fork_from: tuple[Path, int] | None,
    next_turn: tuple[Path, str] | None = None,
    at_turn: bool = False,
    chat: Callable[[], str | None] | None = None,
) -> tuple[Any, str | None, list[dict[str, Any]]]:
    """Run, resume, continue or fork ``agent``: its output (JSON form), its error, the calls
    it waits on."""
    output: Any = None
    error: str | None = None
    paused: list[dict[str, Any]] = []
    try:
        if fork_from is not None and at_turn:
            result = agent.fork(fork_from[0], at_turn=fork_from[1])
        elif fork_from is not None:
            result = agent.fork(fork_from[0], at_step=fork_from[1])
        elif next_turn is not None:
            result = agent.run(next_turn[1], continue_from=next_turn[0])
        elif chat is not None:
            result = _converse(agent, chat)
        elif resume_from is None:
            result = agent.run(spec.prompt)
        else:
            result = agent.resume(resume_from, decisions=decisions)
        output = result.output
    except RunPaused as exc:
        paused = [p.model_dump(mode="json") for p in exc.paused.pending]
    except RunError as exc:
        error = f"{exc.error_type}: {exc}"  # the name its run_failed event records
    finally:
        agent.writer.close()
    if isinstance(output, BaseModel):
        output = output.model_dump(mode="json")
    return output, error, paused


def _converse(agent: Agent[Any], ask: Callable[[], str | None]) -> RunResult[Any]:
    """Each message ``ask`` reads, a turn of one run; the last turn's result.

    Raises:
        UserError: No message came before the end of the input.
    """
    result: RunResult[Any] | None = None
    while (prompt := ask()) is not None:
        result = agent.run(prompt, continue_from=result)
    if result is None:
        raise UserError("twinflow chat: the input ended before a message was sent")
    return result


def _read_turn(stdin: TextIO) -> str | None:
    """The next non-empty line the user types (the prompt on stderr), or None at end of input."""
    while True:
        print("you> ", end="", file=sys.stderr, flush=True)
        line = stdin.readline()
        if not line:
            print(file=sys.stderr, flush=True)  # Ctrl-D leaves the cursor after the prompt
            return None
        if line.strip():
            return line.rstrip("\n")


def _recorded_or_none(path: Path) -> Trace | None:
    """The trace a continued run starts from, or None if it does not load as it is (a torn
    last line, which `Agent.resume` repairs first): its servers then start for the prefix."""
    try:
        return Trace.load(path)
    except TraceError:
        return None


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
    p.add_argument(
        "--continue",
        dest="continue_from",
        type=Path,
        metavar="TRACE",
        help="send the finished run recorded in TRACE its next user turn (--prompt), appended "
        "to TRACE; its recorded turns are re-run against the record with SPEC's code first",
    )
    p.add_argument(
        "--prompt",
        metavar="TEXT",
        help="the user's message, instead of the spec's prompt (with --continue: the next turn)",
    )
    p.add_argument(
        "--otel-endpoint",
        metavar="URL",
        help="also send the run's spans to this OTLP/HTTP collector as the run goes (the spans "
        "`twinflow export otel` makes); a collector that is down or slow never slows or fails "
        "the run: what was not sent is counted and said at the end",
    )
    p.add_argument(
        "--otel-timeout",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="with --otel-endpoint: how long one request may take, and how long the last ones "
        "may take after the run (default 5)",
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
    text = RunSpec.read_text(args.spec)
    spec = RunSpec.parse(text, str(args.spec), code_dir=args.spec.resolve().parent)
    phases = _Phases()
    if args.continue_from is not None:
        if args.prompt is None:
            raise UserError("twinflow run --continue needs --prompt TEXT: the next user turn")
        return _next_turn(args, spec, out, phases)
    if args.prompt is not None:
        spec = spec.model_copy(update={"prompt": args.prompt})
    # For the whole run, not only while the tools are imported: a tool may import its siblings
    # when it is called.
    live = None
    if args.otel_endpoint is not None:
        if not args.otel_timeout > 0:
            raise UserError(f"--otel-timeout {args.otel_timeout}: give a number of seconds above 0")
        live = LiveExport(args.otel_endpoint, timeout=args.otel_timeout)
    with importing_from(spec.directories):
        watch = not (args.quiet or args.json)
        outcome = _execute(spec, text, args.out, out, phases, watch=watch, live=live)
    return report_outcome(outcome, out, "run", ["--spec", str(args.spec)])


def _next_turn(args: argparse.Namespace, spec: RunSpec, out: Output, phases: _Phases) -> int:
    """``twinflow run SPEC --continue TRACE --prompt TEXT``: the turn appended to TRACE."""
    trace_path: Path = args.continue_from
    try:
        with importing_from(spec.directories):
            outcome = _execute(
                spec,
                "",
                trace_path.parent,
                out,
                phases,
                watch=False,
                next_turn=(trace_path, args.prompt),
            )
    except TraceCorruptError as exc:
        raise CheckFailed(f"{trace_path}: {exc}") from None
    except ReplayDivergenceError as exc:
        raise divergence_failed(trace_path, "the recorded turns", exc) from None
    outcome = outcome.model_copy(update={"prompt": args.prompt})
    return report_outcome(outcome, out, "run", ["--spec", str(args.spec)])


def decide_hint(outcome: RunOutcome, spec_option: Sequence[str]) -> str:
    """The command that approves a paused run's waiting calls and goes on, as it pastes from
    the user's directory: the trace, each waiting call by its id, and the spec as the command
    that paused was given it (``--spec PATH`` or ``--trust-spec``)."""
    calls = [arg for waiting in outcome.paused for arg in ("--call", str(waiting["call_id"]))]
    words = ["approve", str(outcome.trace), *calls, *spec_option]
    return f"{invocation()} {shlex.join(words)}"


def report_outcome(
    outcome: RunOutcome, out: Output, command: str, spec_option: Sequence[str]
) -> int:
    """Print a run's outcome and return its exit code: 0 done, 1 failed, 3 waiting for a person.

    ``spec_option`` is how the command was given its spec (``--spec PATH`` or ``--trust-spec``),
    for the command a paused run prints to decide with."""
    payload = {"ok": outcome.error is None and not outcome.paused, **outcome.model_dump()}
    out.document(payload)
    _print_outcome(outcome, out, spec_option)
    if outcome.error is not None:
        say(f"twinflow {command}: the run failed: {outcome.error}")
        return EXIT_FAILED
    if outcome.paused:
        say(
            f"twinflow {command}: the run waits for a decision on {len(outcome.paused)} call(s); "
            f"approve and go on with: {decide_hint(outcome, spec_option)} "
            "(add --deny to refuse them instead)"
        )
        return EXIT_PAUSED
    return EXIT_OK


def _one_line(value: object) -> str:
    """A value from the run (the model's, a tool's) as one printable line."""
    text = (
        value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    )
    return _clean(text.replace("\n", "\\n"))


def _print_outcome(outcome: RunOutcome, out: Output, spec_option: Sequence[str]) -> None:
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
        out.line(f"  decide    {decide_hint(outcome, spec_option)}")
    elif outcome.error is None:
        out.line(f"  answer    {_one_line(outcome.output)}")
    else:
        out.line(f"  failed    {_one_line(outcome.error)}")
    out.line(f"  trace     {outcome.trace} ({outcome.events} events)")
    out.line(f"  root      (hex) {outcome.root}")


# -- replay ---------------------------------------------------------------------------------


# -- chat -----------------------------------------------------------------------------------


def configure_chat(p: argparse.ArgumentParser) -> None:
    """Arguments of ``twinflow chat``."""
    p.add_argument(
        "spec", type=Path, help="the run spec (YAML); its prompt is not sent: you type each turn"
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("twinflow-run"),
        help="directory for the conversation's trace.jsonl and spec.yaml (default: twinflow-run)",
    )


def chat(args: argparse.Namespace, out: Output) -> int:
    """``twinflow chat SPEC``: each line typed is a turn of one run; Ctrl-D ends it."""
    text = RunSpec.read_text(args.spec)
    spec = RunSpec.parse(text, str(args.spec), code_dir=args.spec.resolve().parent)
    with importing_from(spec.directories):
        outcome = _execute(
            spec,
            text,
            args.out,
            out,
            _Phases(),
            watch=True,
            chat=lambda: _read_turn(sys.stdin),
        )
    return report_outcome(outcome, out, "chat", ["--spec", str(args.spec)])


COMMANDS: dict[str, Command] = {
    "run": (configure_run, run),
    "chat": (configure_chat, chat),
}
"""The commands that run agents (the trace commands are in `twinflow.cli._commands`)."""
