"""Shared helpers for the gate tests: where the repository is and how to run one gate."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GateRunner = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def repo_root() -> Path:
    """The repository under test."""
    return ROOT


@pytest.fixture
def run_gate() -> GateRunner:
    """Run scripts/checks/<gate> with the test interpreter; returns the finished process."""

    def run(gate: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, str(ROOT / "scripts" / "checks" / gate), *map(str, args)]
        return subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)

    return run


@pytest.fixture
def uv() -> str:
    """The uv executable the gates use."""
    found = os.environ.get("UV") or shutil.which("uv")
    assert found is not None, "uv is not installed: run .ci/run"
    return found
