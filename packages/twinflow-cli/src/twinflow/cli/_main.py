"""The ``twinflow`` command: the command table, argument parsing, and each failure as one line.

Exit codes (`twinflow.cli._output`) are a contract scripts rely on: 0 ok, 1 a check failed,
2 a usage error or unreadable input, 3 a run waits for a decision, 130 interrupted (all listed
by ``twinflow --help``). Every failure prints one line on stderr saying what went
wrong and what to do.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from typing import Any

from twinflow.cli._errors import CliError
from twinflow.cli._output import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PAUSED,
    EXIT_USAGE,
    CheckFailed,
    Command,
    Handler,
    Output,
    invocation,
    say,
)
from twinflow.trace import TwinflowError, UserError

__all__ = ["COMMAND_TABLE", "command_module_commands", "installed_version", "main"]

# The command table: name -> (the module whose ``COMMANDS`` defines it, its one-line summary).
# `twinflow --help` reads only this table; a command's module, and everything it imports
# (pydantic, the agent, the model clients), loads only when that command is the one chosen.
# The summary is written here only: a module's ``COMMANDS`` holds (configure, handler).
COMMAND_TABLE: dict[str, tuple[str, str]] = {
    "demo": (
        "twinflow.cli._demo_cli",
        "run a small agent task on the embedded local model, then verify and replay its trace",
    ),
    "run": ("twinflow.cli._run", "run an agent from a spec file (YAML), writing a trace"),
    "chat": (
        "twinflow.cli._run",
        "talk with an agent turn by turn (Ctrl-D ends); the conversation is one trace",
    ),
    "replay": (
        "twinflow.cli._replay_cli",
        "re-run a trace's agent against the trace; exit 1 at the first event that differs",
    ),
    "resume": (
        "twinflow.cli._continue",
        "continue a run that did not finish from its trace, repeating nothing recorded",
    ),
    "approve": (
        "twinflow.cli._continue",
        "decide on calls a run waits for (approve or deny), or answer a form an MCP server asked "
        "for, then resume it",
    ),
    "fork": (
        "twinflow.cli._continue",
        "start a new run from a trace's first steps, then go on with another spec",
    ),
    "show": (
        "twinflow.cli._show",
        "show a trace as a person reads it (--html: a page that verifies it)",
    ),
    "eval": (
        "twinflow.cli._eval_cli",
        "run datasets through an agent; rescore, compare and merge run directories",
    ),
    "verify": (
        "twinflow.cli._commands",
        "verify a trace: format, hash chain, digests, completeness (and a checkpoint)",
    ),
    "checkpoint": (
        "twinflow.cli._commands",
        "write a trace's checkpoint as a C2SP note (signed with --sign)",
    ),
    "prove": (
        "twinflow.cli._prove",
        "make or check a C2SP tlog-proof (inclusion) or consistency proof",
    ),
    "redact": (
        "twinflow.cli._commands",
        "publish a trace with chosen events replaced by their digest (every proof still checks)",
    ),
    "keygen": (
        "twinflow.cli._commands",
        "make an Ed25519 signer key and its verifier key (C2SP signed-note text forms)",
    ),
    "attest": (
        "twinflow.cli._publish",
        "sign an in-toto attestation of a run (DSSE, Ed25519), or check one (--check)",
    ),
    "conformance": (
        "twinflow.cli._conformance_cli",
        "run a trace verifier (default: twinflow-trace's) against the conformance vectors",
    ),
    "witness": (
        "twinflow.cli._publish",
        "cosign a log's checkpoint as a C2SP witness, only if it extends the last one cosigned",
    ),
    "repair": (
        "twinflow.cli._commands",
        "move a torn last line aside (as a crashed writer leaves it)",
    ),
    "preflight": (
        "twinflow.cli._preflight_cli",
        "report what a model server's decoder will enforce of a pydantic model's schema",
    ),
    "export": (
        "twinflow.cli._export",
        "write a verified trace as OpenTelemetry spans (OTLP/JSON, GenAI conventions)",
    ),
    "diff": (
        "twinflow.cli._commands",
        "show where two runs' behaviour differs (--exact: the first differing event's bytes)",
    ),
    "models": (
        "twinflow.cli._models_cli",
        "list the model providers a spec may name (openai:MODEL, ...) and what each supports",
    ),
}


def command_module_commands(module: str) -> dict[str, Command]:
    """The ``COMMANDS`` of one module named in `COMMAND_TABLE`, imported on first use.

    Each import is written out with its literal name, so the layer and determinism gates see
    every edge (a computed import would hide one from them).
    """
    if module == "twinflow.cli._run":
        from twinflow.cli._run import COMMANDS as run_commands

        return run_commands
    if module == "twinflow.cli._replay_cli":
        from twinflow.cli._replay_cli import COMMANDS as replay_commands

        return replay_commands
    if module == "twinflow.cli._demo_cli":
        from twinflow.cli._demo_cli import COMMANDS as demo_commands

        return demo_commands
    if module == "twinflow.cli._continue":
        from twinflow.cli._continue import COMMANDS as continue_commands

        return continue_commands
    if module == "twinflow.cli._show":
        from twinflow.cli._show import COMMANDS as show_commands

        return show_commands
    if module == "twinflow.cli._eval_cli":
        from twinflow.cli._eval_cli import COMMANDS as eval_commands

        return eval_commands
    if module == "twinflow.cli._preflight_cli":
        from twinflow.cli._preflight_cli import COMMANDS as preflight_commands

        return preflight_commands
    if module == "twinflow.cli._publish":
        from twinflow.cli._publish import COMMANDS as publish_commands

        return publish_commands
    if module == "twinflow.cli._prove":
        from twinflow.cli._prove import COMMANDS as prove_commands

        return prove_commands
    if module == "twinflow.cli._conformance_cli":
        from twinflow.cli._conformance_cli import COMMANDS as conformance_commands

        return conformance_commands
    if module == "twinflow.cli._export":
        from twinflow.cli._export import COMMANDS as export_commands

        return export_commands
    if module == "twinflow.cli._models_cli":
        from twinflow.cli._models_cli import COMMANDS as models_commands

        return models_commands
    if module == "twinflow.cli._commands":
        from twinflow.cli._commands import COMMANDS as trace_commands

        return trace_commands
    raise KeyError(f"{module!r} defines no twinflow command")


class _Version(argparse.Action):
    """``--version``: the distribution's version, looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        python = ".".join(str(part) for part in sys.version_info[:3])
        print(f"twinflow {installed_version('twinflow-cli')} (Python {python})")
        parser.exit()


def installed_version(name: str) -> str:
    """The version of the installed distribution ``name`` (`importlib.metadata`)."""
    from importlib.metadata import version

    return version(name)


def _chosen(argv: Sequence[str]) -> str | None:
    """The command named on the line: its first word that is not an option."""
    return next((word for word in argv if not word.startswith("-")), None)


def _parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    parser = argparse.ArgumentParser(
        prog="twinflow",
        description=(
            "Run LLM agents whose every run is a value: a hash-chained, Merkle-checkpointed "
            "trace you can verify, prove, diff and replay."
        ),
        epilog=(
            f"Exit codes: {EXIT_OK} ok, {EXIT_FAILED} a check failed, {EXIT_USAGE} usage error "
            f"or unreadable input, {EXIT_PAUSED} the run waits for a person's decision (run, "
            f"resume, approve: `twinflow approve`), {EXIT_INTERRUPTED} interrupted (Ctrl-C: a run is paused; `twinflow resume` goes on)."
        ),
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = _chosen(argv)
    if chosen is not None and chosen not in COMMAND_TABLE:
        from twinflow.vocab._suggest import did_you_mean

        parser.error(f"unknown command {chosen!r}{did_you_mean(chosen, COMMAND_TABLE)}")
    if chosen is None and "--version" in argv and not {"-h", "--help"} & set(argv):
        # `--version` exits while the line is parsed: the command list is never read, and
        # building it costs more than the version lookup (its target: below `--help`).
        return parser
    for name, (module, summary) in COMMAND_TABLE.items():
        command = sub.add_parser(name, parents=[common], help=summary, description=summary)
        if name == chosen:
            # Imported here so `twinflow --help` stays fast and a broken optional piece cannot
            # stop another command from parsing its arguments.
            configure, handler = command_module_commands(module)[name]
            configure(command)
            command.set_defaults(handler=handler)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``twinflow`` command and return its exit code."""
    words = sys.argv[1:] if argv is None else list(argv)
    args = _parser(words).parse_args(words)
    out = Output(args.json, sys.stdout)
    handler: Handler = args.handler
    try:
        return handler(args, out)
    except CheckFailed as exc:
        if exc.payload:
            out.document({"ok": False, "error": str(exc), **exc.payload})
        say(f"twinflow {args.command}: {exc}")
        return EXIT_FAILED
    except (UserError, OSError, CliError) as exc:
        reason = _one_line(exc)
        out.document({"ok": False, "error": reason})
        say(f"twinflow {args.command}: {reason}")
        return EXIT_USAGE
    except TwinflowError as exc:
        reason = _one_line(exc)
        out.document({"ok": False, "error": reason})
        say(f"twinflow {args.command}: {type(exc).__name__}: {reason}")
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        say(f"twinflow {args.command}: {_interrupted(args, exc)}")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`twinflow verify --json t | head`): not an error of ours.
        # Point stdout at /dev/null so the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


def _interrupted(args: argparse.Namespace, exc: KeyboardInterrupt) -> str:
    """What Ctrl-C did: a run it stopped (`RunInterrupted`) is paused, with the command that
    continues it (the spec the command was given, or the one beside the trace it trusted)."""
    trace = getattr(exc, "trace", None)
    if trace is None:
        return "interrupted"
    spec = getattr(args, "spec", None)
    where = ["--spec", str(spec)] if spec is not None else ["--trust-spec"]
    command = f"{invocation()} {shlex.join(['resume', str(trace), *where])}"
    return (
        f"interrupted (Ctrl-C): the run is paused, not failed, and its trace {trace} says "
        f"where; continue it with: {command}"
    )


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"{exc.filename}: no such file"
    if isinstance(exc, IsADirectoryError) and exc.filename:
        return f"{exc.filename}: is a directory, expected a file"
    if isinstance(exc, OSError) and exc.filename and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    # Notes carry where an error happened (a Ray worker's node, say): part of the one line.
    return " ".join("; ".join([str(exc), *getattr(exc, "__notes__", ())]).split())
