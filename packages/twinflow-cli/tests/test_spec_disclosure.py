"""A spec beside a trace names everything it would execute before any of it runs.

``replay``, ``resume`` and ``fork`` rebuild a run from the spec beside its trace only with
``--trust-spec``; its modules and its MCP server commands (with their working directory and the
names, never the values, of the variables they are given) are said first, and without the flag
they are named in the refusal.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_testkit import scripted_chat

from twinflow.kernel import LoopbackServer
from twinflow.kernel._process import ProcessResult, run_process

SERVERS = Path(__file__).resolve().parents[2] / "twinflow-kernel" / "tests" / "mcp_servers"
MODE_VALUE = "mode-value-never-shown"
TOKEN_VALUE = "token-value-never-shown-0123456789"


def twinflow(*args: str, cwd: Path) -> ProcessResult:
    """Run ``python -m twinflow.cli ARGS`` with the server's key in the environment."""
    return run_process(
        [sys.executable, "-m", "twinflow.cli", *args],
        cwd=cwd,
        env={"PYTHONDONTWRITEBYTECODE": "1", "CALC_TOKEN": TOKEN_VALUE},
        timeout=300,
    )


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Path]:
    """A finished run whose spec starts the calc MCP server with env, pass_env and cwd."""
    project = tmp_path / "project"
    (project / "srv").mkdir(parents=True)
    shutil.copy(SERVERS / "calc_server.py", project / "srv" / "calc_server.py")
    argv = json.dumps([sys.executable, "calc_server.py", "stdio"])
    with LoopbackServer(scripted_chat) as model:
        (project / "spec.yaml").write_text(
            f"prompt: add\nmodel:\n  url: {model.url}\n  dialect: llama.cpp\n"
            f"mcp_servers:\n  - name: calc\n    command: {argv}\n    cwd: srv\n"
            f"    env: {{CALC_MODE: {MODE_VALUE}}}\n    pass_env: [CALC_TOKEN]\n"
            "policy:\n  allow: [calc.add]\nmax_steps: 3\n"
        )
        made = twinflow("run", "spec.yaml", "--out", "run", "--quiet", cwd=project)
        assert 0 == made.returncode, made.stderr
        yield project / "run" / "trace.jsonl"


def server_line(project: Path) -> str:
    """How the calc server of the `run` fixture's spec is disclosed."""
    argv = json.dumps([sys.executable, "calc_server.py", "stdio"])
    return (
        f"MCP server calc: {argv} in {project / 'srv'}, environment variables set by the spec: "
        "CALC_MODE, passed from yours: CALC_TOKEN"
    )


def test_without_trust_spec_the_refusal_names_the_mcp_command(run: Path) -> None:
    """replay, resume and fork refuse the spec beside the trace, naming its MCP command as
    they name its modules, and start nothing."""
    project = run.parent.parent
    for command in (
        ("replay", str(run)),
        ("resume", str(run)),
        ("fork", str(run), "--at-step", "1"),
    ):
        refused = twinflow(*command, cwd=project)
        assert 2 == refused.returncode, refused.stderr
        assert f"and start {server_line(project)}" in refused.stderr, refused.stderr
        assert [] == [v for v in (MODE_VALUE, TOKEN_VALUE) if v in refused.stderr]


def test_trust_spec_discloses_the_mcp_command_before_it_runs(run: Path) -> None:
    """With --trust-spec, replay, resume and fork say the server's command, its directory and
    its variables' names (never their values) before the modules' check or any start."""
    project = run.parent.parent
    for command in (
        ("replay", str(run), "--trust-spec", "--mode", "live"),
        ("resume", str(run), "--trust-spec"),
        ("fork", str(run), "--at-step", "2", "--trust-spec", "--out", "forked"),
    ):
        result = twinflow(*command, cwd=project)
        lines = result.stdout.splitlines()
        assert f"--trust-spec: may start {server_line(project)}" == lines[1], result
        assert lines[0].startswith("--trust-spec: rebuilding from"), result
        shown = result.stdout + result.stderr
        assert [] == [v for v in (MODE_VALUE, TOKEN_VALUE) if v in shown]


def test_a_refusal_names_the_modules_by_what_names_them(run: Path, tmp_path: Path) -> None:
    """A refused spec's modules are listed with the tool, output and part kind paths naming them."""
    received = tmp_path / "received"
    received.mkdir()
    shutil.copy(run, received / "trace.jsonl")
    (received / "spec.yaml").write_text(
        "prompt: p\nmodel: {url: 'http://127.0.0.1:9'}\ntools: [calc:add]\n"
        "output: shapes:Answer\npart_kinds: ['kinds:Cite']\n"
    )
    refused = twinflow("replay", "trace.jsonl", cwd=received)
    assert 2 == refused.returncode
    assert (
        "would import: calc, shapes, kinds (tools: calc:add; output: shapes:Answer; "
        "part kinds: kinds:Cite)"
    ) in refused.stderr, refused.stderr
