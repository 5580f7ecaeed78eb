"""User code from named directories: one resolver, one search order, sys.path left as it was."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from twinflow._base._code import importing_from, resolve_dotted
from twinflow._base._errors import UserError


@pytest.fixture
def in_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The current directory is a fresh one, on sys.path as ``''`` (as under ``python -m``)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    yield cwd


def test_a_module_is_imported_from_the_named_directory(tmp_path: Path) -> None:
    """A dotted path resolves in the directory named, and sys.path is as before afterwards."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "tc_named_tool.py").write_text("def add(a, b):\n    return a + b\n")
    before = list(sys.path)
    add = resolve_dotted("tc_named_tool:add", [code])
    assert (5, before) == (add(2, 3), sys.path)  # type: ignore[operator]  # resolve_dotted returns object


def test_never_from_the_current_directory(in_directory: Path) -> None:
    """A module in the current directory is not imported, and the error lists where it looked."""
    (in_directory / "tc_planted.py").write_text("raise SystemExit('imported')\n")
    code = in_directory.parent / "named"
    code.mkdir()
    with pytest.raises(UserError) as caught:
        resolve_dotted("tc_planted:x", [code])
    assert (
        f"searched {code.resolve()}, then the installed packages; never the current directory"
    ) in str(caught.value)
    assert "tc_planted" not in sys.modules


def test_with_no_directory_the_error_says_installed_packages(in_directory: Path) -> None:
    """Without a named directory, the error says only the installed packages were searched."""
    with pytest.raises(UserError) as caught:
        resolve_dotted("tc_missing_module:x")
    assert "searched the installed packages; never the current directory" in str(caught.value)


def test_the_block_names_its_directories_in_the_error(tmp_path: Path) -> None:
    """Inside a command's block, a resolver error names the block's directories too."""
    with importing_from([tmp_path]), pytest.raises(UserError) as caught:
        resolve_dotted("tc_missing_module:x")
    assert f"searched {tmp_path.resolve()}, then the installed packages" in str(caught.value)


def test_the_block_restores_sys_path_and_hides_the_current_directory(in_directory: Path) -> None:
    """During the block the named directory leads and '' is gone; after it, both are back."""
    before = list(sys.path)
    with importing_from([in_directory.parent]):
        inside = list(sys.path)
        sys.path.append("/added/by/user/code")
    assert (str(in_directory.parent.resolve()), False) == (inside[0], "" in inside)
    assert ["/added/by/user/code", *before] == sys.path


def test_the_current_directory_when_named_is_searched(in_directory: Path) -> None:
    """Naming the current directory (preflight's choice) is explicit, so it is searched."""
    (in_directory / "tc_here.py").write_text("VALUE = 7\n")
    assert 7 == resolve_dotted("tc_here:VALUE", [Path(os.getcwd())])
