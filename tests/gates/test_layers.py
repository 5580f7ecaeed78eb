"""The layer gate fails on each contract of .importlinter broken in a throw-away tree."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

GateRunner = Callable[..., subprocess.CompletedProcess[str]]

PACKAGES = {
    "_base": "twinflow-trace",
    "trace": "twinflow-trace",
    "vocab": "twinflow-vocab",
    "kernel": "twinflow-kernel",
    "models": "twinflow-models",
    "agent": "twinflow-agent",
    "views": "twinflow-views",
    "pydantic_ai": "twinflow-pydantic-ai",
    "eval": "twinflow-eval",
    "cli": "twinflow-cli",
}


def _member(
    root: Path,
    distribution: str,
    package: str,
    *,
    where: str = "packages",
    pins: Sequence[str] = (),
) -> Path:
    """A workspace member with an empty package, src layout; returns the package folder."""
    member = root / where / distribution
    src = member / "src" / "twinflow" / package
    src.mkdir(parents=True)
    (src / "__init__.py").write_text('"""Fixture package."""\n', encoding="utf-8")
    pyproject = member / "pyproject.toml"
    if not pyproject.exists():
        dependencies = ", ".join(f'"{pin}"' for pin in pins)
        pyproject.write_text(
            f'[project]\nname = "{distribution}"\nversion = "0.1.0"\n'
            f"dependencies = [{dependencies}]\n",
            encoding="utf-8",
        )
    return src


def _unpin(root: Path, package: str) -> None:
    """The member holding ``package`` declares no workspace pins: it is released on its own."""
    pyproject = root / "packages" / PACKAGES[package] / "pyproject.toml"
    pyproject.write_text(
        f'[project]\nname = "{PACKAGES[package]}"\nversion = "0.1.0"\ndependencies = []\n',
        encoding="utf-8",
    )


def _real_pins(repo_root: Path, distribution: str) -> list[str]:
    """The workspace pins (``twinflow-x==V``) the repository's member of that name declares."""
    path = repo_root / "packages" / distribution / "pyproject.toml"
    dependencies = tomllib.loads(path.read_text(encoding="utf-8"))["project"]["dependencies"]
    return [str(d) for d in dependencies if str(d).startswith("twinflow-") and "==" in str(d)]


def _skeleton(tmp_path: Path, repo_root: Path) -> Path:
    """Empty packages laid out like the workspace, with the real contracts."""
    root = tmp_path / "tree"
    root.mkdir()
    (root / "pyproject.toml").write_text(
        '[tool.uv.workspace]\nmembers = ["packages/*"]\n', encoding="utf-8"
    )
    for package, distribution in PACKAGES.items():
        _member(root, distribution, package, pins=_real_pins(repo_root, distribution))
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
    "kernel imports models": ("kernel", "from twinflow import models"),
    "agent imports eval": ("agent", "import twinflow.eval"),
    "agent imports views": ("agent", "import twinflow.views"),
    "views imports eval": ("views", "import twinflow.eval"),
    "models imports agent": ("models", "import twinflow.agent"),
    "eval imports cli": ("eval", "import twinflow.cli"),
    "models imports httpx": ("models", "import httpx"),
    "agent imports openai": ("agent", "from openai import OpenAI"),
    "cli imports requests": ("cli", "import requests"),
    "kernel imports anthropic": ("kernel", "import anthropic"),
    "agent imports datapizza": ("agent", "from datapizza.type import TextBlock"),
    "vocab root imports datapizza": ("vocab", "import datapizza"),
    "agent imports urllib.request": ("agent", "import urllib.request"),
    "models imports http.client": ("models", "from http import client"),
    "eval imports socket": ("eval", "import socket"),
    "vocab imports ssl": ("vocab", "import ssl"),
    "cli imports subprocess": ("cli", "import subprocess"),
    "trace imports vocab": ("trace", "import twinflow.vocab"),
    "trace imports pydantic": ("trace", "import pydantic"),
    "trace imports socket": ("trace", "import socket"),
    "_base imports trace": ("_base", "import twinflow.trace"),
    "_base imports vocab": ("_base", "from twinflow import vocab"),
    "_base imports socket": ("_base", "import socket"),
    "_base imports attrs": ("_base", "import attrs"),
    # Class 13: every provider SDK and agent framework, every network and process family.
    "agent imports pydantic_ai": ("agent", "from pydantic_ai import Agent"),
    "eval imports litellm": ("eval", "import litellm"),
    "models imports ollama": ("models", "import ollama"),
    "kernel imports langchain_core": ("kernel", "import langchain_core"),
    "vocab imports urllib3": ("vocab", "import urllib3"),
    "agent imports httpcore": ("agent", "import httpcore"),
    "agent imports _socket": ("agent", "import _socket"),
    "eval imports _ssl": ("eval", "import _ssl"),
    "cli imports ftplib": ("cli", "import ftplib"),
    "agent imports smtplib": ("agent", "import smtplib"),
    "models imports xmlrpc.client": ("models", "import xmlrpc.client"),
    "eval imports http.server": ("eval", "from http import server"),
    "agent imports asyncio subprocess": ("agent", "from asyncio import subprocess"),
    "cli imports asyncio streams": ("cli", "import asyncio.streams"),
    "vocab imports multiprocessing": ("vocab", "import multiprocessing"),
    "kernel imports datapizza": ("kernel", "import datapizza"),
    "views imports the pydantic-ai recorder": ("views", "import twinflow.pydantic_ai"),
    "pydantic_ai home imports a provider": ("pydantic_ai", "import pydantic_ai.providers.openai"),
}

KEPT = {
    "cli imports everything below": (
        "cli",
        "import twinflow.agent, twinflow.eval, twinflow.models",
    ),
    "agent imports models": ("agent", "import twinflow.models"),
    "kernel imports vocab": ("kernel", "import twinflow.vocab"),
    "vocab imports trace": ("vocab", "import twinflow.trace"),
    "kernel imports urllib.request and subprocess": ("kernel", "import subprocess, urllib.request"),
    "models imports urllib.parse": ("models", "from urllib.parse import urljoin"),
    "agent imports http's status codes": ("agent", "from http import HTTPStatus"),
    "the recorder imports pydantic_ai and the agent": (
        "pydantic_ai",
        "import pydantic_ai.messages, twinflow.agent",
    ),
}


def test_the_skeleton_passes(tmp_path: Path, repo_root: Path, run_gate: GateRunner) -> None:
    """Packages that import nothing keep every contract (the control for the cases below)."""
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
    assert f"twinflow.{package}._fixture" in done.stdout + done.stderr


PRIVATE = {
    "agent imports trace's private module": ("agent", "from twinflow.trace._shared import X"),
    "views imports it whole": ("views", "import twinflow.trace._shared"),
    "models imports it by name": (
        "models",
        "import importlib\nimportlib.import_module('twinflow.trace._shared')",
    ),
    "eval imports a private name": ("eval", "from twinflow.trace import _shared"),
}


def test_the_command_may_read_a_library_private_module(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """twinflow.cli, released with the libraries it pins, imports their private modules."""
    root = _skeleton(tmp_path, repo_root)
    _add(root, "trace", "X = 1", module="_shared")
    _add(root, "cli", "from twinflow.trace._shared import X")
    done = run_gate("layers", "--root", root)
    assert 0 == done.returncode, done.stdout + done.stderr


def test_a_library_reads_the_private_modules_of_a_library_it_pins(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """The agent pins the trace leaf at its own version: they are released together."""
    root = _skeleton(tmp_path, repo_root)
    _add(root, "trace", "X = 1", module="_shared")
    _add(root, "agent", "from twinflow.trace._shared import X")
    done = run_gate("layers", "--root", root)
    assert 0 == done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize(
    "pin", ["twinflow-trace==0.2.0", "twinflow-trace>=0.1.0", "twinflow-trace"]
)
def test_a_pin_at_another_version_or_a_range_shares_nothing(
    pin: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """Only a pin at the library's own version is a release together; the private read fails."""
    root = _skeleton(tmp_path, repo_root)
    pyproject = root / "packages" / "twinflow-agent" / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text(encoding="utf-8").replace("twinflow-trace==0.1.0", pin),
        encoding="utf-8",
    )
    _add(root, "trace", "X = 1", module="_shared")
    _add(root, "agent", "from twinflow.trace._shared import X")
    done = run_gate("layers", "--root", root)
    assert 1 == done.returncode, done.stdout + done.stderr
    assert "twinflow.trace._shared is private to twinflow.trace" in done.stderr


@pytest.mark.parametrize(("package", "line"), PRIVATE.values(), ids=PRIVATE.keys())
def test_a_private_module_imported_from_another_package_fails(
    package: str, line: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """A package released on its own that imports another's private module makes the gate exit 1."""
    root = _skeleton(tmp_path, repo_root)
    _unpin(root, package)
    _add(root, "trace", "X = 1", module="_shared")
    _add(root, package, line)
    done = run_gate("layers", "--root", root)
    assert 1 == done.returncode, done.stdout + done.stderr
    assert "twinflow.trace._shared is private to twinflow.trace" in done.stderr


def test_a_private_module_imported_from_inside_its_package_passes(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """A package imports its own private modules; others import its public names."""
    root = _skeleton(tmp_path, repo_root)
    _add(root, "trace", "X = 1", module="_shared")
    _add(root, "trace", "from twinflow.trace._shared import X", module="_user")
    _add(root, "agent", "from twinflow.trace import X")
    done = run_gate("layers", "--root", root)
    assert 0 == done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("package", ["trace", "vocab", "agent", "cli"])
def test_every_package_may_import_the_private_plumbing(
    package: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """twinflow._base's private modules are the one exception to the private-module rule."""
    root = _skeleton(tmp_path, repo_root)
    _add(root, "_base", "X = 1", module="_files")
    _add(root, package, "from twinflow._base._files import X")
    done = run_gate("layers", "--root", root)
    assert 0 == done.returncode, done.stdout + done.stderr


def test_import_linter_alone_holds_the_private_modules(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """The .importlinter contract itself is broken by a planted private import (not only the AST pass)."""
    root = _skeleton(tmp_path, repo_root)
    _add(root, "trace", "X = 1", module="_shared")
    _unpin(root, "agent")
    _add(root, "agent", "from twinflow.trace._shared import X")
    done = run_gate("layers", "--root", root)
    assert "A package's private modules are imported only from inside it BROKEN" in done.stdout


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
    (translate.parent / "__init__.py").write_text(
        "from twinflow.vocab.datapizza._translate import TextBlock\n", encoding="utf-8"
    )
    # Through the package's public face: its private module is its own (the private rule).
    _add(root, "cli", "import twinflow.vocab.datapizza")
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
    shutil.copy(repo_root / "pyproject.toml", root / "pyproject.toml")
    module = root / "packages/twinflow-vocab/src/twinflow/vocab/__init__.py"
    module.write_text(
        module.read_text(encoding="utf-8") + "\nimport twinflow.agent\n", encoding="utf-8"
    )
    done = run_gate("layers", "--root", root)
    assert 1 == done.returncode, done.stdout + done.stderr
    assert "twinflow.vocab -> twinflow.agent" in done.stdout


def _gate_fails_naming(root: Path, run_gate: GateRunner, *names: str) -> None:
    done = run_gate("layers", "--root", root)
    assert 1 == done.returncode, done.stdout + done.stderr
    for name in names:
        assert name in done.stdout + done.stderr, done.stdout + done.stderr


# ------------------------------------------------- class 10: every member, wherever it lives


def test_a_member_outside_packages_is_in_the_graph(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """A member the workspace lists under libs/ is analysed: its upward import fails."""
    root = _skeleton(tmp_path, repo_root)
    shutil.rmtree(root / "packages" / "twinflow-vocab")
    vocab = _member(root, "twinflow-vocab", "vocab", where="libs")
    (vocab / "datapizza").mkdir()
    (vocab / "datapizza" / "__init__.py").write_text("", encoding="utf-8")
    (vocab / "_fixture.py").write_text("import twinflow.agent\n", encoding="utf-8")
    (root / "pyproject.toml").write_text(
        '[tool.uv.workspace]\nmembers = ["packages/*", "libs/*"]\n', encoding="utf-8"
    )
    _gate_fails_naming(root, run_gate, "twinflow.vocab._fixture")


def test_a_flat_layout_member_is_in_the_graph(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """A member without src/ (flat layout) is analysed too."""
    root = _skeleton(tmp_path, repo_root)
    shutil.rmtree(root / "packages" / "twinflow-kernel")
    flat = root / "packages" / "twinflow-kernel"
    (flat / "twinflow" / "kernel").mkdir(parents=True)
    (flat / "pyproject.toml").write_text('[project]\nname = "twinflow-kernel"\n')
    (flat / "twinflow" / "kernel" / "__init__.py").write_text("import twinflow.eval\n")
    _gate_fails_naming(root, run_gate, "twinflow.kernel -> twinflow.eval")


UNPLACED = {
    "a new twinflow package": ("twinflow-extra", "src/twinflow/extra/__init__.py"),
    "a top-level package beside twinflow": ("twinflow-agent", "src/evil/__init__.py"),
    "a flat member's package": ("twinflow-flat", "twinflow/flat/__init__.py"),
    "a flat member's top-level module": ("twinflow-flat", "evil.py"),
}


@pytest.mark.parametrize(("distribution", "module"), UNPLACED.values(), ids=UNPLACED.keys())
def test_a_package_in_no_layer_fails(
    distribution: str, module: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """A member's package that the table does not place in a layer fails the gate."""
    root = _skeleton(tmp_path, repo_root)
    member = root / "packages" / distribution
    (member / module).parent.mkdir(parents=True, exist_ok=True)
    (member / module).write_text("", encoding="utf-8")
    if not (member / "pyproject.toml").exists():
        (member / "pyproject.toml").write_text(f'[project]\nname = "{distribution}"\n')
    _gate_fails_naming(root, run_gate, "is in no layer")


# --------------------------------------------- class 11: the contracts file held to the table

EDITS = {
    "ignore_imports": (
        "allow_indirect_imports = True\n",
        "allow_indirect_imports = True\nignore_imports =\n    twinflow.agent -> socket\n",
    ),
    "exclude_type_checking_imports": (
        "exclude_type_checking_imports = False",
        "exclude_type_checking_imports = True",
    ),
    "a shortened forbidden list": ("    openai\n", ""),
    "a layer dropped": ("    twinflow.eval\n", ""),
    "a contract deleted": ("[importlinter:contract:provider-sdks]", "[notacontract]"),
}


@pytest.mark.parametrize(("old", "new"), EDITS.values(), ids=EDITS.keys())
def test_contracts_that_differ_from_the_table_fail(
    old: str, new: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """Any edit that weakens .importlinter fails the gate, even when every import is clean."""
    root = _skeleton(tmp_path, repo_root)
    config = root / ".importlinter"
    text = config.read_text(encoding="utf-8")
    assert old in text
    config.write_text(text.replace(old, new, 1), encoding="utf-8")
    _gate_fails_naming(root, run_gate, ".importlinter")


def test_the_contracts_file_is_the_tables(repo_root: Path, run_gate: GateRunner) -> None:
    """The committed .importlinter is exactly what the table gives for this workspace."""
    done = run_gate("layers", "--expected")
    assert 0 == done.returncode, done.stderr
    assert done.stdout == (repo_root / ".importlinter").read_text(encoding="utf-8")


# --------------------------------------------------- class 12: dynamic imports are imports

DYNAMIC = {
    "vocab import_module agent": (
        "vocab",
        "import importlib\nimportlib.import_module('twinflow.agent')",
    ),
    "kernel __import__ models": ("kernel", "__import__('twinflow.models')"),
    "agent sys.modules socket": ("agent", "import sys\nsock = sys.modules['socket']"),
    "eval resolve_name subprocess": (
        "eval",
        "import pkgutil\npkgutil.resolve_name('subprocess:run')",
    ),
    "models import_module openai": (
        "models",
        "import importlib\nimportlib.import_module('openai')",
    ),
    "agent import_module datapizza": (
        "agent",
        "import importlib\nimportlib.import_module('datapizza')",
    ),
}


@pytest.mark.parametrize(("package", "line"), DYNAMIC.values(), ids=DYNAMIC.keys())
def test_dynamic_imports_with_a_literal_name_are_imports(
    package: str, line: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """A dynamic import of a literal name breaks the contract a static one would."""
    root = _skeleton(tmp_path, repo_root)
    _add(root, package, line)
    _gate_fails_naming(root, run_gate, f"twinflow.{package}._fixture")


def test_a_dynamic_import_the_layers_allow_passes(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """cli importing twinflow.agent by name is what a static import would be: allowed."""
    root = _skeleton(tmp_path, repo_root)
    _add(root, "cli", "import importlib\nimportlib.import_module('twinflow.agent')")
    done = run_gate("layers", "--root", root)
    assert 0 == done.returncode, done.stdout + done.stderr


# ------------------------------------------------ the trace leaf: standard library only


@pytest.mark.parametrize(
    "line",
    [
        "import pydantic",
        "from twinflow import vocab",
        "import importlib\nimportlib.import_module('rfc8785')",
    ],
)
def test_the_trace_leaf_imports_the_standard_library_only(
    line: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """twinflow.trace importing a third-party or another twinflow package fails."""
    root = _skeleton(tmp_path, repo_root)
    _add(root, "trace", line)
    _gate_fails_naming(root, run_gate, "twinflow.trace._fixture")


def test_the_trace_leaf_on_the_standard_library_passes(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """A trace leaf importing json and hashlib, with its contracts, keeps every contract."""
    root = _skeleton(tmp_path, repo_root)
    _add(root, "trace", "import hashlib\nimport json")
    _add(root, "vocab", "import twinflow.trace")
    done = run_gate("layers", "--root", root)
    assert 0 == done.returncode, done.stdout + done.stderr


def test_the_command_pins_each_library_at_its_own_version(repo_root: Path) -> None:
    """The command's private reads hold only if it is released with exactly its libraries."""
    import tomllib

    def project(name: str) -> dict[str, object]:
        path = repo_root / "packages" / name / "pyproject.toml"
        return dict(tomllib.loads(path.read_text(encoding="utf-8"))["project"])

    members = {path.name for path in (repo_root / "packages").iterdir() if path.is_dir()}
    # The recorder of pydantic-ai runs is opt-in: the command never reads it, and pinning it
    # would put pydantic-ai in the command's closure.
    opt_in = {"twinflow-cli", "twinflow-pydantic-ai"}
    wanted = sorted(f"{name}=={project(name)['version']}" for name in members - opt_in)
    dependencies = project("twinflow-cli")["dependencies"]
    assert isinstance(dependencies, list)
    pinned = sorted(str(d) for d in dependencies if str(d).startswith("twinflow-"))
    assert wanted == pinned


# ------------------------------------------- every way of importing is held to the layers

# Each: (package planted in, source, the name the gate must report it reaching). Planted side
# by side in one tree (a module each), so one run of the gate judges a whole class.
CONSTANT_ROUTES = {
    "import_module relative to a literal package": (
        "vocab",
        "import importlib\nimportlib.import_module('.cli', 'twinflow')",
        "twinflow.cli",
    ),
    "import_module climbing from __package__": (
        "agent",
        "from importlib import import_module\nimport_module('..eval', __package__)",
        "twinflow.eval",
    ),
    "import_module climbing from __name__": (
        "models",
        "import importlib\nimportlib.import_module('...agent', __name__)",
        "twinflow.agent",
    ),
    "import_module through getattr": (
        "agent",
        "import importlib\ngetattr(importlib, 'import_module')('.views', 'twinflow')",
        "twinflow.views",
    ),
    "__import__ at level 2": (
        "kernel",
        "__import__('models', globals(), None, [], 2)",
        "twinflow.models",
    ),
    "__import__ with keywords": (
        "vocab",
        "__import__('agent', globals=globals(), level=2)",
        "twinflow.agent",
    ),
    "__import__ with a globals dict": (
        "trace",
        "__import__('cli', {'__package__': 'twinflow'}, None, [], 1)",
        "twinflow.cli",
    ),
    "__import__ of the namespace with a fromlist": (
        "kernel",
        "__import__('twinflow', fromlist=['eval'])",
        "twinflow.eval",
    ),
    "builtins.__import__ with a tuple fromlist": (
        "views",
        "import builtins\nbuiltins.__import__('twinflow', globals(), None, ('cli',))",
        "twinflow.cli",
    ),
    "pkgutil.resolve_name at the namespace": (
        "eval",
        "import pkgutil\npkgutil.resolve_name('twinflow:cli')",
        "twinflow.cli",
    ),
    "an EntryPoint's value": (
        "agent",
        "from importlib.metadata import EntryPoint\n"
        "EntryPoint('x', 'twinflow.cli._main:main', 'g').load()",
        "twinflow.cli._main.main",
    ),
    "an EntryPoint's value by keyword": (
        "models",
        "import importlib.metadata as md\nmd.EntryPoint(name='x', value='twinflow.views [a]', group='g')",
        "twinflow.views",
    ),
    "pydoc.locate": (
        "vocab",
        "import pydoc\npydoc.locate('twinflow.kernel.Clock')",
        "twinflow.kernel",
    ),
    "find_spec imports the parents": (
        "kernel",
        "import importlib.util\nimportlib.util.find_spec('twinflow.agent.x')",
        "twinflow.agent",
    ),
    "importlib.resources reads a package": (
        "trace",
        "from importlib import resources\nresources.files('twinflow.cli')",
        "twinflow.cli",
    ),
    "mock.patch imports where it patches": (
        "models",
        "from unittest import mock\nmock.patch('twinflow.eval.x')",
        "twinflow.eval",
    ),
    "a name concatenated of constants": (
        "kernel",
        "import importlib\nimportlib.import_module('twinflow.' + 'agent')",
        "twinflow.agent",
    ),
    "a module-level constant": (
        "vocab",
        "import importlib\nTARGET = 'twinflow.models'\nimportlib.import_module(TARGET)",
        "twinflow.models",
    ),
    "an f-string of constants": (
        "trace",
        "import importlib\nBASE = 'twinflow'\nimportlib.import_module(f'{BASE}.kernel')",
        "twinflow.kernel",
    ),
    "a join of constants": (
        "agent",
        "import importlib\nimportlib.import_module('.'.join(['twinflow', 'cli']))",
        "twinflow.cli",
    ),
    "a %-formatted name": (
        "views",
        "import importlib\nimportlib.import_module('twinflow.%s' % 'eval')",
        "twinflow.eval",
    ),
}

ANNOTATIONS = {
    "a pydantic field's string annotation": (
        "models",
        "import twinflow\nfrom pydantic import BaseModel\n\n"
        "class M(BaseModel):\n    x: 'twinflow.agent.Agent'",
        "twinflow.agent",
    ),
    "a string inside a subscript": (
        "kernel",
        "import twinflow\n\nclass M:\n    x: list['twinflow.models.Model']",
        "twinflow.models",
    ),
    "every annotation under future annotations": (
        "vocab",
        "from __future__ import annotations\nimport twinflow\n\n"
        "class M:\n    x: twinflow.kernel.Clock",
        "twinflow.kernel",
    ),
    "an argument's string annotation": (
        "agent",
        "import twinflow\n\ndef f(x: 'twinflow.eval.Case') -> None: ...",
        "twinflow.eval",
    ),
    "a return's string annotation": (
        "views",
        "import twinflow\n\ndef f() -> 'twinflow.cli.App': ...",
        "twinflow.cli",
    ),
    "typing.ForwardRef": (
        "models",
        "import typing\nimport twinflow\ntyping.ForwardRef('twinflow.views.Page')",
        "twinflow.views",
    ),
    "a TypeVar's bound": (
        "vocab",
        "from typing import TypeVar\nimport twinflow\nT = TypeVar('T', bound='twinflow.agent.Agent')",
        "twinflow.agent",
    ),
    "an annotation that imports": (
        "kernel",
        "class M:\n    x: \"__import__('twinflow.cli').cli\"",
        "twinflow.cli",
    ),
    "a string in a string annotation": (
        "trace",
        "import twinflow\nx: \"list['twinflow.vocab.Message']\" = []",
        "twinflow.vocab",
    ),
}

NAMESPACE = {
    "an attribute of the namespace package": (
        "eval",
        "import twinflow\ntwinflow.cli.main()",
        "twinflow.cli",
    ),
    "through a package it may import": (
        "views",
        "import twinflow.agent\ntwinflow.eval.run()",
        "twinflow.eval",
    ),
    "an alias of the namespace": (
        "models",
        "import twinflow as tf\ntf.agent.Agent",
        "twinflow.agent",
    ),
    "a name assigned the namespace": (
        "kernel",
        "import twinflow\nns = twinflow\nns.models.x",
        "twinflow.models",
    ),
    "getattr with a literal name": (
        "vocab",
        "import twinflow\ngetattr(twinflow, 'agent')",
        "twinflow.agent",
    ),
    "inside a function": (
        "trace",
        "def f():\n    import twinflow\n    return twinflow.vocab",
        "twinflow.vocab",
    ),
    "a star import from the namespace": ("kernel", "from twinflow import *", "twinflow.*"),
    "vars of the namespace": (
        "models",
        "import twinflow\nvars(twinflow)['agent']",
        "twinflow.agent",
    ),
    "the namespace's __dict__": (
        "vocab",
        "import twinflow\ntwinflow.__dict__['kernel']",
        "twinflow.kernel",
    ),
    "urllib.request through urllib": (
        "agent",
        "import urllib\nurllib.request.urlopen('x')",
        "urllib.request",
    ),
    "asyncio.subprocess through asyncio": (
        "eval",
        "import asyncio\nasyncio.subprocess.PIPE",
        "asyncio.subprocess",
    ),
}

HANDED_OUT = {
    "mcp's httpx client factory": (
        "kernel",
        "from mcp.shared._httpx_utils import create_mcp_http_client",
        "mcp.shared._httpx_utils",
    ),
    "mcp's stdio client through the package": (
        "agent",
        "import mcp\nmcp.stdio_client",
        "mcp.stdio_client",
    ),
    "mcp's session re-exported": ("models", "from mcp import ClientSession", "mcp.ClientSession"),
    "an mcp transport module": (
        "eval",
        "import mcp.client.streamable_http",
        "mcp.client.streamable_http",
    ),
    "a star import of mcp": ("kernel", "from mcp import *", "mcp.*"),
    "an mcp transport by name": (
        "agent",
        "import importlib\nimportlib.import_module('mcp.client.sse')",
        "mcp.client.sse",
    ),
    "mcp's server": ("cli", "from mcp.server.lowlevel import Server", "mcp.server"),
    "jsonschema's remote resolver": (
        "agent",
        "from jsonschema import validators\nvalidators.RefResolver",
        "jsonschema.validators.RefResolver",
    ),
    "anyio's connections": (
        "models",
        "import anyio\nanyio.connect_tcp('h', 1)",
        "anyio.connect_tcp",
    ),
    "anyio's processes": ("eval", "from anyio import run_process", "anyio.run_process"),
    "starlette's httpx test client": (
        "views",
        "from starlette.testclient import TestClient",
        "starlette.testclient",
    ),
    "an HTTP server": ("kernel", "import uvicorn", "uvicorn"),
    "an OTLP exporter": (
        "agent",
        "from opentelemetry.exporter.otlp.proto.http import trace_exporter",
        "opentelemetry.exporter",
    ),
}

ROUTE_CLASSES = {
    "constant-string dynamic imports": CONSTANT_ROUTES,
    "string annotations": ANNOTATIONS,
    "the namespace package": NAMESPACE,
    "helpers that hand out clients": HANDED_OUT,
}


@pytest.mark.parametrize("cases", ROUTE_CLASSES.values(), ids=ROUTE_CLASSES.keys())
def test_every_route_of_importing_is_held_to_the_layers(
    cases: dict[str, tuple[str, str, str]], tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """Each route to a forbidden module fails the gate, naming the module and what it reaches."""
    root = _skeleton(tmp_path, repo_root)
    expected = {}
    for index, (case, (package, source, target)) in enumerate(cases.items()):
        _add(root, package, source, module=f"_route{index}")
        expected[case] = f"twinflow.{package}._route{index} -> {target}"
    done = run_gate("layers", "--root", root)
    assert 1 == done.returncode, done.stdout + done.stderr
    missing = sorted(case for case, line in expected.items() if line not in done.stderr)
    assert [] == missing, done.stderr


def test_a_private_module_reached_through_an_attribute_fails(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """`import twinflow.trace; twinflow.trace._shared.X` reaches a private module of another package."""
    root = _skeleton(tmp_path, repo_root)
    _add(root, "trace", "X = 1", module="_shared")
    _unpin(root, "agent")
    _add(root, "agent", "import twinflow.trace\ntwinflow.trace._shared.X")
    _gate_fails_naming(root, run_gate, "twinflow.trace._shared is private to twinflow.trace")


def test_a_helper_handed_out_in_datapizzas_home_fails(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """datapizza's MCP client and its span exporter are banned even where datapizza may be imported."""
    root = _skeleton(tmp_path, repo_root)
    home = root / "packages/twinflow-vocab/src/twinflow/vocab/datapizza"
    (home / "_client.py").write_text(
        "from datapizza.tools.mcp_client import MCPClient\n", encoding="utf-8"
    )
    (home / "_spans.py").write_text(
        "import datapizza.tracing\ndatapizza.tracing.DatapizzaMonitoringInstrumentor()\n",
        encoding="utf-8",
    )
    _gate_fails_naming(
        root,
        run_gate,
        "datapizza.tools.mcp_client is used nowhere",
        "datapizza.tracing.DatapizzaMonitoringInstrumentor is used nowhere",
    )


ROUTES_KEPT = {
    "cli imports eval relative to the namespace": (
        "cli",
        "import importlib\nimportlib.import_module('.eval', 'twinflow')",
    ),
    "a package's own submodule by __package__": (
        "agent",
        "import importlib\nimportlib.import_module('._x', __package__)",
    ),
    "a string annotation of a lower package": (
        "agent",
        "import twinflow\n\nclass M:\n    x: 'twinflow.models.Model'",
    ),
    "the namespace's attribute to a lower package": (
        "eval",
        "import twinflow\ntwinflow.agent.Agent",
    ),
    "a string annotation that is prose": ("models", "x: 'not an expression, just words!' = 1"),
    "urllib.parse through urllib": ("agent", "import urllib.parse\nurllib.parse.quote('x')"),
    "mcp's types": ("agent", "import mcp.types\nmcp.types.Tool"),
    "find_spec of a top-level module imports nothing": (
        "models",
        "import importlib.util\nimportlib.util.find_spec('twinflow')",
    ),
    "importlib.resources on its own package": (
        "kernel",
        "from importlib import resources\nresources.files(__package__)",
    ),
    "__import__ of a lower package's module": (
        "views",
        "__import__('twinflow', fromlist=['agent'])",
    ),
    "an EntryPoint into a lower package": (
        "eval",
        "from importlib.metadata import EntryPoint\nEntryPoint('x', 'twinflow.agent:Agent', 'g')",
    ),
    "a Literal's values are values": (
        "models",
        "import typing\nimport urllib.parse\nimport twinflow\n"
        "x: typing.Literal['twinflow.cli', 'urllib.request'] = 'twinflow.cli'",
    ),
    "Annotated's metadata is a value": (
        "vocab",
        "from typing import Annotated\nimport twinflow\nx: Annotated[int, 'twinflow.agent.x'] = 1",
    ),
    "a constant naming a lower package": (
        "cli",
        "import importlib\nNAME = 'twinflow.' + 'agent'\nimportlib.import_module(NAME)",
    ),
    "anyio's events": ("agent", "import anyio\nanyio.Event"),
}


def test_routes_the_layers_allow_pass(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """Routes to packages below, to the package itself and to allowed modules keep every contract."""
    root = _skeleton(tmp_path, repo_root)
    for index, (package, source) in enumerate(ROUTES_KEPT.values()):
        _add(root, package, source, module=f"_route{index}")
    done = run_gate("layers", "--root", root)
    assert 0 == done.returncode, done.stdout + done.stderr


def test_the_repository_keeps_its_layers(run_gate: GateRunner) -> None:
    """Today's tree, every route resolved, keeps every contract."""
    done = run_gate("layers")
    assert 0 == done.returncode, done.stdout + done.stderr
