"""Live replay runs the spec's tools on the trace's recorded arguments: it says so first."""

from __future__ import annotations

import sys
from pathlib import Path

from cli_testkit import scripted_chat

from twinflow.kernel import LoopbackServer
from twinflow.kernel._process import ProcessResult, run_process

# The tool says on stderr when it runs, so the order of the two lines is the order of events.
CALC = '''
import sys

def add(a: int, b: int) -> int:
    """Add two integers."""
    print("TOOL RAN", file=sys.stderr, flush=True)
    return a + b
'''
SPEC = """\
prompt: add
model:
  url: {url}
  dialect: llama.cpp
  mode: structured-action
tools: [calc:add]
policy:
  allow: [add]
max_steps: 3
"""


def twinflow(*args: str, cwd: Path) -> ProcessResult:
    """The real command."""
    return run_process([sys.executable, "-m", "twinflow.cli", *args], cwd=cwd, timeout=300)


def test_live_replay_names_each_call_and_its_arguments_before_running_it(tmp_path: Path) -> None:
    """The announcement lists add({"a": 2, "b": 3}) and comes before the tool's own line."""
    (tmp_path / "calc.py").write_text(CALC)
    with LoopbackServer(scripted_chat) as server:
        (tmp_path / "spec.yaml").write_text(SPEC.format(url=server.url))
        made = twinflow("run", "spec.yaml", "--out", "out", "--quiet", cwd=tmp_path)
    assert 0 == made.returncode, made.stderr
    for extra in ((), ("--json",)):
        result = twinflow(
            "replay",
            "out/trace.jsonl",
            "--spec",
            "spec.yaml",
            "--mode",
            "live",
            *extra,
            cwd=tmp_path,
        )
        assert 0 == result.returncode, result.stderr
        lines = result.stderr.splitlines()
        notice = next(i for i, line in enumerate(lines) if "--mode live runs" in line)
        assert 'add({"a": 2, "b": 3})' in lines[notice]
        assert "1 call(s)" in lines[notice]
        assert notice < lines.index("TOOL RAN")


def test_recorded_replay_runs_no_tool_and_says_nothing(tmp_path: Path) -> None:
    """--mode recorded serves the trace's results: no tool runs, no notice."""
    (tmp_path / "calc.py").write_text(CALC)
    with LoopbackServer(scripted_chat) as server:
        (tmp_path / "spec.yaml").write_text(SPEC.format(url=server.url))
        made = twinflow("run", "spec.yaml", "--out", "out", "--quiet", cwd=tmp_path)
    assert 0 == made.returncode, made.stderr
    result = twinflow("replay", "out/trace.jsonl", "--spec", "spec.yaml", cwd=tmp_path)
    assert (0, "") == (result.returncode, result.stderr)
