"""The ``twinflow`` command: argument parsing, exit codes, and human or ``--json`` output.

Exit codes are a contract scripts rely on:

- 0: the command did what it was asked and every check passed;
- 1: a check failed (a tampered trace, a replay that diverged, traces that differ);
- 2: a usage error or unreadable input (a missing file, a bad spec, an unreachable server).

Every failure prints one line on stderr saying what went wrong and what to do.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from twinflow.vocab import TwinflowError, UserError

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "CheckFailed", "Handler", "Output", "main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class CheckFailed(TwinflowError):
    """A check the user asked for did not pass (exit 1). ``payload`` is the ``--json`` output."""

    def __init__(self, message: str, payload: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.payload = payload or {}


class Output:
    """Where a command writes: human lines on stdout, or one JSON document with ``--json``."""

    def __init__(self, as_json: bool, stream: TextIO) -> None:
        self.as_json = as_json
        self._stream = stream

    def line(self, text: str = "") -> None:
        """Print a human line (suppressed under ``--json``)."""
        if not self.as_json:
            print(text, file=self._stream, flush=True)

    def document(self, payload: dict[str, Any]) -> None:
        """Print the machine-readable result (only under ``--json``)."""
        if self.as_json:
            print(json.dumps(payload, indent=2, sort_keys=True, default=str), file=self._stream)


Handler = Callable[[argparse.Namespace, Output], int]


def _parser() -> argparse.ArgumentParser:
    # Imported here so `twinflow --help` stays fast and a broken optional piece cannot
    # stop the rest of the command from parsing its arguments.
    from twinflow.cli import _commands, _run
    from twinflow.cli._eval_cli import EVAL_COMMAND
    from twinflow.cli._preflight_cli import PREFLIGHT_COMMAND

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    parser = argparse.ArgumentParser(
        prog="twinflow",
        description=(
            "Run LLM agents whose every run is a value: a hash-chained, Merkle-checkpointed "
            "trace you can verify, prove, diff and replay."
        ),
        epilog="Exit codes: 0 ok, 1 a check failed, 2 usage error or unreadable input.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    commands = {
        **_run.COMMANDS,
        "eval": EVAL_COMMAND,
        "preflight": PREFLIGHT_COMMAND,
        **_commands.COMMANDS,
    }
    for name, (summary, configure, handler) in commands.items():
        command = sub.add_parser(name, parents=[common], help=summary, description=summary)
        configure(command)
        command.set_defaults(handler=handler)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``twinflow`` command and return its exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    out = Output(args.json, sys.stdout)
    handler: Handler = args.handler
    try:
        return handler(args, out)
    except CheckFailed as exc:
        if exc.payload:
            out.document({"ok": False, "error": str(exc), **exc.payload})
        print(f"twinflow {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except (UserError, OSError) as exc:
        reason = _one_line(exc)
        out.document({"ok": False, "error": reason})
        print(f"twinflow {args.command}: {reason}", file=sys.stderr)
        return EXIT_USAGE
    except TwinflowError as exc:
        reason = _one_line(exc)
        out.document({"ok": False, "error": reason})
        print(f"twinflow {args.command}: {type(exc).__name__}: {reason}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"twinflow {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`twinflow verify --json t | head`): not an error of ours.
        # Point stdout at /dev/null so the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"{exc.filename}: no such file"
    if isinstance(exc, IsADirectoryError) and exc.filename:
        return f"{exc.filename}: is a directory, expected a file"
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.filename}: {exc.strerror or exc}"
    return " ".join(str(exc).split())


def existing_file(value: str) -> Path:
    """An argparse type for an input file path (checked when the command reads it)."""
    return Path(value)
