"""The layer gate fails on each contract of .importlinter broken in a throw-away tree."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

GateRunner = Callable[..., subprocess.CompletedProcess[str]]

PACKAGES = {
    "trace": "twinflow-trace",
    "vocab": "twinflow-vocab",
    "kernel": "twinflow-kernel",
    "local_model": "twinflow-local",
    "agent": "twinflow-agent",
    "eval": "twinflow-eval",
    "cli": "twinflow-cli",
}


def _skeleton(tmp_path: Path, repo_root: Path) -> Path:
    """Six empty packages laid out like the workspace, with the real contracts."""
    root = tmp_path / "tree"
    for package, distribution in PACKAGES.items():
        src = root / "packages" / distribution / "src" / "twinflow" / package
        src.mkdir(parents=True)
        (src / "__init__.py").write_text('"""Fixture package."""\n', encoding="utf-8")
    datapizza = root / "packages" / "twinflow-vocab" / "src" / "twinflow" / "vocab" / "datapizza"
    datapizza.mkdir()
    (datapizza / "__init__.py").write_text("", encoding="utf-8")
    shutil.copy(repo_root / ".importlinter", root / ".importlinter")
    return root


def _add(root: Path, package: str, line: str, module: str = "_fixture") -> None:
    src = root / "packages" / PACKAGES[package] / "src" / "twinflow" / package
    (src / f"{module}.py").write_text(line + "\n", encoding="utf-8")


BROKEN = {
    "vocab imports agent": ("vocab", "import twinflow.agent"),
    "kernel imports local_model": ("kernel", "from twinflow import local_model"),
    "agent imports eval": ("agent", "import twinflow.eval"),
    "agent imports local_model": ("agent", "import twinflow.local_model"),
    "local_model imports agent": ("local_model", "import twinflow.agent"),
    "eval imports cli": ("eval", "import twinflow.cli"),
    "local_model imports httpx": ("local_model", "import httpx"),
    "agent imports openai": ("agent", "from openai import OpenAI"),
    "cli imports requests": ("cli", "import requests"),
    "kernel imports anthropic": ("kernel", "import anthropic"),
    "agent imports datapizza": ("agent", "from datapizza.type import TextBlock"),
    "vocab root imports datapizza": ("vocab", "import datapizza"),
    "agent imports urllib.request": ("agent", "import urllib.request"),
    "local_model imports http.client": ("local_model", "from http import client"),
    "eval imports socket": ("eval", "import socket"),
    "vocab imports ssl": ("vocab", "import ssl"),
    "cli imports subprocess": ("cli", "import subprocess"),
    "trace imports vocab": ("trace", "import twinflow.vocab"),
    "trace imports pydantic": ("trace", "import pydantic"),
    "trace imports socket": ("trace", "import socket"),
}

KEPT = {
    "cli imports everything below": (
        "cli",
        "import twinflow.agent, twinflow.eval, twinflow.local_model",
    ),
    "kernel imports vocab": ("kernel", "import twinflow.vocab"),
    "vocab imports trace": ("vocab", "import twinflow.trace"),
    "kernel imports urllib.request and subprocess": ("kernel", "import subprocess, urllib.request"),
    "local_model imports urllib.parse": ("local_model", "from urllib.parse import urljoin"),
    "agent imports http's status codes": ("agent", "from http import HTTPStatus"),
}


def test_the_skeleton_passes(tmp_path: Path, repo_root: Path, run_gate: GateRunner) -> None:
    """Six packages that import nothing keep every contract (the control for the cases below)."""
    done = run_gate("layers", "--root", _skeleton(tmp_path, repo_root))
    assert 0 == done.returncode, done.stdout + done.stderr
    assert "6 kept, 0 broken" in done.stdout


@pytest.mark.parametrize(("package", "line"), BROKEN.values(), ids=BROKEN.keys())
def test_each_broken_contract_fails(
    package: str, line: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """Each forbidden import makes the gate exit 1 and names the importing module."""
    root = _skeleton(tmp_path, repo_root)
    _add(root, package, line)
    done = run_gate("layers", "--root", root)
    assert 1 == done.returncode, done.stdout + done.stderr
    assert f"twinflow.{package}._fixture" in done.stdout


@pytest.mark.parametrize(("package", "line"), KEPT.values(), ids=KEPT.keys())
def test_allowed_imports_pass(
    package: str, line: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """Imports the design allows keep every contract."""
    root = _skeleton(tmp_path, repo_root)
    _add(root, package, line)
    done = run_gate("layers", "--root", root)
    assert 0 == done.returncode, done.stdout + done.stderr


def test_datapizza_is_allowed_in_its_module(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """twinflow.vocab.datapizza may import datapizza; a cli user of it is not flagged."""
    root = _skeleton(tmp_path, repo_root)
    translate = root / "packages/twinflow-vocab/src/twinflow/vocab/datapizza/_translate.py"
    translate.write_text("from datapizza.type import TextBlock\n", encoding="utf-8")
    _add(root, "cli", "import twinflow.vocab.datapizza._translate")
    done = run_gate("layers", "--root", root)
    assert 0 == done.returncode, done.stdout + done.stderr


def test_vocab_importing_agent_fails_on_the_real_tree(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """`import twinflow.agent` added to a real twinflow.vocab module fails the gate."""
    root = tmp_path / "tree"
    shutil.copytree(
        repo_root / "packages", root / "packages", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(repo_root / ".importlinter", root / ".importlinter")
    module = root / "packages/twinflow-vocab/src/twinflow/vocab/__init__.py"
    module.write_text(
        module.read_text(encoding="utf-8") + "\nimport twinflow.agent\n", encoding="utf-8"
    )
    done = run_gate("layers", "--root", root)
    assert 1 == done.returncode, done.stdout + done.stderr
    assert "twinflow.vocab -> twinflow.agent" in done.stdout
