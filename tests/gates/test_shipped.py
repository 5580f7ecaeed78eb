"""The shipping gate: what the distributions carry is what the other gates read."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

GateRunner = Callable[..., subprocess.CompletedProcess[str]]

MEMBER = "packages/twinflow-trace"
PACKAGE = f"{MEMBER}/src/twinflow/trace"
BACKEND = """
[build-system]
requires = ["uv_build>=0.9,<0.14"]
build-backend = "uv_build"
"""
LOCKED = """
[[package]]
name = "twinflow-trace"
version = "0.1.0"
source = { editable = "packages/twinflow-trace" }
"""


def _tree(tmp_path: Path, files: dict[str, str | bytes], backend: str = "", lock: str = "") -> Path:
    """A workspace of one member (twinflow.trace, src layout) with a lock, plus `files`."""
    root = tmp_path / "tree"
    (root / PACKAGE).mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        '[tool.uv.workspace]\nmembers = ["packages/*"]\n', encoding="utf-8"
    )
    (root / MEMBER / "pyproject.toml").write_text(
        '[project]\nname = "twinflow-trace"\nversion = "0.1.0"\nrequires-python = ">=3.11"\n'
        f'{BACKEND}\n[tool.uv.build-backend]\nmodule-name = "twinflow.trace"\n{backend}',
        encoding="utf-8",
    )
    (root / PACKAGE / "__init__.py").write_text('"""Fixture."""\n', encoding="utf-8")
    (root / "uv.lock").write_text(
        f'version = 1\nrevision = 3\nrequires-python = ">=3.11"\n{LOCKED}{lock}', encoding="utf-8"
    )
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


# Each ships something no gate read, or locks code from where no gate looks.
SHIPPED = {
    "a .pth through the backend's data": (
        {f"{MEMBER}/data/evil.pth": "import os\n"},
        'data = { data = "data" }\n',
        "",
        "evil.pth",
    ),
    "modules through the backend's purelib data": (
        {f"{MEMBER}/extra/hidden.py": "x = 1\n"},
        'data = { purelib = "extra" }\n',
        "",
        ".data folder",
    ),
    "a .pth inside the package": ({f"{PACKAGE}/evil.pth": "import os\n"}, "", "", "evil.pth"),
    "a zip of modules as package data": (
        {f"{PACKAGE}/mods.zip": b"PK\x05\x06" + bytes(18)},
        "",
        "",
        "mods.zip",
    ),
    "a wheel inside the package": ({f"{PACKAGE}/vendored.whl": b"PK"}, "", "", "vendored.whl"),
    "a compiled module": (
        {f"{PACKAGE}/_fast.cpython-311-x86_64-linux-gnu.so": b"\x7fELF"},
        "",
        "",
        "_fast",
    ),
    "a Windows extension module": ({f"{PACKAGE}/_fast.pyd": b"MZ"}, "", "", "_fast.pyd"),
    "a shared library": ({f"{PACKAGE}/libfast.so.1": b"\x7fELF"}, "", "", "libfast.so.1"),
    "module-root in tests": (
        {f"{MEMBER}/tests/twinflow/trace/__init__.py": "x = 1\n"},
        'module-root = "tests"\n',
        "",
        "twinflow/trace/__init__.py",
    ),
    "module-root in tests, the same text as src": (
        {
            f"{MEMBER}/tests/twinflow/trace/__init__.py": '"""Fixture."""\n',
            f"{MEMBER}/tests/twinflow/trace/_more.py": "x = 1\n",
        },
        'module-root = "tests"\n',
        "",
        "_more.py",
    ),
    "a flat module beside an empty src": (
        {f"{MEMBER}/twinflow/trace/__init__.py": "x = 1\n"},
        'module-root = ""\n',
        "",
        "twinflow/trace/__init__.py",
    ),
    "a non-member path dependency": (
        {},
        "",
        '\n[[package]]\nname = "helper"\nversion = "1"\nsource = { directory = "../helper" }\n',
        "helper comes from directory",
    ),
    "an editable path outside the workspace": (
        {},
        "",
        '\n[[package]]\nname = "helper"\nversion = "1"\nsource = { editable = "vendor/helper" }\n',
        "helper comes from editable",
    ),
    "a git source": (
        {},
        "",
        '\n[[package]]\nname = "g"\nversion = "1"\nsource = { git = "https://example.com/g?rev=1#abc" }\n',
        "g comes from git",
    ),
    "a URL source": (
        {},
        "",
        '\n[[package]]\nname = "u"\nversion = "1"\nsource = { url = "https://example.com/u-1.tar.gz" }\n',
        "u comes from url",
    ),
    "another registry": (
        {},
        "",
        '\n[[package]]\nname = "r"\nversion = "1"\nsource = { registry = "https://mirror.example/simple" }\n',
        "r comes from registry",
    ),
}


@pytest.mark.parametrize(
    ("files", "backend", "lock", "named"), SHIPPED.values(), ids=SHIPPED.keys()
)
def test_what_ships_is_what_the_gates_read(
    files: dict[str, str | bytes],
    backend: str,
    lock: str,
    named: str,
    tmp_path: Path,
    run_gate: GateRunner,
    uv: str,
) -> None:
    """Each way of shipping or locking code no gate read fails, naming it."""
    root = _tree(tmp_path, files, backend, lock)
    done = run_gate("shipped", "--root", root, "--uv", uv)
    assert 1 == done.returncode, done.stdout + done.stderr
    assert named in done.stderr, done.stderr


def test_a_plain_member_ships_clean_and_says_what_it_checked(
    tmp_path: Path, run_gate: GateRunner, uv: str
) -> None:
    """Source and a data file of the package pass; the summary counts builds and files."""
    root = _tree(tmp_path, {f"{PACKAGE}/table.toml": "a = 1\n", f"{PACKAGE}/_x.py": "y = 2\n"})
    done = run_gate("shipped", "--root", root, "--uv", uv)
    assert 0 == done.returncode, done.stdout + done.stderr
    assert "1 wheels and 1 sdists built" in done.stdout


def test_a_lock_it_cannot_read_is_exit_2(tmp_path: Path, run_gate: GateRunner, uv: str) -> None:
    """An unreadable uv.lock is a usage error: exit 2, one line."""
    root = _tree(tmp_path, {})
    (root / "uv.lock").write_text("[[package\n", encoding="utf-8")
    done = run_gate("shipped", "--root", root, "--uv", uv)
    assert (2, 1) == (done.returncode, len(done.stderr.strip().splitlines())), done.stderr


def test_the_repository_ships_what_its_gates_read(run_gate: GateRunner, uv: str) -> None:
    """Every member of this workspace builds, and ships only what the gates read."""
    done = run_gate("shipped", "--uv", uv)
    assert 0 == done.returncode, done.stdout + done.stderr
