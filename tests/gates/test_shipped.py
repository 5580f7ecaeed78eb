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


# ------------------------------------------- one distribution per package, and what loads

KERNEL = "packages/twinflow-kernel"


def _kernel(root: Path, module_names: str = '"twinflow.kernel"', extra: str = "") -> None:
    """Add a second member, twinflow-kernel, to a tree made by _tree."""
    (root / KERNEL / "src/twinflow/kernel").mkdir(parents=True)
    (root / KERNEL / "src/twinflow/kernel/__init__.py").write_text('"""K."""\n', encoding="utf-8")
    (root / KERNEL / "pyproject.toml").write_text(
        '[project]\nname = "twinflow-kernel"\nversion = "0.1.0"\nrequires-python = ">=3.11"\n'
        f"{BACKEND}\n[tool.uv.build-backend]\nmodule-name = {module_names}\n{extra}",
        encoding="utf-8",
    )
    with (root / "uv.lock").open("a", encoding="utf-8") as lock:
        lock.write(
            '\n[[package]]\nname = "twinflow-kernel"\nversion = "0.1.0"\n'
            'source = { editable = "packages/twinflow-kernel" }\n'
        )


# Each: files to add, the trace member's backend settings, whether a kernel member is added
# (with its module-name list), and what the gate must name.
OWNERSHIP = {
    "trace ships twinflow.kernel in its module-name list": (
        {
            f"{MEMBER}/src/twinflow/kernel/__init__.py": "",
            f"{MEMBER}/src/twinflow/kernel/_guard.py": "x = 1\n",
        },
        'module-name = ["twinflow.trace", "twinflow.kernel"]\n',
        '"twinflow.kernel"',
        "holds twinflow.kernel, which twinflow-kernel owns",
    ),
    "the kernel member ships the trace's private plumbing": (
        {
            f"{MEMBER}/src/twinflow/_base/__init__.py": "",
            f"{KERNEL}/src/twinflow/_base/__init__.py": "",
            f"{KERNEL}/src/twinflow/_base/_extra.py": "x = 1\n",
        },
        'module-name = ["twinflow.trace", "twinflow._base"]\n',
        '["twinflow.kernel", "twinflow._base"]',
        "holds twinflow._base, which no distribution owns",
    ),
    "trace ships the kernel's package with no kernel member": (
        {f"{MEMBER}/src/twinflow/kernel/__init__.py": "x = 1\n"},
        'module-name = ["twinflow.trace", "twinflow.kernel"]\n',
        None,
        "holds twinflow.kernel, which no distribution owns",
    ),
    "the kernel member ships a module under twinflow.trace": (
        {
            f"{KERNEL}/src/twinflow/trace/__init__.py": "",
            f"{KERNEL}/src/twinflow/trace/_shim.py": "x = 1\n",
        },
        "",
        '["twinflow.kernel", "twinflow.trace"]',
        "holds twinflow.trace, which twinflow-trace owns",
    ),
    "a namespace build of the whole twinflow folder": (
        {f"{MEMBER}/src/twinflow/kernel/__init__.py": "x = 1\n"},
        'module-name = "twinflow"\nnamespace = true\n',
        '"twinflow.kernel"',
        "holds twinflow.kernel, which twinflow-kernel owns",
    ),
    "an __init__ that makes the namespace a package": (
        {f"{MEMBER}/src/twinflow/__init__.py": "x = 1\n"},
        'module-name = "twinflow"\nnamespace = true\n',
        None,
        "twinflow.__init__, which no distribution owns",
    ),
    "a source folder the build does not ship still counts": (
        {f"{MEMBER}/src/twinflow/kernel/_spare.py": "x = 1\n"},
        "",
        '"twinflow.kernel"',
        "twinflow-trace holds twinflow.kernel",
    ),
}


@pytest.mark.parametrize(
    ("files", "backend", "kernel", "named"), OWNERSHIP.values(), ids=OWNERSHIP.keys()
)
def test_a_member_ships_only_the_package_its_distribution_owns(
    files: dict[str, str | bytes],
    backend: str,
    kernel: str | None,
    named: str,
    tmp_path: Path,
    run_gate: GateRunner,
    uv: str,
) -> None:
    """A module under another member's package, however the build settings ship it, fails."""
    root = _tree(tmp_path, {})
    if kernel is not None:
        _kernel(root, kernel)
    pyproject = root / MEMBER / "pyproject.toml"
    if backend:
        text = pyproject.read_text(encoding="utf-8")
        pyproject.write_text(
            text.replace('module-name = "twinflow.trace"\n', backend), encoding="utf-8"
        )
    for relative, content in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(str(content), encoding="utf-8")
    done = run_gate("shipped", "--root", root, "--uv", uv)
    assert 1 == done.returncode, done.stdout + done.stderr
    assert named in done.stderr, done.stderr


def test_the_private_plumbing_ships_with_the_member_that_holds_it(
    tmp_path: Path, run_gate: GateRunner, uv: str
) -> None:
    """twinflow._base in the trace member's wheel, beside a kernel member, passes."""
    root = _tree(tmp_path, {f"{MEMBER}/src/twinflow/_base/__init__.py": ""})
    _kernel(root)
    pyproject = root / MEMBER / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    pyproject.write_text(
        text.replace(
            'module-name = "twinflow.trace"', 'module-name = ["twinflow.trace", "twinflow._base"]'
        ),
        encoding="utf-8",
    )
    done = run_gate("shipped", "--root", root, "--uv", uv)
    assert 0 == done.returncode, done.stdout + done.stderr


ENTRY_POINTS = {
    "a pytest plugin from no shipped module": (
        '[project.entry-points.pytest11]\nhelper = "evil_plugin"\n',
        "names evil_plugin",
    ),
    "a console script in another member's module": (
        '[project.scripts]\nrun = "twinflow.kernel._launch:main"\n',
        "names twinflow.kernel._launch",
    ),
    "a gui script into the standard library": (
        '[project.gui-scripts]\nrun = "runpy:run_path"\n',
        "names runpy",
    ),
    "a plugin group naming a third-party module": (
        '[project.entry-points."twinflow.plugins"]\nx = "yaml.constructor:Constructor"\n',
        "names yaml.constructor",
    ),
    "a console script into a module the package does not have": (
        '[project.scripts]\nrun = "twinflow.trace.missing:main"\n',
        "names twinflow.trace.missing",
    ),
}


@pytest.mark.parametrize(("table", "named"), ENTRY_POINTS.values(), ids=ENTRY_POINTS.keys())
def test_entry_points_name_only_modules_the_wheel_ships(
    table: str, named: str, tmp_path: Path, run_gate: GateRunner, uv: str
) -> None:
    """An entry point of any group naming a module the wheel does not ship fails, naming it."""
    root = _tree(tmp_path, {})
    pyproject = root / MEMBER / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    pyproject.write_text(text.replace("\n[build-system]", f"\n{table}\n[build-system]", 1))
    done = run_gate("shipped", "--root", root, "--uv", uv)
    assert 1 == done.returncode, done.stdout + done.stderr
    assert named in done.stderr, done.stderr


def test_an_entry_point_into_the_wheels_own_module_passes(
    tmp_path: Path, run_gate: GateRunner, uv: str
) -> None:
    """A console script and a plugin naming the package's own modules pass."""
    root = _tree(tmp_path, {f"{PACKAGE}/_main.py": "def main() -> None:\n    pass\n"})
    pyproject = root / MEMBER / "pyproject.toml"
    table = (
        '[project.scripts]\nrun = "twinflow.trace._main:main"\n'
        '[project.entry-points."twinflow.plugins"]\nx = "twinflow.trace"\n'
    )
    text = pyproject.read_text(encoding="utf-8")
    pyproject.write_text(text.replace("\n[build-system]", f"\n{table}\n[build-system]", 1))
    done = run_gate("shipped", "--root", root, "--uv", uv)
    assert 0 == done.returncode, done.stdout + done.stderr


LOADABLE = {
    "a .pyw module": ({f"{PACKAGE}/_win.pyw": "import os\n"}, "_win.pyw"),
    "a pickle": ({f"{PACKAGE}/model.pkl": b"\x80\x04\x95"}, "model.pkl"),
    "a joblib dump": ({f"{PACKAGE}/cache.joblib": b"\x80\x04"}, "cache.joblib"),
    "a pickle named json": ({f"{PACKAGE}/table.json": b"\x80\x05\x95\x00"}, "table.json"),
    "an ELF named toml": ({f"{PACKAGE}/banned.toml": b"\x7fELF\x02\x01"}, "banned.toml"),
    "a zip named json": ({f"{PACKAGE}/schema.json": b"PK\x03\x04rest"}, "schema.json"),
    "a pyc named json": ({f"{PACKAGE}/x.json": b"\xa7\r\r\n" + bytes(12)}, "x.json"),
    "a file without a suffix": ({f"{PACKAGE}/payload": "data\n"}, "payload"),
    "a shell script": ({f"{PACKAGE}/setup.sh": "echo\n"}, "setup.sh"),
    "a protocol-0 pickle under an unknown suffix": (
        {f"{PACKAGE}/state.dat": "cos\nsystem\n(S'id'\ntR.\n"},
        "state.dat",
    ),
}


@pytest.mark.parametrize(("files", "named"), LOADABLE.values(), ids=LOADABLE.keys())
def test_a_loadable_file_in_a_package_fails(
    files: dict[str, str | bytes], named: str, tmp_path: Path, run_gate: GateRunner, uv: str
) -> None:
    """A pickle, .pyw, binary or any file of a kind DATA does not list fails, by suffix or bytes."""
    root = _tree(tmp_path, files)
    done = run_gate("shipped", "--root", root, "--uv", uv)
    assert 1 == done.returncode, done.stdout + done.stderr
    assert named in done.stderr, done.stderr
