"""The determinism gate fails on every evasion ruff can see, and on every way of silencing it."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
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

# Class 6 of the banned families: the private C modules behind the public names, every way to start a
# process, asyncio's network, thread and timer entry points, ctypes, wall-clock time in every
# form, sched, timeit and third-party network, time and randomness libraries.
COVERAGE = {
    "_random": "import _random\n",
    "posix fork": "from posix import fork\n",
    "nt": "import nt\n",
    "_socket": "import _socket\n",
    "_ssl": "import _ssl\n",
    "_thread": "import _thread\n",
    "os.spawnv": "import os\n\nos.spawnv(os.P_WAIT, 'x', ['x'])\n",
    "os.execv": "import os\n\nos.execv('x', ['x'])\n",
    "os.posix_spawn": "from os import posix_spawn\n",
    "os.forkpty": "import os\n\nos.forkpty()\n",
    "pty": "import pty\n",
    "asyncio subprocess": "import asyncio\n\nasyncio.create_subprocess_exec('x')\n",
    "asyncio.subprocess module": "from asyncio import subprocess\n",
    "asyncio network": "import asyncio\n\nasyncio.open_connection('h', 1)\n",
    "asyncio server": "from asyncio import start_server\n",
    "asyncio thread": "import asyncio\n\nasyncio.to_thread(print)\n",
    "asyncio timer": "import asyncio\n\nasyncio.sleep(1)\n",
    "ctypes": "import ctypes\n",
    "datetime via module attribute": "import datetime\n\nx = datetime.datetime.now()\n",
    "gmtime": "import time\n\nx = time.gmtime()\n",
    "strftime": "from time import strftime\n",
    "clock_gettime": "import time\n\nx = time.clock_gettime(0)\n",
    "sched": "import sched\n",
    "timeit": "from timeit import default_timer\n",
    "urllib3": "import urllib3\n",
    "httpx": "import httpx\n",
    "requests": "import requests\n",
    "anyio": "import anyio\n",
    "numpy's random": "from numpy import random\n",
    "numpy.random": "import numpy.random as npr\n",
    "ftplib": "import ftplib\n",
    "xmlrpc": "import xmlrpc.client\n",
}


TABLE = "packages/twinflow-kernel/src/twinflow/kernel/banned.toml"
ALLOWLIST = "packages/twinflow-kernel/src/twinflow/kernel/stdlib.toml"
MEMBERS = {
    "twinflow-agent": "agent",
    "twinflow-kernel": "kernel",
    "twinflow-cli": "cli",
    "twinflow-eval": "eval",
    "twinflow-trace": "_base",
}


def _tree(tmp_path: Path, repo_root: Path, module: str, source: str | bytes) -> Path:
    """A throw-away workspace: the real root config and banned table, five members, one file."""
    root = tmp_path / "tree"
    root.mkdir(parents=True)
    shutil.copy(repo_root / "pyproject.toml", root / "pyproject.toml")
    (root / TABLE).parent.mkdir(parents=True)
    shutil.copy(repo_root / TABLE, root / TABLE)
    shutil.copy(repo_root / ALLOWLIST, root / ALLOWLIST)
    for distribution, package in MEMBERS.items():
        member = root / "packages" / distribution
        (member / "src" / "twinflow" / package).mkdir(parents=True, exist_ok=True)
        (member / "pyproject.toml").write_text(
            f'[project]\nname = "{distribution}"\n', encoding="utf-8"
        )
    target = root / module
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(source, bytes):
        target.write_bytes(source)
    else:
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


@pytest.mark.parametrize("source", COVERAGE.values(), ids=COVERAGE.keys())
def test_coverage_of_every_nondeterministic_family(
    source: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """Each family of class 6 fails the gate in twinflow.agent, naming the file."""
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
        "import hashlib\nfrom datetime import UTC, datetime\n\n"
        "x = datetime(2024, 1, 1, tzinfo=UTC)\ny = hashlib.sha256(b'a').hexdigest()\n"
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


def test_a_member_ruff_table_fails(tmp_path: Path, repo_root: Path, run_gate: GateRunner) -> None:
    """A [tool.ruff] table in a member's pyproject.toml would replace the root config: violation."""
    root = _tree(tmp_path, repo_root, AGENT_MODULE, "x = 1\n")
    member = root / "packages" / "twinflow-agent" / "pyproject.toml"
    member.write_text('[project]\nname = "twinflow-agent"\n\n[tool.ruff]\n', encoding="utf-8")
    done = run_gate("determinism", "--root", root)
    assert 1 == done.returncode, done.stdout + done.stderr
    assert "replaces the root config" in done.stderr


def _gate_fails_naming(root: Path, run_gate: GateRunner, *names: str) -> None:
    done = run_gate("determinism", "--root", root)
    assert 1 == done.returncode, done.stdout + done.stderr
    for name in names:
        assert name in done.stderr, done.stderr


# ----------------------------------------------------- class 1: files the linter never sees

SKIPPED_BY_DEFAULT = {
    "a _build subpackage": "packages/twinflow-agent/src/twinflow/agent/_build/mod.py",
    "a build folder": "packages/twinflow-agent/src/twinflow/agent/build/mod.py",
    "a dist folder": "packages/twinflow-agent/src/twinflow/agent/dist/mod.py",
    "node_modules": "packages/twinflow-agent/src/twinflow/agent/node_modules/mod.py",
    "a hidden folder": "packages/twinflow-agent/src/twinflow/agent/.hidden/mod.py",
    "a .venv inside src": "packages/twinflow-agent/src/twinflow/agent/.venv/mod.py",
    "site-packages": "packages/twinflow-agent/src/twinflow/agent/site-packages/mod.py",
    "a stub file": "packages/twinflow-agent/src/twinflow/agent/_stub.pyi",
}


@pytest.mark.parametrize("module", SKIPPED_BY_DEFAULT.values(), ids=SKIPPED_BY_DEFAULT.keys())
def test_files_the_linter_never_looks_at_are_checked(
    module: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """A banned call in a folder ruff skips by default, or listed in .gitignore, fails the gate."""
    root = _tree(tmp_path, repo_root, module, "import random\n\nx = random.random()\n")
    (root / ".gitignore").write_text(module.rpartition("/")[0] + "/\n", encoding="utf-8")
    _gate_fails_naming(root, run_gate, module)


def test_a_file_ruff_did_not_check_fails_naming_it(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """When ruff's own file list lacks a source file, the gate fails and names that file."""
    root = _tree(tmp_path, repo_root, AGENT_MODULE, "x = 1\n")
    real = repo_root / ".venv" / "bin" / "ruff"
    # A ruff that forgets one file in --show-files, as an exclusion would make it.
    fake = tmp_path / "ruff"
    fake.write_text(f'#!/bin/sh\n{real} "$@" | grep -v _fixture.py\nexit 0\n', encoding="utf-8")
    fake.chmod(0o755)
    done = run_gate("determinism", "--root", root, "--ruff", fake)
    assert 1 == done.returncode, done.stdout + done.stderr
    assert f"{AGENT_MODULE}: ruff did not check this file" in done.stderr


def test_a_linked_folder_is_not_a_way_around(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """A symbolic link to a folder of code outside the tree fails the gate, naming the link."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "evil.py").write_text("import random\n", encoding="utf-8")
    root = _tree(tmp_path, repo_root, AGENT_MODULE, "x = 1\n")
    link = "packages/twinflow-agent/src/twinflow/agent/linked"
    (root / link).symlink_to(outside, target_is_directory=True)
    _gate_fails_naming(root, run_gate, link)


# ---------------------------------------------------------- class 2: files ruff cannot read

UNREADABLE = {
    "a syntax error": b"def broken(:\n    pass\n",
    "a utf-7 declaration hiding code": (b"# -*- coding: utf-7 -*-\nx = 1 +AAo-import random\n"),
    "a latin-1 declaration": b"# coding: latin-1\nx = 1\n",
    "bytes that are not utf-8": b"x = '\xff\xfe'\n",
}


@pytest.mark.parametrize("source", UNREADABLE.values(), ids=UNREADABLE.keys())
def test_files_ruff_cannot_read_fail(
    source: bytes, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """A parse failure or a non-UTF-8 encoding fails the gate instead of passing silently."""
    root = _tree(tmp_path, repo_root, AGENT_MODULE, source)
    _gate_fails_naming(root, run_gate, AGENT_MODULE)


def test_a_compiled_module_in_a_member_fails(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """A sourceless .pyc beside the sources is importable but unreadable: it fails the gate."""
    module = "packages/twinflow-agent/src/twinflow/agent/_hidden.pyc"
    root = _tree(tmp_path, repo_root, module, b"\x00")
    _gate_fails_naming(root, run_gate, module)


# --------------------------------------------------------- class 3: configuration that widens

WIDENING = {
    "extend-exclude": (
        'extend-exclude = ["tests/fixtures"]',
        'extend-exclude = ["tests/fixtures", "packages/twinflow-agent/src/twinflow/agent/x"]',
    ),
    "exclude": ("[tool.ruff]\n", '[tool.ruff]\nexclude = ["packages"]\n'),
    "include": ("[tool.ruff]\n", '[tool.ruff]\ninclude = ["scripts/*.py"]\n'),
    "respect-gitignore": ("[tool.ruff]\n", "[tool.ruff]\nrespect-gitignore = true\n"),
    "force-exclude": ("[tool.ruff]\n", "[tool.ruff]\nforce-exclude = true\n"),
    "extend": ("[tool.ruff]\n", '[tool.ruff]\nextend = "other.toml"\n'),
    "lint.extend-ignore": ("[tool.ruff.lint]\n", '[tool.ruff.lint]\nextend-ignore = ["TID"]\n'),
    "lint.ignore": ('ignore = ["E501", "SIM300"]', 'ignore = ["E501", "SIM300", "B"]'),
    "per-file-ignores for another rule": (
        '"tests/gates/**" = ["TID251"]\n',
        '"tests/gates/**" = ["TID251"]\n"packages/twinflow-agent/**" = ["E"]\n',
    ),
    "extend-per-file-ignores": (
        "[tool.ruff.lint]\n",
        '[tool.ruff.lint]\nextend-per-file-ignores = { "x/**" = ["TID251"] }\n',
    ),
}


@pytest.mark.parametrize(("old", "new"), WIDENING.values(), ids=WIDENING.keys())
def test_configuration_that_widens_fails(
    old: str, new: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """Every ruff setting that removes files or rules is held to the gate's allowlist."""
    root = _tree(tmp_path, repo_root, AGENT_MODULE, "x = 1\n")
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    assert old in text
    pyproject.write_text(text.replace(old, new, 1), encoding="utf-8")
    _gate_fails_naming(root, run_gate, "pyproject.toml")


@pytest.mark.parametrize(
    "config",
    [
        "ruff.toml",
        ".ruff.toml",
        "packages/twinflow-agent/src/twinflow/agent/ruff.toml",
        "packages/twinflow-agent/src/twinflow/agent/.hidden/.ruff.toml",
    ],
)
def test_a_ruff_config_file_anywhere_fails(
    config: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """A ruff.toml or .ruff.toml anywhere in the tree fails the gate, naming it."""
    root = _tree(tmp_path, repo_root, AGENT_MODULE, "x = 1\n")
    (root / config).parent.mkdir(parents=True, exist_ok=True)
    (root / config).write_text("[lint]\nignore = []\n", encoding="utf-8")
    _gate_fails_naming(root, run_gate, config)


# ---------------------------------------------------- class 4: exempt by package, not by path


def test_a_new_package_in_the_kernels_folder_is_not_exempt(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """`packages/twinflow-kernel/src/evil/` is not twinflow.kernel: its banned call fails."""
    module = "packages/twinflow-kernel/src/evil/mod.py"
    root = _tree(tmp_path, repo_root, module, "import random\n")
    _gate_fails_naming(root, run_gate, module)


REAL_ADAPTER_USES = {
    "from-import": "from twinflow.kernel import SystemClock\n",
    "module attribute": "import twinflow.kernel as k\n\nclock = k.SystemIds()\n",
    "private module": "from twinflow.kernel._transport import HttpTransport\n",
    "run_process": "from twinflow.kernel import run_process\n",
    "dynamic": "import importlib\n\nc = importlib.import_module('twinflow.kernel').SystemClock\n",
}


@pytest.mark.parametrize("source", REAL_ADAPTER_USES.values(), ids=REAL_ADAPTER_USES.keys())
def test_real_adapters_only_in_the_composition_root(
    source: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """The kernel's real adapters named in twinflow.agent fail; in twinflow.cli they pass."""
    root = _tree(tmp_path, repo_root, AGENT_MODULE, source)
    _gate_fails_naming(root, run_gate, AGENT_MODULE, "real adapter")
    cli = _tree(tmp_path / "cli", repo_root, "packages/twinflow-cli/src/twinflow/cli/_w.py", source)
    done = run_gate("determinism", "--root", cli)
    assert 0 == done.returncode, done.stdout + done.stderr


# ----------------------------------------------------------------------- class 5: one table


def _pyproject_rows(root: Path) -> tuple[Path, list[str]]:
    pyproject = root / "pyproject.toml"
    return pyproject, pyproject.read_text(encoding="utf-8").splitlines(keepends=True)


def test_every_row_of_the_table_is_required_in_the_ruff_config(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """Deleting any banned-api row from pyproject.toml fails the gate, naming it."""
    table = tomllib.loads((repo_root / TABLE).read_text(encoding="utf-8"))
    names = [row["name"] for row in table["banned"]]
    root = _tree(tmp_path, repo_root, AGENT_MODULE, "x = 1\n")
    pyproject, lines = _pyproject_rows(root)
    kept = [line for line in lines if not any(line.startswith(f'"{n}" = {{') for n in names)]
    assert len(lines) - len(names) == len(kept)
    pyproject.write_text("".join(kept), encoding="utf-8")
    done = run_gate("determinism", "--root", root)
    assert 1 == done.returncode, done.stdout + done.stderr
    missing = {n for n in names if f"banned-api lacks {n!r}" in done.stderr}
    assert set(names) == missing


def test_a_ruff_row_not_in_the_table_or_reworded_fails(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """The ruff config must equal the table: an extra row or another message fails."""
    root = _tree(tmp_path, repo_root, AGENT_MODULE, "x = 1\n")
    pyproject, lines = _pyproject_rows(root)
    text = (
        "".join(lines)
        .replace('"sched" = { msg = "', '"sched" = { msg = "reworded: ', 1)
        .replace('"timeit" = {', '"zlib" = { msg = "x" }\n"timeit" = {', 1)
    )
    pyproject.write_text(text, encoding="utf-8")
    _gate_fails_naming(root, run_gate, "'sched' differs", "'zlib' is not in")


def test_dropping_a_required_family_from_the_table_fails(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """Deleting a required family from both the table and pyproject.toml still fails."""
    root = _tree(tmp_path, repo_root, AGENT_MODULE, "x = 1\n")
    pyproject, lines = _pyproject_rows(root)
    pyproject.write_text("".join(x for x in lines if not x.startswith('"ctypes" =')))
    table = root / TABLE
    text = table.read_text(encoding="utf-8")
    block = text[text.index('[[banned]]\nname = "ctypes"') :]
    block = block[: block.index("\n\n") + 2]
    table.write_text(text.replace(block, ""), encoding="utf-8")
    _gate_fails_naming(root, run_gate, "ctypes is missing from the banned list")


# ------------------------------------------------------------ class 12: dynamic imports

DYNAMIC = {
    "import_module literal": "import importlib\n\nm = importlib.import_module('random')\n",
    "import_module alias": "from importlib import import_module as im\n\nm = im('socket')\n",
    "__import__": "m = __import__('subprocess')\n",
    "pkgutil.resolve_name": "import pkgutil\n\nf = pkgutil.resolve_name('time:time')\n",
    "sys.modules subscript": "import sys\n\nm = sys.modules['secrets']\n",
    "attribute of a literal module": (
        "import importlib\n\nt = importlib.import_module('time')\n\n\n"
        "def f() -> float:\n    return t.time()\n"
    ),
    "getattr of a literal module": (
        "import importlib\n\nf = getattr(importlib.import_module('os'), 'urandom')\n"
    ),
    "a computed name": "import importlib\n\nname = 'ra' + 'ndom'\nm = importlib.import_module(name)\n",
    "exec of a string": "exec('import ran' + 'dom')\n",
    "eval through __builtins__": "f = __builtins__['eval']\n",
    "import_module reached by getattr": (
        "import importlib\n\nm = getattr(importlib, 'import_module')('random')\n"
    ),
    "runpy": "import runpy\n\nrunpy.run_path('elsewhere.py')\n",
    "a loader from a file": (
        "import importlib.util\n\ns = importlib.util.spec_from_file_location('m', 'm.py')\n"
    ),
    "a computed name claiming to load user code": (
        "import importlib\n\nname = 'x'\n"
        "m = importlib.import_module(name)  # gate: loads user code\n"
    ),
}


@pytest.mark.parametrize("source", DYNAMIC.values(), ids=DYNAMIC.keys())
def test_dynamic_imports_count_as_imports(
    source: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """A literal dynamic import of a banned name, or any computed one, fails in twinflow.agent."""
    root = _tree(tmp_path, repo_root, AGENT_MODULE, source)
    _gate_fails_naming(root, run_gate, AGENT_MODULE)


def test_a_user_code_loader_may_import_a_computed_name_when_it_says_so(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """_base/_code.py may import a computed name with the comment; without it, it fails."""
    module = "packages/twinflow-trace/src/twinflow/_base/_code.py"
    call = "import importlib\n\nname = 'x'\nm = importlib.import_module(name)"
    root = _tree(tmp_path, repo_root, module, call + "  # gate: loads user code\n")
    done = run_gate("determinism", "--root", root)
    assert 0 == done.returncode, done.stdout + done.stderr
    bare = _tree(tmp_path / "bare", repo_root, module, call + "\n")
    _gate_fails_naming(bare, run_gate, module)


# ------------------------------------------- names resolved the way Python resolves them

# Each reaches a banned object through a module, an alias, a binding or a namespace, where no
# spelling in the table matches; the gate must name the banned name it resolves to.
RESOLVED = {
    "a re-export through logging": ("import logging\n\nx = logging.time.time()\n", "time.time"),
    "a re-export two deep": (
        "import logging.handlers\n\nlogging.handlers.time.sleep(1)\n",
        "time.sleep",
    ),
    "a module through email.utils": (
        "import email.utils\n\nx = email.utils.random.random()\n",
        "random",
    ),
    "a private C function through two modules": (
        "import asyncio.base_subprocess\n\nf = asyncio.base_subprocess.subprocess._fork_exec\n",
        "subprocess",
    ),
    "a private thread starter": (
        "import logging\n\nf = logging.threading._start_new_thread\n",
        "threading",
    ),
    "bound at import": ("import logging\n\n_now = logging.time.time\n", "time.time"),
    "bound in a default argument": (
        "import logging\n\n\ndef f(now=logging.time.monotonic):\n    return now()\n",
        "time.monotonic",
    ),
    "bound as a class attribute": (
        "import logging\n\n\nclass A:\n    now = logging.time.time_ns\n",
        "time.time_ns",
    ),
    "from-import of a module's import": ("from logging import threading\n", "threading"),
    "from-import of a module's import, renamed": (
        "from logging import time as clock\n\nclock.time()\n",
        "time",
    ),
    "a module alias": ("import logging as l\n\nl.time.time()\n", "time.time"),
    "a name bound to a module": (
        "import logging\n\nt = logging\nt.time.perf_counter()\n",
        "time.perf_counter",
    ),
    "a walrus": ("import logging\n\nif (t := logging.time):\n    t.time()\n", "time"),
    "a tuple assignment": ("import logging\n\na, b = logging, 1\na.time.time()\n", "time.time"),
    "getattr with a literal": (
        "import logging\n\nf = getattr(logging.time, 'time')\n",
        "time.time",
    ),
    "vars with a literal": ("import logging\n\nf = vars(logging)['time'].time\n", "time.time"),
    "__dict__ with a literal": (
        "import logging\n\nf = logging.__dict__['threading']\n",
        "threading",
    ),
    "a function's globals": (
        "import logging\n\nf = logging.Logger.__init__.__globals__['time'].time\n",
        "time.time",
    ),
    "a computed name from a module's namespace": (
        "import logging\n\nname = 'ti' + 'me'\nm = getattr(logging, name)\n",
        "computed name",
    ),
    "vars of a module with a computed key": (
        "import logging\n\nm = vars(logging)[str(1)]\n",
        "computed name",
    ),
    "a class method through an instance": (
        "import datetime\n\nx = datetime.datetime.min.now()\n",
        "datetime.datetime.now",
    ),
    "a class method through a class alias": (
        "from datetime import date as D\n\nx = D.max.today()\n",
        "datetime.date.today",
    ),
    "a C type's method through its C module": ("import _datetime\n", "_datetime"),
    "a class reached without its module": ("import tempfile\n\nr = tempfile._Random()\n", "random"),
    "os re-exporting posix": ("import os as o\n\nx = o.urandom(8)\n", "os.urandom"),
    "os.times": ("import os\n\nx = os.times()\n", "os.times"),
    "from os import times": ("from os import times\n", "os.times"),
    "_uuid": ("import _uuid\n", "_uuid"),
    "_thread": ("from _thread import start_new_thread\n", "_thread"),
    "ssl.RAND_bytes": ("from ssl import RAND_bytes\n", "ssl"),
    "select's timeout": ("import select\n\nselect.select([], [], [], 1.0)\n", "select"),
    "selectors": ("import selectors\n", "selectors"),
    "signal.setitimer": (
        "import signal\n\nsignal.setitimer(signal.ITIMER_REAL, 1.0)\n",
        "signal.setitimer",
    ),
    "signal.alarm": ("from signal import alarm\n", "signal.alarm"),
    "cffi": ("import cffi\n\nffi = cffi.FFI()\nlib = ffi.dlopen(None)\n", "cffi"),
    "_ctypes": ("import _ctypes\n", "_ctypes"),
    "_posixsubprocess": ("import _posixsubprocess\n", "_posixsubprocess"),
    "the entropy device": ("f = open('/dev/urandom', 'rb')\n", "/dev/urandom"),
    "the uptime clock file": ("f = open('/proc/uptime', 'rb')\n", "names a clock file"),
    "a process's start time": (
        "from pathlib import Path\n\nx = Path('/proc/self/stat')\n",
        "names a clock file",
    ),
    "the real-time clock": ("f = open('//dev/./rtc0', 'rb')\n", "names a clock file"),
    "the entropy device as bytes": (
        "import os\n\nfd = os.open(b'/dev/random', 0)\n",
        "/dev/random",
    ),
    "a star import that binds banned names": ("from asyncio import *\n", "asyncio.sleep"),
    "a workspace module's import": (
        "from twinflow.kernel import _other\n\nx = _other.time.time()\n",
        "time.time",
    ),
    "a workspace module's binding": ("from twinflow.kernel._other import _now\n", "time.time"),
    "a relative import of a workspace module's binding": (
        "from ..kernel._other import _now\n",
        "time.time",
    ),
    "a dynamic import reaching through a module": (
        "import importlib\n\nf = importlib.import_module('logging').time.time\n",
        "time.time",
    ),
    "sys.modules reaching through a module": (
        "import sys\n\nf = sys.modules['email.utils'].random\n",
        "random",
    ),
    "operator.attrgetter with a dotted path": (
        "import logging\nimport operator\n\nf = operator.attrgetter('time.time')(logging)\n",
        "time.time",
    ),
    "an aliased attrgetter": (
        "import os\nfrom operator import attrgetter as ag\n\nf = ag('urandom')(os)\n",
        "os.urandom",
    ),
    "operator.methodcaller": (
        "import operator\nimport os\n\nx = operator.methodcaller('urandom', 4)(os)\n",
        "os.urandom",
    ),
    "attrgetter of a computed name": (
        "import operator\nimport os\n\nn = str(1)\nf = operator.attrgetter(n)(os)\n",
        "computed name",
    ),
    "a closure cell": ("def f() -> None:\n    pass\n\n\nx = f.__closure__\n", "__closure__"),
    "a cell's contents": ("x = [c.cell_contents for c in ()]\n", "cell_contents"),
    "a caller's globals": ("import sys\n\nf = sys._getframe().f_back.f_globals\n", "f_globals"),
    "a generator frame's locals": ("g = (x for x in ())\nf = g.gi_frame.f_locals\n", "f_locals"),
    "a traceback frame's globals by getattr": (
        "def f(e: Exception) -> object:\n    return getattr(e.__traceback__.tb_frame, 'f_globals')\n",
        "f_globals",
    ),
    "a wrapped function's globals": (
        "import functools\n\nf = functools.cache(len).__wrapped__.__globals__\n",
        "__globals__",
    ),
    "gc's walkers": ("import gc\n\nx = gc.get_referents(1)\n", "gc.get_referents"),
    "inspect's closure reader": ("from inspect import getclosurevars\n", "inspect.getclosurevars"),
    "noqa does not silence it": (
        "import logging\n\nx = logging.time.time()  # noqa\n",
        "time.time",
    ),
    "type: ignore does not silence it": (
        "import logging\n\nx = logging.time.time()  # type: ignore[attr-defined]\n",
        "time.time",
    ),
}

# A kernel module the variants above reach into: it imports time and binds a clock (allowed
# there, the home of real I/O; not a way for other packages to reach the clock).
OTHER_MODULE = "packages/twinflow-kernel/src/twinflow/kernel/_other.py"
OTHER_SOURCE = "import time\n\n_now = time.time\n"


@pytest.mark.parametrize(("source", "resolved"), RESOLVED.values(), ids=RESOLVED.keys())
def test_names_are_resolved_the_way_python_resolves_them(
    source: str, resolved: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """Every path to a banned object through modules, aliases and bindings fails, naming it."""
    root = _tree(tmp_path, repo_root, AGENT_MODULE, source)
    (root / OTHER_MODULE).write_text(OTHER_SOURCE, encoding="utf-8")
    done = run_gate("determinism", "--root", root)
    assert 1 == done.returncode, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if "_fixture.py:" in line]
    assert any(resolved in line for line in lines), done.stderr


# Paths through modules that are the module's own (submodules, os.path) or that the file
# imported itself are not evasions.
NOT_EVASIONS = {
    "os.path": "import os\n\nx = os.path.join('a', 'b')\n",
    "from os import path": "from os import path\n\nx = path.join('a')\n",
    "a submodule from its package": "from json import decoder\n\nx = decoder.JSONDecoder()\n",
    "a submodule by attribute": "import collections.abc\n\nx = collections.abc.Mapping\n",
    "a module the file imports itself": "import logging\nimport time\n\nx = logging.time.struct_time((2000, 1, 1, 0, 0, 0, 0, 1, 0))\n",
    "a pure datetime constructor": "import datetime\n\nx = datetime.datetime.min.replace(year=2000)\n",
    "a namespace read by a literal": "import json\n\nf = vars(json)['dumps']\n",
    "a workspace module's own function": "from twinflow.kernel import _other\n\nx = _other.__name__\n",
}


@pytest.mark.parametrize("source", NOT_EVASIONS.values(), ids=NOT_EVASIONS.keys())
def test_resolution_raises_no_false_alarm(
    source: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """A module's own submodules, and modules the file imports itself, pass."""
    root = _tree(tmp_path, repo_root, AGENT_MODULE, source)
    (root / OTHER_MODULE).write_text(OTHER_SOURCE, encoding="utf-8")
    done = run_gate("determinism", "--root", root)
    assert 0 == done.returncode, done.stdout + done.stderr


# ------------------------------------------------------------- pure uses of banned names

# Each spells a banned name (ruff's pass sees the spelling) without reaching a clock, entropy or
# a wait: a given time formatted, a constant, a re-export of a module that is not banned, error
# reporting that walks frames, prose that names a device, a package's own submodule.
PURE = {
    "strftime of a given time": "import time\n\nx = time.strftime('%Y', time.gmtime(0))\n",
    "gmtime(0) from-imported": "from time import gmtime\n\nx = gmtime(0)\n",
    "localtime of a given time, aliased": (
        "import time as t\n\n\ndef f(s: float) -> str:\n    return t.asctime(t.localtime(s))\n"
    ),
    "ctime of a given time, renamed": "from time import ctime as c\n\nx = c(0.0)\n",
    "secrets.compare_digest": "import secrets\n\nx = secrets.compare_digest(b'a', b'b')\n",
    "compare_digest from-imported": (
        "from secrets import compare_digest as same\n\nx = same('a', 'b')\n"
    ),
    "select's constants": "import select\n\nMASK = select.POLLIN | select.POLLOUT\n",
    "select's constants from-imported": "from select import POLLIN, POLLPRI\n\nx = POLLIN | POLLPRI\n",
    "select's error class": "import select as s\n\nE = s.error\n",
    "__wrapped__ of a decorated function": (
        "import functools\n\n\n@functools.cache\ndef f() -> int:\n    return 1\n\n\ng = f.__wrapped__\n"
    ),
    "__wrapped__ by getattr": "import os\n\nf = getattr(os.getcwd, '__wrapped__', None)\n",
    "a traceback's frames in error reporting": (
        "def where(exc: BaseException) -> list[str]:\n"
        "    tb, out = exc.__traceback__, []\n"
        "    while tb is not None:\n"
        "        out.append(f'{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}')\n"
        "        tb = tb.tb_next\n"
        "    return out\n"
    ),
    "a caller's line number": "import sys\n\nline = sys._getframe().f_back.f_lineno\n",
    "a docstring naming the device": '"""Never reads /dev/urandom: ids come from the kernel."""\n',
    "a function docstring that is only the path": 'def f() -> None:\n    """/dev/random"""\n',
    "a message naming the device": "MSG = b'do not open /dev/urandom here'\n",
    "prose naming a clock file": "MSG = 'the guard refuses /proc/uptime and /proc/stat'\n",
    "a file that is not a clock": "P = '/proc/self/status'\n",
    "an own submodule relative to __package__": (
        "import importlib\n\nm = importlib.import_module('._other', __package__)\n"
    ),
    "an own submodule by package=__package__": (
        "from importlib import import_module\n\nm = import_module('._a.b', package=__package__)\n"
    ),
    "an own submodule by an f-string of __package__": (
        "import importlib\n\nm = importlib.import_module(f'{__package__}._other')\n"
    ),
}


@pytest.mark.parametrize("source", PURE.values(), ids=PURE.keys())
def test_a_pure_use_of_a_banned_name_passes(
    source: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """A banned spelling that reaches no clock, entropy or wait passes in twinflow.agent."""
    root = _tree(tmp_path, repo_root, AGENT_MODULE, source)
    done = run_gate("determinism", "--root", root)
    assert (0, "") == (done.returncode, done.stderr), done.stdout


# Beside each pure use, the real thing: each must still fail, naming what it reaches.
STILL_REFUSED = {
    "gmtime with no argument": ("import time\n\nx = time.gmtime()\n", "time.gmtime"),
    "gmtime of None": ("import time\n\nx = time.gmtime(None)\n", "time.gmtime"),
    "gmtime of a starred tuple": ("import time\n\nx = time.gmtime(*())\n", "time.gmtime"),
    "strftime of the current time": ("import time\n\nx = time.strftime('%Y')\n", "time.strftime"),
    "gmtime handed on": ("import time\n\nf = time.gmtime\n", "time.gmtime"),
    "gmtime from-imported, once without an argument": (
        "from time import gmtime\n\nx = gmtime(0)\ny = gmtime()\n",
        "time.gmtime",
    ),
    "localtime renamed, without an argument": (
        "from time import localtime as lt\n\nx = lt()\n",
        "time.localtime",
    ),
    "secrets.token_hex beside compare_digest": (
        "import secrets\n\nx = secrets.compare_digest('a', 'b')\ny = secrets.token_hex(8)\n",
        "secrets",
    ),
    "secrets.token_hex": ("from secrets import token_hex\n\nx = token_hex(8)\n", "secrets"),
    "choice beside compare_digest": ("from secrets import choice, compare_digest\n", "secrets"),
    "secrets.SystemRandom": ("from secrets import SystemRandom\n", "secrets"),
    "select.select beside a constant": (
        "import select\n\nm = select.POLLIN\nselect.select([], [], [], 0)\n",
        "select",
    ),
    "select.poll from-imported with a constant": ("from select import POLLIN, poll\n", "select"),
    "the module select handed on": ("import select\n\nm = select\n", "select"),
    "an object a banned module holds": (
        "import ctypes\n\nctypes.pythonapi.Py_IsInitialized()\n",
        "ctypes",
    ),
    "a ctypes function pointer from-imported": (
        "from ctypes import memmove\n\nmemmove(0, 0, 0)\n",
        "ctypes",
    ),
    "a banned module's hidden instance": ("import random\n\nx = random._inst\n", "random"),
    "a banned module's C function under a public name": (
        "import threading\n\nx = threading.get_ident()\n",
        "threading",
    ),
    "the entropy device, doubled slashes": ("f = open('//dev/./urandom', 'rb')\n", "urandom"),
    "the entropy device as a file URL": ("u = 'file:///dev/urandom'\n", "urandom"),
    "the entropy device padded": ("f = open(' /dev/random '.strip(), 'rb')\n", "random"),
    "a computed name after __package__": (
        "import importlib\n\nx = '.y'\nm = importlib.import_module(f'{__package__}{x}')\n",
        "computed name",
    ),
    "a computed submodule of __package__": (
        "import importlib\n\nx = 'y'\nm = importlib.import_module(f'{__package__}.{x}')\n",
        "computed name",
    ),
}


@pytest.mark.parametrize(("source", "named"), STILL_REFUSED.values(), ids=STILL_REFUSED.keys())
def test_the_real_thing_beside_a_pure_use_is_still_refused(
    source: str, named: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """A clock read, entropy, a wait or a computed import fails though a pure form passes."""
    root = _tree(tmp_path, repo_root, AGENT_MODULE, source)
    done = run_gate("determinism", "--root", root)
    lines = [line for line in done.stderr.splitlines() if "_fixture.py:" in line]
    assert (1, True) == (done.returncode, any(named in line for line in lines)), done.stderr


# ------------------------------------------------------- deny by default at the module level

# Each reaches a standard-library module off the allowlist (stdlib.toml beside the table) by a
# different path: what the gate must name. None of these modules is banned by name.
OFF_THE_ALLOWLIST = {
    "a submodule by attribute chain": (
        "import logging.handlers\n\nh = logging.handlers.SocketHandler\n",
        "logging.handlers",
    ),
    "an importer by from-import": (
        "from logging import config\n\nconfig.dictConfig({})\n",
        "logging.config",
    ),
    "a helper that spawns": ("import uuid\n\nx = uuid._get_command_stdout\n", "uuid"),
    "a pager that spawns": ("import pydoc\n\npydoc.pipepager('x', 'cat')\n", "pydoc"),
    "a mail client imported and never used": ("import imaplib\n", "imaplib"),
    "a database": ("import dbm\n\ndb = dbm.open('x')\n", "dbm"),
    "a tracer": ("import trace\n\nt = trace.Trace()\n", "trace"),
    "a C module": ("import _pickle\n\nx = _pickle.loads\n", "_pickle"),
    "a C module built in": ("import _signal\n\nx = _signal.getsignal\n", "_signal"),
    "a C module used only for an allowed module's object": (
        "import _functools\n\nx = _functools.reduce\n",
        "_functools",
    ),
    "a C module from-imported": ("from _collections import deque\n", "_collections"),
    "a star import": ("from pickle import *\n", "pickle"),
    "a re-export by a workspace module": (
        "from twinflow.kernel._other import loads\n\nx = loads(b'')\n",
        "_pickle",
    ),
    "a module an allowed module imported": (
        "import traceback\n\nx = traceback.linecache.getline\n",
        "linecache",
    ),
    "getattr with a literal": (
        "import traceback\n\nx = getattr(traceback, 'linecache')\n",
        "linecache",
    ),
    "a literal dynamic import": (
        "import importlib\n\nm = importlib.import_module('logging.handlers')\n",
        "logging.handlers",
    ),
    "__import__ with a literal": ("m = __import__('xml.sax')\n", "xml.sax"),
    "a relative dynamic import against a literal package": (
        "import importlib\n\nm = importlib.import_module('.handlers', 'logging')\n",
        "logging.handlers",
    ),
    "__import__'s fromlist": (
        "m = __import__('email', fromlist=['utils'])\n",
        "email.utils",
    ),
    "importlib's reload": ("import importlib\n\nf = importlib.reload\n", "importlib"),
    "import_module handed on, not called": (
        "from importlib import import_module\n\nf = import_module\n",
        "importlib",
    ),
    "pkgutil": ("import pkgutil\n\nx = pkgutil.resolve_name('json:dumps')\n", "pkgutil"),
    "runpy": ("import runpy\n\nrunpy.run_path('x.py')\n", "runpy"),
    "doctest": ("import doctest\n\ndoctest.testmod()\n", "doctest"),
    "an entry point's loader": (
        "from importlib.metadata import EntryPoint\n",
        "importlib.metadata",
    ),
    "asyncio's queue, defined in a submodule": (
        "import asyncio\n\nx = asyncio.Queue\n",
        "asyncio.queues",
    ),
}
# The kernel module of the re-export variant: pickle is the kernel's business there.
REEXPORTING_SOURCE = "from pickle import loads\n"


@pytest.mark.parametrize(
    ("source", "module"),
    OFF_THE_ALLOWLIST.values(),
    ids=OFF_THE_ALLOWLIST.keys(),
)
def test_a_module_off_the_allowlist_fails_however_reached(
    source: str, module: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """Every path to a standard-library module off the allowlist fails, naming the module."""
    root = _tree(tmp_path, repo_root, AGENT_MODULE, source)
    (root / OTHER_MODULE).write_text(REEXPORTING_SOURCE, encoding="utf-8")
    done = run_gate("determinism", "--root", root)
    assert 1 == done.returncode, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if "_fixture.py:" in line]
    assert any(f"module {module} is not on the allowlist" in line for line in lines), done.stderr


ON_THE_ALLOWLIST = {
    "os.path": "import os.path\n\nx = os.path.join('a', 'b')\n",
    "a C function of an allowed module": "import functools\n\nf = functools.reduce\n",
    "a digest": "import hashlib\n\nx = hashlib.sha256(b'').hexdigest()\n",
    "a class a submodule defines": "from json import JSONDecodeError\n",
    "a stream": "import io\n\nx = io.StringIO()\n",
    "an abstract base": "from collections.abc import Mapping\n",
    "a literal dynamic import of an allowed module": (
        "import importlib\n\nm = importlib.import_module('json')\n"
    ),
    "a star import of an allowed module": "from shlex import *\n\nx = split('a b')\n",
    "select's constants": "import select\n\nMASK = select.POLLIN | select.POLLOUT\n",
}


@pytest.mark.parametrize("source", ON_THE_ALLOWLIST.values(), ids=ON_THE_ALLOWLIST.keys())
def test_the_allowlist_raises_no_false_alarm(
    source: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """Allowed modules, their C halves, and data of a module off the list pass."""
    root = _tree(tmp_path, repo_root, AGENT_MODULE, source)
    done = run_gate("determinism", "--root", root)
    assert (0, "") == (done.returncode, done.stderr), done.stdout


REFUSED_ATTRIBUTES = {
    "sys.modules, an importer's table": ("import sys\n\nm = sys.modules\n", "sys.modules"),
    "meta_path from-imported": ("from sys import meta_path\n", "sys.meta_path"),
    "path_hooks by getattr": ("import sys\n\nh = getattr(sys, 'path_hooks')\n", "sys.path_hooks"),
    "settrace through os": ("import os\nimport sys\n\nos.sys.settrace(None)\n", "sys.settrace"),
}


@pytest.mark.parametrize(
    ("source", "dotted"), REFUSED_ATTRIBUTES.values(), ids=REFUSED_ATTRIBUTES.keys()
)
def test_an_allowed_modules_refused_attribute_fails_in_a_shipped_module(
    source: str, dotted: str, tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """An importer's table inside an allowed module (sys.modules, meta_path) fails, named."""
    root = _tree(tmp_path, repo_root, AGENT_MODULE, source)
    done = run_gate("determinism", "--root", root)
    assert 1 == done.returncode, done.stdout + done.stderr
    assert f"{dotted} is refused in a shipped module" in done.stderr


def test_a_module_off_the_allowlist_passes_in_the_kernel_and_in_tests(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """The kernel and a member's tests may import what shipped modules may not."""
    root = _tree(tmp_path, repo_root, KERNEL_MODULE, "import logging.handlers\n")
    test = root / "packages/twinflow-agent/tests/test_x.py"
    test.parent.mkdir(parents=True)
    test.write_text("import pickle\n", encoding="utf-8")
    done = run_gate("determinism", "--root", root)
    assert 0 == done.returncode, done.stdout + done.stderr


def test_a_grant_holds_for_its_file_only(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """A granted module passes in the file its row names and fails in any other."""
    source = "import queue\n\nq: queue.SimpleQueue[str] = queue.SimpleQueue()\n"
    granted = "packages/twinflow-agent/src/twinflow/agent/_observe.py"
    root = _tree(tmp_path, repo_root, granted, source)
    (root / AGENT_MODULE).write_text(source, encoding="utf-8")
    done = run_gate("determinism", "--root", root)
    assert 1 == done.returncode, done.stdout + done.stderr
    named = {line.split(":")[0] for line in done.stderr.splitlines() if "allowlist" in line}
    assert {f"  {AGENT_MODULE}"} == named


def test_an_allowlist_row_without_a_reason_cannot_run(
    tmp_path: Path, repo_root: Path, run_gate: GateRunner
) -> None:
    """Every row of the allowlist carries its reason; one without stops the gate (exit 2)."""
    root = _tree(tmp_path, repo_root, AGENT_MODULE, "x = 1\n")
    path = root / ALLOWLIST
    path.write_text(
        path.read_text(encoding="utf-8") + '\n[[allowed]]\nmodule = "pickle"\n', encoding="utf-8"
    )
    done = run_gate("determinism", "--root", root)
    assert 2 == done.returncode, done.stdout + done.stderr
    assert "needs a module and a reason" in done.stderr
