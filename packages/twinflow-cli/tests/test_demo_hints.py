"""Every command the demo prints for the user to run next runs, pasted as printed.

The demo runs as a reader outside the workspace runs it (``uv run --project ROOT --frozen
twinflow demo``, from a directory of their own), against a scripted loopback server; each hint
line it prints is then run through the shell, from that same directory, and must exit 0.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from cli_testkit import scripted_chat

from twinflow.kernel import LoopbackServer
from twinflow.kernel._process import run_process

ROOT = Path(__file__).resolve().parents[3]


def printed_hints(stdout: str) -> list[str]:
    """The indented command lines under the demo's ``next`` line, as printed."""
    after = stdout.split("\nnext ", 1)[1].splitlines()[1:]
    return [line.strip() for line in after if line.startswith("  ")]


def test_every_hint_the_demo_prints_runs_as_printed(tmp_path: Path) -> None:
    """Run from outside the workspace, each printed hint names the workspace and exits 0."""
    uv = shutil.which("uv") or os.environ.get("UV")
    assert uv is not None, "the demo is run through `uv run`, as a reader runs it"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    command = [uv, "run", "--project", str(ROOT), "--frozen", "twinflow", "demo", "--quiet"]
    with LoopbackServer(scripted_chat) as server:
        demo = run_process(
            [*command, "--model-url", server.url, "--dialect", "llama.cpp"],
            cwd=tmp_path,
            env=env,
            timeout=600,
        )
    assert 0 == demo.returncode, demo.stderr[-2000:]
    hints = printed_hints(demo.stdout)
    ran = []
    for hint in hints:
        result = run_process(["bash", "-c", hint], cwd=tmp_path, env=env, timeout=600)
        ran.append((hint, result.returncode, result.stderr[-500:] if result.returncode else ""))
    assert [(hint, 0, "") for hint in hints] == ran
    assert 6 == len(hints)
    assert all(hint.startswith(f"uv run --project {ROOT} --frozen twinflow") for hint in hints)
