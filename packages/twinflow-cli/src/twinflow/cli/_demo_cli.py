"""``twinflow demo``: one agent run on a local model, then verify and replay its trace.

The task itself (the tool, the answer's model, the judge) is `twinflow.cli._demo`'s, which
the demo's spec names by dotted path, as any run spec names its code.
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from twinflow.agent import RunSpec, verify_agent_trace
from twinflow.cli import _demo
from twinflow.cli._output import EXIT_FAILED, EXIT_OK, CheckFailed, Command, Output, invocation, say
from twinflow.cli._replay_cli import _replay_file
from twinflow.cli._run import (
    _add_quiet,
    _execute,
    _Phases,
    _print_outcome,
    spec_beside,
)
from twinflow.models._providers import EMBEDDED

__all__ = ["COMMANDS", "DEMO_SPEC"]

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
    spec = RunSpec.parse(spec_text, "<demo spec>")
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
    out.line("next (each line pastes as it is, from this directory):")
    for hint in next_commands(trace_path, spec_path):
        out.line(f"  {hint}")
    if outcome.error is not None:
        say(f"twinflow demo: the agent run failed: {outcome.error}")
        return EXIT_FAILED
    return EXIT_OK


def next_commands(trace_path: Path, spec_path: Path) -> list[str]:
    """The commands the demo suggests, as the user types them from where they ran it."""
    tf = invocation()
    auditor = invocation("twinflow-trace", "twinflow.trace")
    trace, spec = shlex.quote(str(trace_path)), shlex.quote(str(spec_path))
    return [
        f"{tf} show {trace}",
        f"{tf} verify {trace}",
        f"{tf} replay {trace} --spec {spec} --mode live",
        f"{tf} checkpoint {trace} --origin example.org/demo",
        f"{tf} prove {trace} --seq 0 --origin example.org/demo",
        f"{auditor} verify {trace}   # an auditor, with only twinflow-trace installed",
    ]


COMMANDS: dict[str, Command] = {"demo": (configure_demo, demo)}
"""The command this module defines, as `twinflow.cli._main.COMMAND_TABLE` looks it up."""
