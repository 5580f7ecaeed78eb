"""What every ``twinflow`` command shares: its exit codes, its output, its failed check.

Exit codes are a contract scripts rely on:

- 0: the command did what it was asked and every check passed;
- 1: a check failed (a tampered trace, a replay that diverged, traces that differ);
- 2: a usage error or unreadable input (a missing file, a bad spec, an unreachable server).

The command modules import this module and `twinflow.cli._traces`, never `twinflow.cli._main`,
which imports each of them only when its command is the one chosen.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from twinflow._base._untrusted import for_terminal, scrub
from twinflow.cli._errors import CheckFailed

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_PAUSED",
    "EXIT_USAGE",
    "CheckFailed",
    "Command",
    "Configure",
    "Handler",
    "Output",
    "invocation",
    "say",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_PAUSED = 3
"""The run stopped to wait for a person's decision (`twinflow approve`)."""
EXIT_INTERRUPTED = 130
"""Ctrl-C: 128 + SIGINT, as a shell reports a process the signal stopped."""


class Output:
    """Where a command writes: human lines on stdout, or one JSON document with ``--json``."""

    def __init__(self, as_json: bool, stream: TextIO) -> None:
        self.as_json = as_json
        self._stream = stream

    def line(self, text: str = "") -> None:
        """Print a human line (suppressed under ``--json``), through `for_terminal`."""
        if not self.as_json:
            print(for_terminal(text), file=self._stream, flush=True)

    def document(self, payload: dict[str, Any]) -> None:
        """Print the machine-readable result (only under ``--json``), scrubbed of secrets.

        ``json.dumps`` escapes every control character and all non-ASCII, so a bidi override or
        a lone surrogate is printed as ``\\u....``.
        """
        if self.as_json:
            text = json.dumps(payload, indent=2, sort_keys=True, default=str)
            print(scrub(text), file=self._stream)


def say(text: str) -> None:
    """Print one line on stderr through `for_terminal`: every message of a command goes here."""
    print(for_terminal(text), file=sys.stderr, flush=True)


Configure = Callable[[argparse.ArgumentParser], None]
"""Adds a command's arguments to its parser."""

Handler = Callable[[argparse.Namespace, Output], int]
"""Runs a command on its parsed arguments; returns the exit code."""

Command = tuple[Configure, Handler]
"""One command as its module's ``COMMANDS`` defines it (its summary is in the command table)."""


def invocation(script: str = "twinflow", module: str = "twinflow.cli") -> str:
    """How to type ``script`` in the user's shell, for hints they can paste as they are.

    Under ``uv run`` the workspace's environment is not on the user's own PATH, so a bare
    ``twinflow`` would fail there; outside it, ``script`` if the shell finds it, else the
    interpreter that is running now with ``-P``: plain ``python -m`` puts the current directory
    first on ``sys.path``, so a received directory holding ``twinflow/`` or ``argparse.py``
    would run its own code (a console script does not).
    """
    import shlex
    import shutil

    if os.environ.get("UV_RUN_RECURSION_DEPTH"):
        # `uv run` finds the workspace from the current directory: from outside it, name it.
        # The workspace is where its environment lives (uv's default, `.venv` at its root).
        root = Path(sys.prefix).resolve().parent
        if not (root / "pyproject.toml").is_file() or Path.cwd().resolve().is_relative_to(root):
            return f"uv run --frozen {script}"
        return f"uv run --project {shlex.quote(str(root))} --frozen {script}"
    if shutil.which(script):
        return script
    return f"{sys.executable} -P -m {module}"
