"""``twinflow replay``: re-run the agent a trace's spec describes against the trace.

The spec to rebuild from is the one named (``--spec``), or the trace's own only if trusted
(``--trust-spec``, its modules' digests checked first); `twinflow.cli._continue` rebuilds
resumed and forked runs the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from twinflow._base._code import importing_from
from twinflow.agent import RunSpec, RunStarted, SpecError, ToolCalled, Trace, load_spec, replay
from twinflow.agent._replay import REPLAY_KINDS
from twinflow.cli._decisions import add_decision_arguments, check_recorded_decisions
from twinflow.cli._errors import divergence_failed
from twinflow.cli._output import EXIT_OK, CheckFailed, Command, Output, say
from twinflow.cli._run import code_beside, spec_beside
from twinflow.cli._show import _clean
from twinflow.cli._traces import parse_trace, read_trace_bytes
from twinflow.kernel import NondeterminismError, ReplayDivergenceError
from twinflow.trace import UserError

__all__ = [
    "COMMANDS",
    "add_spec_arguments",
    "divergence_failed",
    "replay_command",
    "replay_spec",
]


def replay_spec(trace_path: Path, spec_path: Path | None, trust_spec: bool, out: Output) -> RunSpec:
    """The spec to rebuild the agent from: the one named, or the trace's own only if trusted."""
    if spec_path is not None:
        return load_spec(spec_path)
    beside = spec_beside(trace_path)
    if not trust_spec:
        hint = ""
        if beside.is_file():
            with contextlib.suppress(UserError):
                unread = RunSpec.parse(RunSpec.read_text(beside), str(beside))
                modules, servers = _disclosed(unread, _code_dir(trace_path, beside))
                starts = "".join(f"; and start {server}" for server in servers)
                hint = f" ({beside} would import: {modules}{starts})"
        raise UserError(
            f"{trace_path}: name the spec to rebuild the agent from with --spec PATH (one you "
            f"trust: replay imports the tools and output model it names and starts its MCP "
            f"server commands), or pass --trust-spec to use the spec beside the trace{hint}"
        )
    if not beside.is_file():
        raise UserError(f"{beside}: no spec beside the trace; pass --spec PATH")
    record = RunSpec.read_code_record(code_beside(trace_path))
    code_dir = _code_dir(trace_path, beside)
    spec = RunSpec.parse(RunSpec.read_text(beside), str(beside), code_dir=code_dir)
    # Everything the spec may execute is said before any of it runs (docs/adr/0164).
    modules, servers = _disclosed(spec, code_dir)
    out.line(
        f"--trust-spec: rebuilding from {beside}, importing {modules} "
        f"(from {_clean(str(code_dir))} first)"
    )
    for server in servers:
        out.line(f"--trust-spec: may start {server}")
    if out.as_json:
        for line in (f"importing {modules}", *(f"may start {server}" for server in servers)):
            say(f"twinflow replay: {line}")
    if record is not None:
        try:
            spec.check_code(record)
        except SpecError as exc:
            if exc.reason != "code_changed":
                raise
            raise CheckFailed(
                f"{trace_path}: {exc}", {"trace": str(trace_path), "module": exc.module}
            ) from None
    return spec


def _code_dir(trace_path: Path, beside: Path) -> Path:
    """Where the spec beside a trace imports its code from and starts its MCP servers in.

    The run's own code directory if it recorded one that is still there (a run written to
    another directory than its spec's); else the run directory (a bundle with its modules).

    Raises:
        SpecError: the code record beside the trace is unreadable.
    """
    record = RunSpec.read_code_record(code_beside(trace_path))
    if record is not None and record.code_dir is not None and Path(record.code_dir).is_dir():
        return Path(record.code_dir)
    return beside.resolve().parent


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


def _disclosed(spec: RunSpec, code_dir: Path) -> tuple[str, list[str]]:
    """What rebuilding the agent from ``spec`` may execute: the modules it imports (with what
    names them), and each MCP server: its command with its working directory and the names
    (never the values) of the variables it is given, or the URL it connects to.

    A received spec's MCP command is code like its modules: it is named wherever they are.
    """
    named = [
        f"{what}: {_names(paths)}"
        for what, paths in (
            ("tools", spec.tool_paths()),
            ("output", (spec.output,) if isinstance(spec.output, str) else ()),
            ("part kinds", spec.part_kinds),
        )
        if paths
    ]
    modules = _names(spec.modules()) + (f" ({'; '.join(named)})" if named else "")
    servers = []
    for server in spec.mcp_servers:
        if server.command is None:
            servers.append(f"MCP server {server.name} at {server.url}")
            continue
        cwd = code_dir if server.cwd is None else code_dir / server.cwd
        servers.append(
            f"MCP server {server.name}: {json.dumps(list(server.command))} in "
            f"{_clean(str(cwd))}, environment variables set by the spec: "
            f"{_names(tuple(sorted(server.env)))}, passed from yours: {_names(server.pass_env)}"
        )
    return modules, servers


_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.:-]+")


def _names(modules: tuple[str, ...]) -> str:
    """Module names or dotted paths as they may be shown on a terminal (a hostile one is shown
    escaped)."""
    shown = [m if _PLAIN_NAME.fullmatch(m) else ascii(m) for m in modules]
    return ", ".join(shown) or "nothing"


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
            importing_from(spec.directories),
            spec.open_mcp_servers(
                trace_path.parent,
                recorded=None if mode == "live" else trace,
                live=False,
            ) as servers,
        ):
            result = replay(
                trace,
                spec.replay_builder(servers=servers),
                mode="live" if mode == "live" else "recorded",
                directory=trace_path.parent,
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
        [] if recorded is None else list(recorded.differences(spec.environment(), imports=False))
    )
    return {
        "trace": str(trace_path),
        "mode": mode,
        "events": result.events,
        "root": result.root,
        "environment_differences": differences,
    }


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
    add_decision_arguments(p)


def replay_command(args: argparse.Namespace, out: Output) -> int:
    """``twinflow replay TRACE``."""
    if args.mode == "live":
        # Live replay runs again every call a recorded decision approved: a decision this
        # machine did not record, and no key checks, is named before anything runs.
        check_recorded_decisions(
            args, parse_trace(args.trace, read_trace_bytes(args.trace)), carried_out_too=True
        )
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


COMMANDS: dict[str, Command] = {"replay": (configure_replay, replay_command)}
"""The command this module defines, as `twinflow.cli._main.COMMAND_TABLE` looks it up."""
