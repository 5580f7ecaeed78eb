"""The determinism gate fails on every evasion ruff can see, and on every way of silencing it."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

GateRunner = Callable[..., subprocess.CompletedProcess[str]]

AGENT_MODULE = "packages/twinflow-agent/src/twinflow/agent/_fixture.py"
KERNEL_MODULE = "packages/twinflow-kernel/src/twinflow/kernel/_fixture.py"

# Each snippet reaches a banned name a different way; each must fail the gate outside the kernel.
EVASIONS = {
    "from-import alias (the issue's line)": "from time import time as now\n",
    "module alias attribute": "import time as t\n\nx = t.time()\n",
    "plain attribute": "import time\n\nx = time.monotonic()\n",
    "time_ns": "import time\n\nx = time.time_ns()\n",
    "perf_counter from-import": "from time import perf_counter\n",
    "sleep": "import time\n\ntime.sleep(1)\n",
    "datetime class method": "from datetime import datetime\n\nx = datetime.now()\n",
    "datetime module alias": "import datetime as dt\n\nx = dt.datetime.utcnow()\n",
    "datetime class alias": "from datetime import datetime as D\n\nx = D.today()\n",
    "date.today": "from datetime import date\n\nx = date.today()\n",
    "random module": "import random\n",
    "random aliased": "import random as r\n",
    "random from-import": "from random import Random\n",
    "secrets": "from secrets import token_hex\n",
    "uuid4 from-import": "from uuid import uuid4\n",
    "uuid1 attribute": "import uuid\n\nx = uuid.uuid1()\n",
    "os.urandom": "import os\n\nx = os.urandom(8)\n",
    "os.getrandom from-import": "from os import getrandom\n",
    "urllib.request": "import urllib.request\n",
    "urllib request from-import": "from urllib import request\n",
    "http.client aliased": "import http.client as hc\n",
    "http client from-import": "from http import client\n",
    "socket": "import socket\n",
    "ssl from-import": "from ssl import create_default_context\n",
    "subprocess aliased": "import subprocess as sp\n",
    "threading from-import": "from threading import Thread\n",
    "concurrent.futures": "from concurrent.futures import ThreadPoolExecutor\n",
    "noqa naming the rule": "import random  # noqa: TID251\n",
    "blanket noqa": "import random  # noqa\n",
    "noqa on a clean line still counts": "x = 1  # noqa: TID251\n",
    "file-level ruff noqa": "# ruff: noqa\nimport os\n",
}


def _tree(tmp_path: Path, repo_root: Path, module: str, source: str) -> Path:
    root = tmp_path / "tree"
    root.mkdir()
    shutil.copy(repo_root / "pyproject.toml", root / "pyproject.toml")
    target = root / module
    target.parent.mkdir(parents=True)
    target.write_text(source, encoding="utf-8")
    return root


@pytest.mark.parametrize("source", EVASIONS.values(), ids=EVASIONS.keys())
def test_each_evasion_fails_in_the_agent(
    source: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """Every evasion in the corpus makes the gate exit 1 when placed in twinflow.agent."""
    root = _tree(tmp_path, repo_root, AGENT_MODULE, source)
    done = run_gate("determinism", "--root", root)
    assert 1 == done.returncode, done.stdout + done.stderr
    assert "_fixture.py" in done.stderr


def test_the_issue_line_passes_in_the_kernel(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """`from time import time as now` is allowed in twinflow.kernel, the home of real I/O."""
    root = _tree(tmp_path, repo_root, KERNEL_MODULE, "from time import time as now\n")
    done = run_gate("determinism", "--root", root)
    assert 0 == done.returncode, done.stdout + done.stderr


def test_deterministic_code_passes(tmp_path: Path, repo_root: Path, run_gate: GateRunner) -> None:
    """Code that builds times and ids from its inputs passes, so the gate is not failing blindly."""
    source = (
        "import uuid\nfrom datetime import UTC, datetime\n\n"
        "x = datetime(2024, 1, 1, tzinfo=UTC)\ny = uuid.uuid5(uuid.NAMESPACE_URL, 'a')\n"
    )
    root = _tree(tmp_path, repo_root, AGENT_MODULE, source)
    done = run_gate("determinism", "--root", root)
    assert 0 == done.returncode, done.stdout + done.stderr


def test_a_new_per_file_ignore_fails(tmp_path: Path, repo_root: Path, run_gate: GateRunner) -> None:
    """Exempting another package from TID251 in pyproject.toml is itself a violation."""
    root = _tree(tmp_path, repo_root, AGENT_MODULE, "x = 1\n")
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    marker = '"benchmarks/**" = ["TID251"]\n'
    assert marker in text
    pyproject.write_text(
        text.replace(marker, marker + '"packages/twinflow-agent/**" = ["TID251"]\n'),
        encoding="utf-8",
    )
    done = run_gate("determinism", "--root", root)
    assert 1 == done.returncode, done.stdout + done.stderr
    assert "packages/twinflow-agent/**" in done.stderr


def test_dropping_a_required_ban_fails(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """Deleting a required name from the banned list fails the gate, naming it."""
    root = _tree(tmp_path, repo_root, AGENT_MODULE, "x = 1\n")
    pyproject = root / "pyproject.toml"
    lines = pyproject.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if not line.startswith('"time.sleep" =')]
    assert len(lines) - 1 == len(kept)
    pyproject.write_text("".join(kept), encoding="utf-8")
    done = run_gate("determinism", "--root", root)
    assert 1 == done.returncode, done.stdout + done.stderr
    assert "time.sleep is missing" in done.stderr


def test_a_member_ruff_table_fails(tmp_path: Path, repo_root: Path, run_gate: GateRunner) -> None:
    """A [tool.ruff] table in a member's pyproject.toml would replace the root config: violation."""
    root = _tree(tmp_path, repo_root, AGENT_MODULE, "x = 1\n")
    member = root / "packages" / "twinflow-agent" / "pyproject.toml"
    member.write_text('[project]\nname = "twinflow-agent"\n\n[tool.ruff]\n', encoding="utf-8")
    done = run_gate("determinism", "--root", root)
    assert 1 == done.returncode, done.stdout + done.stderr
    assert "replaces the root config" in done.stderr
