"""A trace reached through a link is refused with the one message every planted link gets.

Real ``twinflow`` commands on a trace that is a symbolic link, one in a directory that is a
symbolic link, and (for a command that writes into it) one with a second hard link.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from cli_testkit import CALC, calc_spec

from twinflow.kernel import LoopbackServer
from twinflow.kernel._process import ProcessResult, run_process

COMMANDS = [
    ("verify",),
    ("show",),
    ("checkpoint",),
    ("replay", "--trust-spec"),
    ("resume", "--trust-spec"),
    ("approve", "--all", "--trust-spec"),
    ("approve", "--all", "--no-resume"),
    ("fork", "--at-step", "1", "--trust-spec", "--out", "forked"),
]


def twinflow(*args: str, cwd: Path) -> ProcessResult:
    """Run ``python -m twinflow.cli ARGS`` in ``cwd``."""
    return run_process(
        [sys.executable, "-m", "twinflow.cli", *args],
        cwd=cwd,
        env={"PYTHONDONTWRITEBYTECODE": "1"},
        timeout=300,
    )


@pytest.fixture
def waiting(tmp_path: Path, server: LoopbackServer) -> Path:
    """A run waiting for approval of its ``add`` call: project/run/trace.jsonl."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "calc.py").write_text(CALC)
    (project / "spec.yaml").write_text(calc_spec(server.url).replace("allow: [add]", "ask: [add]"))
    made = twinflow("run", "spec.yaml", "--out", "run", "--quiet", cwd=project)
    assert 3 == made.returncode, made.stderr
    return project / "run" / "trace.jsonl"


@pytest.mark.parametrize("link", ["file", "directory"])
def test_a_linked_trace_is_refused_by_every_command_with_one_line(
    waiting: Path, tmp_path: Path, link: str
) -> None:
    """The trace a symbolic link, or its directory one: every command (and the stdlib
    verifier) exits 2 with the one planted-link line, and the trace is unchanged."""
    before = waiting.read_bytes()
    if link == "file":
        named = tmp_path / "trace.jsonl"
        named.symlink_to(waiting)
        words = f"the trace {named} is a symbolic link; it is not read or written through"
    else:
        (tmp_path / "via").symlink_to(waiting.parent, target_is_directory=True)
        named = tmp_path / "via" / "trace.jsonl"
        words = f"{tmp_path / 'via'} is a symbolic link, so the trace trace.jsonl is not read"
    for command in COMMANDS:
        result = twinflow(command[0], str(named), *command[1:], cwd=tmp_path)
        assert (command, 2, 1) == (
            command,
            result.returncode,
            len(result.stderr.strip().splitlines()),
        ), result.stderr
        assert words in result.stderr, result.stderr
    auditor = run_process(
        [sys.executable, "-P", "-m", "twinflow.trace", "verify", str(named)],
        cwd=tmp_path,
        timeout=300,
    )
    assert (2, f"twinflow-trace: {words}") == (
        auditor.returncode,
        auditor.stderr[: len(words) + 16],
    )
    assert before == waiting.read_bytes()
    assert not (tmp_path / "forked").exists()


def test_a_hard_linked_trace_is_read_but_never_written(waiting: Path, tmp_path: Path) -> None:
    """A second hard link: checkpoint reads it; approve refuses to write into it, one line."""
    before = waiting.read_bytes()
    named = tmp_path / "trace.jsonl"
    os.link(waiting, named)
    assert 0 == twinflow("checkpoint", str(named), cwd=tmp_path).returncode
    result = twinflow("approve", str(named), "--all", "--no-resume", cwd=tmp_path)
    assert (2, 1) == (result.returncode, len(result.stderr.strip().splitlines())), result.stderr
    assert f"the trace {named} has 2 names (hard links); it is not written" in result.stderr
    assert before == waiting.read_bytes()
